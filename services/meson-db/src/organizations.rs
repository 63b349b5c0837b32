//! Organisations and sub-organisations (`meson_core::organization`), read
//! and written in the system scope: an organisation's tree spans tenants.

use crate::{DbResult, Tx};
use meson_core::organization::Organization;
use meson_core::quota::QuotaOverrides;
use meson_core::{Error, TenantId};
use sqlx::PgPool;

/// An organisation of a tree, with its quotas (a sub-organisation's are
/// its carve).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    pub org: Organization,
    pub depth: i32,
    pub quotas: QuotaOverrides,
}

/// `root` and every organisation below it, root first, then by id. A root
/// without a row of its own is shown as meson names it: by its id.
pub async fn tree(pool: &PgPool, root: &TenantId) -> Result<Vec<Node>, Error> {
    let rows = sqlx::query!(
        r#"with recursive down(id, depth) as (
             select $1::text, 0
             union all
             select o.id, d.depth + 1 from down d join organizations o on o.parent_id = d.id
             where d.depth < 32
           )
           select d.id as "id!", d.depth as "depth!", o.parent_id as "parent?",
                  coalesce(o.name, d.id) as "name!", coalesce(o.created_by, '') as "created_by!",
                  coalesce(o.created_at, now()) as "created!",
                  q.vms, q.vcpus, q.ram_mib, q.storage_gb, q.clusters, q.nodes, q.images_gb
           from down d
           left join organizations o on o.id = d.id
           left join tenant_quotas q on q.tenant_id = d.id
           order by d.depth = 0 desc, d.id"#,
        root.as_str()
    )
    .fetch_all(pool)
    .await
    .ctx("reading an organisation's tree")?;
    Ok(rows
        .into_iter()
        .map(|r| Node {
            quotas: crate::quotas::overrides!(r),
            depth: r.depth,
            org: Organization {
                id: TenantId(r.id),
                parent: r.parent.map(TenantId),
                name: r.name,
                created_by: r.created_by,
                created: r.created,
            },
        })
        .collect())
}

/// Gives `parent` a row (a root organisation named by its id) if it has
/// none, so that a sub-organisation can name it.
pub async fn ensure(tx: &mut Tx<'_>, parent: &TenantId, by: &str) -> Result<(), Error> {
    sqlx::query!(
        r#"insert into organizations (id, name, created_by)
           values ($1, left($1, 64), $2) on conflict (id) do nothing"#,
        parent.as_str(),
        by
    )
    .execute(&mut **tx)
    .await
    .ctx("recording an organisation")?;
    Ok(())
}

/// Whether anything of meson's is held under `id` already: a tenant that
/// was used without being a sub-organisation cannot become one.
pub async fn taken(tx: &mut Tx<'_>, id: &TenantId) -> Result<bool, Error> {
    sqlx::query_scalar!(
        r#"select exists (select 1 from organizations where id = $1)
               or exists (select 1 from tenant_quotas where tenant_id = $1)
               or exists (select 1 from members where tenant_id = $1)
               or exists (select 1 from api_tokens where tenant_id = $1)
               or exists (select 1 from tenant_usage where tenant_id = $1
                          and array[vms, vcpus, ram_mib, storage_gb, clusters, nodes,
                                    images_gb] <> array[0, 0, 0, 0, 0, 0, 0]::bigint[])
               or exists (select 1 from vms where tenant_id = $1)
               or exists (select 1 from networks where tenant_id = $1)
             as "taken!""#,
        id.as_str()
    )
    .fetch_one(&mut **tx)
    .await
    .ctx("checking an organisation's id")
}

pub async fn insert(tx: &mut Tx<'_>, o: &Organization) -> Result<Organization, Error> {
    let r = sqlx::query!(
        r#"insert into organizations (id, parent_id, name, created_by)
           values ($1, $2, $3, $4)
           returning created_at"#,
        o.id.as_str(),
        o.parent.as_ref().map(TenantId::as_str),
        o.name,
        o.created_by
    )
    .fetch_one(&mut **tx)
    .await
    .ctx("storing an organisation")?;
    Ok(Organization {
        created: r.created_at,
        ..o.clone()
    })
}

/// Ends a sub-organisation that holds nothing: its members, open
/// invitations and live tokens go with it; its quotas return to its parent.
pub async fn delete(tx: &mut Tx<'_>, id: &TenantId, by: &str) -> Result<(), Error> {
    sqlx::query!("delete from members where tenant_id = $1", id.as_str())
        .execute(&mut **tx)
        .await
        .ctx("removing an organisation's members")?;
    sqlx::query!(
        r#"update invitations set revoked_at = now(), revoked_by = $2
           where tenant_id = $1 and accepted_at is null and revoked_at is null"#,
        id.as_str(),
        by
    )
    .execute(&mut **tx)
    .await
    .ctx("revoking an organisation's invitations")?;
    sqlx::query!(
        r#"update api_tokens set revoked_at = now(), revoked_by = $2
           where tenant_id = $1 and revoked_at is null"#,
        id.as_str(),
        by
    )
    .execute(&mut **tx)
    .await
    .ctx("revoking an organisation's tokens")?;
    sqlx::query!(
        "delete from tenant_quotas where tenant_id = $1",
        id.as_str()
    )
    .execute(&mut **tx)
    .await
    .ctx("returning an organisation's quotas")?;
    sqlx::query!("delete from organizations where id = $1", id.as_str())
        .execute(&mut **tx)
        .await
        .ctx("removing an organisation")?;
    Ok(())
}
