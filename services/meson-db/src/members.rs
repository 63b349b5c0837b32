//! Organisations' members and invitations (`meson_core::member`), and a
//! subject's standing in an organisation: what the gate adds to a token's
//! claims.

use crate::DbResult;
use meson_core::member::{Invitation, Member, MemberLimits};
use meson_core::{Error, InvitationId, TenantId};
use sqlx::PgPool;
use uuid::Uuid;

#[derive(Debug, sqlx::FromRow)]
struct MemberRow {
    tenant_id: String,
    subject: String,
    email: Option<String>,
    role: String,
    added_by: String,
    created_at: chrono::DateTime<chrono::Utc>,
    updated_at: chrono::DateTime<chrono::Utc>,
    max_vms: Option<i64>,
    max_vcpus: Option<i64>,
    max_ram_mib: Option<i64>,
}

impl From<MemberRow> for Member {
    fn from(r: MemberRow) -> Self {
        Member {
            tenant: TenantId(r.tenant_id),
            subject: r.subject,
            email: r.email,
            role: r.role,
            added_by: r.added_by,
            created: r.created_at,
            updated: r.updated_at,
            limits: MemberLimits {
                vms: r.max_vms,
                vcpus: r.max_vcpus,
                ram_mib: r.max_ram_mib,
            },
        }
    }
}

#[derive(Debug, sqlx::FromRow)]
struct InvitationRow {
    id: Uuid,
    tenant_id: String,
    email: String,
    role: String,
    invited_by: String,
    created_at: chrono::DateTime<chrono::Utc>,
    expires_at: chrono::DateTime<chrono::Utc>,
    accepted_at: Option<chrono::DateTime<chrono::Utc>>,
    accepted_by: Option<String>,
    revoked_at: Option<chrono::DateTime<chrono::Utc>>,
    revoked_by: Option<String>,
}

impl From<InvitationRow> for Invitation {
    fn from(r: InvitationRow) -> Self {
        Invitation {
            id: InvitationId(r.id),
            tenant: TenantId(r.tenant_id),
            email: r.email,
            role: r.role,
            invited_by: r.invited_by,
            created: r.created_at,
            expires: r.expires_at,
            accepted: r.accepted_at,
            accepted_by: r.accepted_by,
            revoked: r.revoked_at,
            revoked_by: r.revoked_by,
        }
    }
}

/// The last owner would go: the trigger's refusal, as meson's.
fn last_owner(e: sqlx::Error, context: &'static str) -> Error {
    match &e {
        sqlx::Error::Database(d) if d.constraint() == Some("members_last_owner") => {
            Error::Conflict {
                message: "the organisation's last owner cannot leave, be removed or lose the \
                          owner role: make another member owner first"
                    .to_owned(),
            }
        }
        _ => crate::outage::error(context, e),
    }
}

/// The organisation's members, owners first, then by subject.
pub async fn list(pool: &PgPool, tenant: &TenantId) -> Result<Vec<Member>, Error> {
    Ok(sqlx::query_as!(
        MemberRow,
        r#"select tenant_id, subject, email, role, added_by, created_at, updated_at,
                  max_vms, max_vcpus, max_ram_mib
           from members where tenant_id = $1
           order by array_position(array['owner', 'manager', 'editor', 'viewer'], role), subject
           limit 10000"#,
        tenant.as_str()
    )
    .fetch_all(pool)
    .await
    .ctx("listing members")?
    .into_iter()
    .map(Into::into)
    .collect())
}

pub async fn get(pool: &PgPool, tenant: &TenantId, subject: &str) -> Result<Option<Member>, Error> {
    Ok(sqlx::query_as!(
        MemberRow,
        r#"select tenant_id, subject, email, role, added_by, created_at, updated_at,
                  max_vms, max_vcpus, max_ram_mib
           from members where tenant_id = $1 and subject = $2"#,
        tenant.as_str(),
        subject
    )
    .fetch_optional(pool)
    .await
    .ctx("reading a member")?
    .map(Into::into))
}

/// Adds a member; one there already is an `AlreadyExists` on `subject`.
pub async fn insert(pool: &PgPool, m: &Member) -> Result<Member, Error> {
    let row = sqlx::query_as!(
        MemberRow,
        r#"insert into members (tenant_id, subject, email, role, added_by)
           values ($1, $2, $3, $4, $5)
           returning tenant_id, subject, email, role, added_by, created_at, updated_at,
                  max_vms, max_vcpus, max_ram_mib"#,
        m.tenant.as_str(),
        m.subject,
        m.email,
        m.role,
        m.added_by
    )
    .fetch_one(pool)
    .await;
    match row {
        Ok(r) => Ok(r.into()),
        Err(sqlx::Error::Database(e)) if e.constraint() == Some("members_pkey") => {
            Err(Error::AlreadyExists {
                kind: "member",
                field: "subject".to_owned(),
            })
        }
        Err(e) => Err(e).ctx("adding a member"),
    }
}

/// A member's role and limits changed (each when given) by a caller who
/// may act up to `at_most` (its own rank in [`meson_core::member::ROLES`]):
/// the member before and after, or `None` when there is none. A member
/// ranked above `at_most` is `forbidden`; the last owner's role is a
/// `conflict`.
pub async fn update(
    pool: &PgPool,
    tenant: &TenantId,
    subject: &str,
    role: Option<&str>,
    limits: &meson_core::member::LimitsPatch,
    at_most: &str,
) -> Result<Option<(Member, Member)>, Error> {
    let mut tx = pool.begin().await.ctx("changing a member")?;
    let Some(before) = locked(&mut tx, tenant, subject, at_most).await? else {
        return Ok(None);
    };
    let l = MemberLimits {
        vms: limits.vms.unwrap_or(before.max_vms),
        vcpus: limits.vcpus.unwrap_or(before.max_vcpus),
        ram_mib: limits.ram_mib.unwrap_or(before.max_ram_mib),
    };
    let after = sqlx::query_as!(
        MemberRow,
        r#"update members set role = coalesce($3, role), max_vms = $4, max_vcpus = $5,
                  max_ram_mib = $6
           where tenant_id = $1 and subject = $2
           returning tenant_id, subject, email, role, added_by, created_at, updated_at,
                     max_vms, max_vcpus, max_ram_mib"#,
        tenant.as_str(),
        subject,
        role,
        l.vms,
        l.vcpus,
        l.ram_mib
    )
    .fetch_one(&mut *tx)
    .await
    .map_err(|e| last_owner(e, "changing a member"))?;
    tx.commit().await.ctx("changing a member")?;
    Ok(Some((before.into(), after.into())))
}

/// In `tx`: takes the organisation's member lock (`meson_members_lock`)
/// and the member's row, which a caller who may act up to `at_most` may
/// change (one ranked above is `forbidden`); `None` when there is none.
async fn locked(
    tx: &mut crate::Tx<'_>,
    tenant: &TenantId,
    subject: &str,
    at_most: &str,
) -> Result<Option<MemberRow>, Error> {
    sqlx::query!("select meson_members_lock($1)", tenant.as_str())
        .execute(&mut **tx)
        .await
        .ctx("locking an organisation's members")?;
    let found = sqlx::query_as!(
        MemberRow,
        r#"select tenant_id, subject, email, role, added_by, created_at, updated_at,
                  max_vms, max_vcpus, max_ram_mib
           from members where tenant_id = $1 and subject = $2 for update"#,
        tenant.as_str(),
        subject
    )
    .fetch_optional(&mut **tx)
    .await
    .ctx("reading a member")?;
    if let Some(m) = &found {
        above(&m.role, at_most)?;
    }
    Ok(found)
}

/// Removes a member, as [`update`] checks: the member removed, or
/// `None` when there is none.
pub async fn delete(
    pool: &PgPool,
    tenant: &TenantId,
    subject: &str,
    at_most: &str,
) -> Result<Option<Member>, Error> {
    let mut tx = pool.begin().await.ctx("removing a member")?;
    let Some(gone) = locked(&mut tx, tenant, subject, at_most).await? else {
        return Ok(None);
    };
    sqlx::query!(
        "delete from members where tenant_id = $1 and subject = $2",
        tenant.as_str(),
        subject
    )
    .execute(&mut *tx)
    .await
    .map_err(|e| last_owner(e, "removing a member"))?;
    tx.commit().await.ctx("removing a member")?;
    Ok(Some(gone.into()))
}

fn rank(role: &str) -> Option<usize> {
    meson_core::member::ROLES.iter().position(|r| *r == role)
}

/// `forbidden` when `role` ranks above `at_most`.
fn above(role: &str, at_most: &str) -> Result<(), Error> {
    if rank(role) > rank(at_most) {
        return Err(Error::Forbidden {
            message: format!("this member is {role}: above the caller's own role"),
        });
    }
    Ok(())
}

/// An organisation on a subject's way up: itself (depth 0), its parent,
/// ..., with the subject's role there, if any.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rung {
    pub organization: String,
    pub depth: i32,
    pub role: Option<String>,
}

/// `subject`'s standing in `org` and in each organisation above it,
/// nearest first (the system scope's read: whose rows these are is what
/// it finds out).
pub async fn standing(pool: &PgPool, org: &str, subject: &str) -> Result<Vec<Rung>, Error> {
    let rows = sqlx::query!(
        r#"with recursive chain(id, depth) as (
             select $1::text, 0
             union all
             select o.parent_id, c.depth + 1
             from chain c join organizations o on o.id = c.id
             where o.parent_id is not null and c.depth < 32
           )
           select c.id as "id!", c.depth as "depth!", m.role as "role?"
           from chain c left join members m on m.tenant_id = c.id and m.subject = $2
           order by c.depth"#,
        org,
        subject
    )
    .fetch_all(pool)
    .await
    .ctx("reading a subject's standing")?;
    Ok(rows
        .into_iter()
        .map(|r| Rung {
            organization: r.id,
            depth: r.depth,
            role: r.role,
        })
        .collect())
}

/// Every organisation `subject` is a member of, and those below them it
/// holds as an owner or manager: `(organisation, role, inherited)`
/// (the system scope's read).
pub async fn memberships(
    pool: &PgPool,
    subject: &str,
) -> Result<Vec<(String, String, bool)>, Error> {
    let rows = sqlx::query!(
        r#"with recursive own as (
             select tenant_id, role from members where subject = $1
           ), down(id, role, depth) as (
             select o.id, own.role, 1 from own join organizations o on o.parent_id = own.tenant_id
             where own.role in ('manager', 'owner')
             union all
             select o.id, d.role, d.depth + 1 from down d join organizations o on o.parent_id = d.id
             where d.depth < 32
           )
           select tenant_id as "id!", role as "role!", false as "inherited!" from own
           union all
           select id, role, true from down
           order by 1, 3"#,
        subject
    )
    .fetch_all(pool)
    .await
    .ctx("listing a subject's memberships")?;
    Ok(rows
        .into_iter()
        .map(|r| (r.id, r.role, r.inherited))
        .collect())
}

// --- invitations

/// Stores an invitation with its token's hash, expiring `expires_in`
/// seconds from now (the database's clock). An expired open invitation
/// to the same address is closed first; a live one is an `AlreadyExists`
/// on `email`.
pub async fn invitation_insert(
    pool: &PgPool,
    i: &Invitation,
    token_hash: &[u8],
    expires_in: i64,
) -> Result<Invitation, Error> {
    let mut tx = pool.begin().await.ctx("storing an invitation")?;
    sqlx::query!(
        r#"update invitations set revoked_at = now(), revoked_by = 'expired'
           where tenant_id = $1 and lower(email) = lower($2)
             and accepted_at is null and revoked_at is null and expires_at <= now()"#,
        i.tenant.as_str(),
        i.email
    )
    .execute(&mut *tx)
    .await
    .ctx("closing an expired invitation")?;
    let row = sqlx::query_as!(
        InvitationRow,
        r#"insert into invitations (id, tenant_id, email, role, secret_hash, invited_by,
                                    expires_at)
           values ($1, $2, $3, $4, $5, $6, now() + make_interval(secs => $7::bigint))
           returning id, tenant_id, email, role, invited_by, created_at, expires_at,
                     accepted_at, accepted_by, revoked_at, revoked_by"#,
        i.id.0,
        i.tenant.as_str(),
        i.email,
        i.role,
        token_hash,
        i.invited_by,
        expires_in,
    )
    .fetch_one(&mut *tx)
    .await;
    let row = match row {
        Ok(r) => r,
        Err(sqlx::Error::Database(e)) if e.constraint() == Some("invitations_open") => {
            return Err(Error::AlreadyExists {
                kind: "invitation",
                field: "email".to_owned(),
            });
        }
        Err(e) => return Err(e).ctx("storing an invitation"),
    };
    tx.commit().await.ctx("storing an invitation")?;
    Ok(row.into())
}

/// The organisation's invitations, newest first.
pub async fn invitation_list(pool: &PgPool, tenant: &TenantId) -> Result<Vec<Invitation>, Error> {
    Ok(sqlx::query_as!(
        InvitationRow,
        r#"select id, tenant_id, email, role, invited_by, created_at, expires_at,
                  accepted_at, accepted_by, revoked_at, revoked_by
           from invitations where tenant_id = $1
           order by created_at desc, id desc limit 1000"#,
        tenant.as_str()
    )
    .fetch_all(pool)
    .await
    .ctx("listing invitations")?
    .into_iter()
    .map(Into::into)
    .collect())
}

pub async fn invitation_get(
    pool: &PgPool,
    tenant: &TenantId,
    id: InvitationId,
) -> Result<Option<Invitation>, Error> {
    Ok(sqlx::query_as!(
        InvitationRow,
        r#"select id, tenant_id, email, role, invited_by, created_at, expires_at,
                  accepted_at, accepted_by, revoked_at, revoked_by
           from invitations where tenant_id = $1 and id = $2"#,
        tenant.as_str(),
        id.0
    )
    .fetch_optional(pool)
    .await
    .ctx("reading an invitation")?
    .map(Into::into))
}

/// Revokes an open invitation: it, or `None` when it is unknown or
/// closed already.
pub async fn invitation_revoke(
    pool: &PgPool,
    tenant: &TenantId,
    id: InvitationId,
    by: &str,
) -> Result<Option<Invitation>, Error> {
    Ok(sqlx::query_as!(
        InvitationRow,
        r#"update invitations set revoked_at = now(), revoked_by = $3
           where tenant_id = $1 and id = $2 and accepted_at is null and revoked_at is null
           returning id, tenant_id, email, role, invited_by, created_at, expires_at,
                     accepted_at, accepted_by, revoked_at, revoked_by"#,
        tenant.as_str(),
        id.0,
        by
    )
    .fetch_optional(pool)
    .await
    .ctx("revoking an invitation")?
    .map(Into::into))
}

/// The invitation whose token hashes to `token_hash`, whatever its
/// organisation (the system scope's read: the token is the wall).
pub async fn invitation_by_token(
    pool: &PgPool,
    token_hash: &[u8],
) -> Result<Option<Invitation>, Error> {
    Ok(sqlx::query_as!(
        InvitationRow,
        r#"select id, tenant_id, email, role, invited_by, created_at, expires_at,
                  accepted_at, accepted_by, revoked_at, revoked_by
           from invitations where secret_hash = $1"#,
        token_hash
    )
    .fetch_optional(pool)
    .await
    .ctx("reading an invitation")?
    .map(Into::into))
}

/// Accepts the invitation whose token hashes to `token_hash` as `subject`,
/// whose verified email is `email`: the invitation, accepted, and the
/// member it made, in one transaction. Unknown: `not_found`; for another
/// address: `forbidden`; no longer open, or the subject a member already:
/// `conflict`.
pub async fn invitation_accept(
    pool: &PgPool,
    token_hash: &[u8],
    subject: &str,
    email: &str,
) -> Result<(Invitation, Member), Error> {
    let mut tx = pool.begin().await.ctx("accepting an invitation")?;
    let Some(found) = sqlx::query_as!(
        InvitationRow,
        r#"select id, tenant_id, email, role, invited_by, created_at, expires_at,
                  accepted_at, accepted_by, revoked_at, revoked_by
           from invitations where secret_hash = $1 for update"#,
        token_hash
    )
    .fetch_optional(&mut *tx)
    .await
    .ctx("reading an invitation")?
    else {
        return Err(Error::not_found("invitation", "(token)"));
    };
    let now: chrono::DateTime<chrono::Utc> = sqlx::query_scalar!(r#"select now() as "now!""#)
        .fetch_one(&mut *tx)
        .await
        .ctx("reading the clock")?;
    let invitation: Invitation = found.into();
    let status = invitation.status(now);
    if status != meson_core::member::InvitationStatus::Pending {
        return Err(Error::Conflict {
            message: format!("the invitation is {}", status.as_str()),
        });
    }
    if !invitation.email.eq_ignore_ascii_case(email) {
        return Err(Error::Forbidden {
            message: "the invitation is for another email address".to_owned(),
        });
    }
    sqlx::query!("select meson_members_lock($1)", invitation.tenant.as_str())
        .execute(&mut *tx)
        .await
        .ctx("locking an organisation's members")?;
    let member = sqlx::query_as!(
        MemberRow,
        r#"insert into members (tenant_id, subject, email, role, added_by)
           values ($1, $2, $3, $4, $5)
           on conflict (tenant_id, subject) do nothing
           returning tenant_id, subject, email, role, added_by, created_at, updated_at,
                  max_vms, max_vcpus, max_ram_mib"#,
        invitation.tenant.as_str(),
        subject,
        invitation.email,
        invitation.role,
        invitation.invited_by
    )
    .fetch_optional(&mut *tx)
    .await
    .ctx("adding a member")?
    .ok_or_else(|| Error::Conflict {
        message: format!(
            "{subject} is a member of {} already",
            invitation.tenant.as_str()
        ),
    })?;
    let accepted = sqlx::query_as!(
        InvitationRow,
        r#"update invitations set accepted_at = now(), accepted_by = $2
           where id = $1
           returning id, tenant_id, email, role, invited_by, created_at, expires_at,
                     accepted_at, accepted_by, revoked_at, revoked_by"#,
        invitation.id.0,
        subject
    )
    .fetch_one(&mut *tx)
    .await
    .ctx("accepting an invitation")?;
    tx.commit().await.ctx("accepting an invitation")?;
    Ok((accepted.into(), member.into()))
}

/// The organisations below `org`, at any depth (the system scope's read).
pub async fn descendants(pool: &PgPool, org: &str) -> Result<Vec<String>, Error> {
    sqlx::query_scalar!(
        r#"with recursive down(id, depth) as (
             select id, 1 from organizations where parent_id = $1
             union all
             select o.id, d.depth + 1 from down d join organizations o on o.parent_id = d.id
             where d.depth < 32
           )
           select id as "id!" from down order by id"#,
        org
    )
    .fetch_all(pool)
    .await
    .ctx("listing an organisation's descendants")
}

/// In `tx`, before a VM that `subject` creates is written: when the member
/// has limits of its own, locks what it holds (until `tx` ends) and reads
/// it: `(limits, held)`, VMs, vCPUs and MiB of RAM.
pub async fn hold(
    tx: &mut crate::Tx<'_>,
    tenant: &TenantId,
    subject: &str,
) -> Result<Option<([i64; 3], [i64; 3])>, Error> {
    let r = sqlx::query!(
        r#"with member as (
             select array[coalesce(m.max_vms, 9223372036854775807),
                          coalesce(m.max_vcpus, 9223372036854775807),
                          coalesce(m.max_ram_mib, 9223372036854775807)] as limits
             from members m
             where m.tenant_id = $1 and m.subject = $2
               and (m.max_vms is not null or m.max_vcpus is not null or m.max_ram_mib is not null)
           ), held as (
             insert into member_usage as mu (tenant_id, subject)
             select $1::text, $2::text from member
             on conflict (tenant_id, subject) do update set subject = mu.subject
             returning array[mu.vms, mu.vcpus, mu.ram_mib] as held
           )
           select m.limits as "limits!", h.held as "held!" from member m, held h"#,
        tenant.as_str(),
        subject
    )
    .fetch_optional(&mut **tx)
    .await
    .ctx("locking a member's usage")?;
    r.map(|r| Ok((three(&r.limits)?, three(&r.held)?)))
        .transpose()
}

/// After the writes of `tx` since [`hold`]: the member's limits that what
/// they added takes it over (`meson_quota_over`), by name.
pub async fn over(
    tx: &mut crate::Tx<'_>,
    tenant: &TenantId,
    subject: &str,
    limits: &[i64; 3],
    held: &[i64; 3],
) -> Result<Vec<&'static str>, Error> {
    let over = sqlx::query_scalar!(
        r#"select meson_quota_over($3, $4,
                    array[u.vms - ($3::int8[])[1], u.vcpus - ($3::int8[])[2],
                          u.ram_mib - ($3::int8[])[3]]) as "over!"
           from member_usage u where u.tenant_id = $1 and u.subject = $2"#,
        tenant.as_str(),
        subject,
        &held[..],
        &limits[..]
    )
    .fetch_one(&mut **tx)
    .await
    .ctx("checking a member's limits")?;
    Ok(crate::quotas::over_names(&over))
}

/// What a member holds as kept, and as counted from its VMs.
pub async fn usage_and_recount(
    pool: &PgPool,
    tenant: &TenantId,
    subject: &str,
) -> Result<([i64; 3], [i64; 3]), Error> {
    let r = sqlx::query!(
        r#"select coalesce((select array[u.vms, u.vcpus, u.ram_mib] from member_usage u
                            where u.tenant_id = $1 and u.subject = $2),
                           array[0, 0, 0]::int8[]) as "kept!",
                  meson_member_usage_recount($1, $2) as "counted!""#,
        tenant.as_str(),
        subject
    )
    .fetch_one(pool)
    .await
    .ctx("counting a member's usage")?;
    Ok((three(&r.kept)?, three(&r.counted)?))
}

pub(crate) fn three(a: &[i64]) -> Result<[i64; 3], Error> {
    <[i64; 3]>::try_from(a).map_err(|_| crate::corrupt("member usage", format!("{a:?}")))
}
