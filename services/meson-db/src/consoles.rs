//! Consoles: one-time VNC sessions on a VM's screen (`meson_core::console`).
//! Every read goes through `consoles_now`, which says whether a request
//! expired or a session lost its relay as of the query.

use crate::DbResult;
use meson_core::console::{Console, ConsoleStatus};
use meson_core::{ConsoleId, Error, TenantId, VmId};
use sqlx::PgPool;
use uuid::Uuid;

#[derive(Debug, sqlx::FromRow)]
struct ConsoleRow {
    id: Uuid,
    tenant_id: String,
    vm_id: Uuid,
    subject: String,
    role: String,
    status: String,
    created_at: chrono::DateTime<chrono::Utc>,
    expires_at: chrono::DateTime<chrono::Utc>,
    opened_at: Option<chrono::DateTime<chrono::Utc>>,
    seen_at: Option<chrono::DateTime<chrono::Utc>>,
    closed_at: Option<chrono::DateTime<chrono::Utc>>,
    close_reason: Option<String>,
    bytes_in: i64,
    bytes_out: i64,
}

impl TryFrom<ConsoleRow> for Console {
    type Error = Error;
    fn try_from(r: ConsoleRow) -> Result<Self, Error> {
        Ok(Console {
            id: ConsoleId(r.id),
            tenant: TenantId(r.tenant_id),
            vm_id: VmId(r.vm_id),
            subject: r.subject,
            role: r.role,
            status: ConsoleStatus::parse(&r.status)
                .ok_or_else(|| crate::corrupt("console status", &r.status))?,
            created: r.created_at,
            expires: r.expires_at,
            opened: r.opened_at,
            seen: r.seen_at,
            closed: r.closed_at,
            close_reason: r.close_reason,
            bytes_in: r.bytes_in,
            bytes_out: r.bytes_out,
        })
    }
}

/// Stores a requested console with its token's hash and its password; it
/// expires `ttl` after now (the database's clock, which every read uses).
pub async fn insert(
    pool: &PgPool,
    c: &Console,
    token_hash: &[u8],
    password: &str,
    ttl: std::time::Duration,
) -> Result<Console, Error> {
    let ttl_ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
    sqlx::query!(
        r#"insert into consoles (id, tenant_id, vm_id, subject, role, token_hash, password,
                                 status, expires_at)
           values ($1, $2, $3, $4, $5, $6, $7, 'requested',
                   now() + make_interval(secs => $8::bigint / 1000.0))"#,
        c.id.0,
        c.tenant.as_str(),
        c.vm_id.0,
        c.subject,
        c.role,
        token_hash,
        password,
        ttl_ms,
    )
    .execute(pool)
    .await
    .ctx("storing a console")?;
    get(pool, c.id)
        .await?
        .ok_or_else(|| Error::internal("a console just stored is missing"))
}

/// A console of the scope's tenant.
pub async fn get(pool: &PgPool, id: ConsoleId) -> Result<Option<Console>, Error> {
    sqlx::query_as!(
        ConsoleRow,
        r#"select id as "id!", tenant_id as "tenant_id!", vm_id as "vm_id!",
                  subject as "subject!", role as "role!", status as "status!",
                  created_at as "created_at!", expires_at as "expires_at!", opened_at, seen_at,
                  closed_at, close_reason, bytes_in as "bytes_in!", bytes_out as "bytes_out!"
           from consoles_now where id = $1"#,
        id.0
    )
    .fetch_optional(pool)
    .await
    .ctx("reading a console")?
    .map(Console::try_from)
    .transpose()
}

/// The scope's tenant's newest consoles (at most `limit`), of `vm` when
/// given and with one of `statuses` when any.
pub async fn list(
    pool: &PgPool,
    vm: Option<VmId>,
    statuses: &[String],
    limit: i64,
) -> Result<Vec<Console>, Error> {
    sqlx::query_as!(
        ConsoleRow,
        r#"select id as "id!", tenant_id as "tenant_id!", vm_id as "vm_id!",
                  subject as "subject!", role as "role!", status as "status!",
                  created_at as "created_at!", expires_at as "expires_at!", opened_at, seen_at,
                  closed_at, close_reason, bytes_in as "bytes_in!", bytes_out as "bytes_out!"
           from consoles_now
           where ($1::uuid is null or vm_id = $1)
             and (cardinality($2::text[]) = 0 or status = any($2))
           order by created_at desc, id desc
           limit $3"#,
        vm.map(|v| v.0),
        statuses,
        limit
    )
    .fetch_all(pool)
    .await
    .ctx("listing consoles")?
    .into_iter()
    .map(Console::try_from)
    .collect()
}

/// What a connection finds at a console's URL.
#[derive(Debug)]
pub enum Claim {
    /// No console has this id and token.
    Unknown,
    /// It has been used, or it expired, or it was revoked: its status now.
    Spent(Console),
    /// Now `open`: the session is the connection's, with the password to
    /// check the client's VNC authentication against (no longer stored).
    Won { console: Console, password: String },
}

/// Uses console `id` up for the connection holding `token_hash`: the one
/// connection that finds it `requested` gets its password, which the row
/// forgets; every other finds it spent. In the system scope: the token,
/// not a tenant, is the wall.
pub async fn claim(pool: &PgPool, id: ConsoleId, token_hash: &[u8]) -> Result<Claim, Error> {
    let won = sqlx::query_scalar!(
        r#"with old as (
               select c.id, c.password from consoles c
               join consoles_now n on n.id = c.id
               where c.id = $1 and c.token_hash = $2 and n.status = 'requested'
               for update of c)
           update consoles c
              set status = 'open', password = null, opened_at = now(), seen_at = now()
             from old where c.id = old.id and c.status = 'requested'
           returning old.password"#,
        id.0,
        token_hash
    )
    .fetch_optional(pool)
    .await
    .ctx("claiming a console")?;
    let known = sqlx::query_scalar!(
        r#"select exists (select 1 from consoles where id = $1 and token_hash = $2) as "e!""#,
        id.0,
        token_hash
    )
    .fetch_one(pool)
    .await
    .ctx("reading a console")?;
    if !known {
        return Ok(Claim::Unknown);
    }
    let console = get(pool, id)
        .await?
        .ok_or_else(|| Error::internal("a console claimed is missing"))?;
    Ok(match won.flatten() {
        Some(password) => Claim::Won { console, password },
        None => Claim::Spent(console),
    })
}

/// Records an open session alive with its byte counts; answers its status
/// (no longer `open` once it was deleted: its relay ends it).
pub async fn heartbeat(
    pool: &PgPool,
    id: ConsoleId,
    bytes_in: i64,
    bytes_out: i64,
) -> Result<ConsoleStatus, Error> {
    let status = sqlx::query_scalar!(
        r#"update consoles set seen_at = case when status = 'open' then now() else seen_at end,
                  bytes_in = $2, bytes_out = $3
           where id = $1 returning status"#,
        id.0,
        bytes_in,
        bytes_out
    )
    .fetch_optional(pool)
    .await
    .ctx("recording a console session")?;
    match status {
        Some(s) => ConsoleStatus::parse(&s).ok_or_else(|| crate::corrupt("console status", &s)),
        None => Err(Error::internal("a console in session is missing")),
    }
}

/// Ends a session: `closed` with `reason` (unless deleted first, whose
/// reason stays) and its final byte counts.
pub async fn close(
    pool: &PgPool,
    id: ConsoleId,
    reason: &str,
    bytes_in: i64,
    bytes_out: i64,
) -> Result<(), Error> {
    sqlx::query!(
        r#"update consoles
              set close_reason = case when status = 'open' then $2 else close_reason end,
                  status = 'closed', closed_at = coalesce(closed_at, now()), password = null,
                  bytes_in = $3, bytes_out = $4
           where id = $1"#,
        id.0,
        reason,
        bytes_in,
        bytes_out
    )
    .execute(pool)
    .await
    .ctx("closing a console session")?;
    Ok(())
}

/// Ends console `id` of the scope's tenant at its user's request: one not
/// used yet is `revoked` (its password forgotten), an open session
/// `closed` (its relay ends it within a heartbeat). False when it is
/// neither.
pub async fn end(pool: &PgPool, id: ConsoleId, reason: &str) -> Result<bool, Error> {
    let done = sqlx::query!(
        r#"update consoles c
              set status = case when n.status = 'requested' then 'revoked' else 'closed' end,
                  close_reason = $2, closed_at = now(), password = null
             from consoles_now n
           where c.id = $1 and n.id = c.id and n.status in ('requested', 'open')"#,
        id.0,
        reason
    )
    .execute(pool)
    .await
    .ctx("ending a console")?;
    Ok(done.rows_affected() > 0)
}

/// Whether VM `vm` has an open session besides `except`.
pub async fn others_open(pool: &PgPool, vm: VmId, except: ConsoleId) -> Result<bool, Error> {
    sqlx::query_scalar!(
        r#"select exists (select 1 from consoles_now
                          where vm_id = $1 and id <> $2 and status = 'open') as "e!""#,
        vm.0,
        except.0
    )
    .fetch_one(pool)
    .await
    .ctx("reading a VM's console sessions")
}

/// Writes what `consoles_now` shows: requests expired (their passwords
/// forgotten) and sessions whose relay stopped closed. In the system
/// scope, from the reconciler; answers how many it changed.
pub async fn sweep(pool: &PgPool) -> Result<u64, Error> {
    let done = sqlx::query!(
        r#"update consoles c
              set status = n.status, close_reason = n.close_reason,
                  closed_at = case when n.status = 'closed' then now() else c.closed_at end,
                  password = null
             from consoles_now n
           where n.id = c.id and n.status <> c.status"#
    )
    .execute(pool)
    .await
    .ctx("sweeping consoles")?;
    Ok(done.rows_affected())
}
