//! Images: a tenant's boot disks, each a volume on one AtomOS host.

use crate::{DbResult, Tx, corrupt};
use meson_core::image::{Image, ImageSource, ImageStatus};
use meson_core::labels::Labels;
use meson_core::volume::VolumePlacement;
use meson_core::{Error, ImageId, TargetId, TenantId};
use sqlx::PgPool;
use uuid::Uuid;

/// An image as its queries read it.
#[derive(Debug, sqlx::FromRow)]
pub struct ImageRow {
    id: Uuid,
    tenant_id: String,
    name: String,
    labels: serde_json::Value,
    status: String,
    source: serde_json::Value,
    size_gb: i32,
    target_id: Option<Uuid>,
    host: Option<String>,
    provider: Option<String>,
    region: Option<String>,
    atomos_name: String,
    atomos_id: Option<String>,
    sha256: Option<String>,
    error_message: Option<String>,
    created_at: chrono::DateTime<chrono::Utc>,
}

impl TryFrom<ImageRow> for Image {
    type Error = Error;
    fn try_from(r: ImageRow) -> Result<Self, Error> {
        let placement = match (r.target_id, r.host, r.provider, r.region) {
            (Some(t), Some(host), Some(provider), Some(region)) => Some(VolumePlacement {
                target_id: TargetId(t),
                host,
                provider,
                region,
            }),
            _ => None,
        };
        Ok(Image {
            id: ImageId(r.id),
            tenant: TenantId(r.tenant_id),
            name: r.name,
            labels: serde_json::from_value::<Labels>(r.labels)
                .map_err(|e| corrupt("image labels", e))?,
            status: ImageStatus::parse(&r.status)
                .ok_or_else(|| corrupt("image status", &r.status))?,
            source: serde_json::from_value::<ImageSource>(r.source)
                .map_err(|e| corrupt("image source", e))?,
            size_gb: u32::try_from(r.size_gb).map_err(|_| corrupt("image size", r.size_gb))?,
            placement,
            atomos_name: r.atomos_name,
            atomos_id: r.atomos_id,
            sha256: r.sha256,
            error_message: r.error_message,
            created: r.created_at,
        })
    }
}

/// Holds a live image's name once in its tenant.
const NAME_INDEX: &str = "images_tenant_name";

fn name_taken<T>(res: Result<T, sqlx::Error>) -> Result<Result<T, sqlx::Error>, Error> {
    crate::unique_violation(res, NAME_INDEX, "image", "name")
}

/// Writes a new image (its usage counts from here).
pub async fn insert(tx: &mut Tx<'_>, i: &Image) -> Result<(), Error> {
    let labels = serde_json::to_value(&i.labels).map_err(|e| Error::internal_from("labels", e))?;
    let source = serde_json::to_value(&i.source).map_err(|e| Error::internal_from("source", e))?;
    let size = i32::try_from(i.size_gb).map_err(|_| Error::invalid("size", "too large"))?;
    let p = i.placement.as_ref();
    let res = sqlx::query!(
        r#"insert into images (id, tenant_id, name, labels, status, source, size_gb, target_id,
                               provider, region, atomos_name, created_at)
           values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)"#,
        i.id.0,
        i.tenant.as_str(),
        i.name,
        labels,
        i.status.as_str(),
        source,
        size,
        p.map(|p| p.target_id.0),
        p.map(|p| p.provider.as_str()),
        p.map(|p| p.region.as_str()),
        i.atomos_name,
        i.created,
    )
    .execute(&mut **tx)
    .await;
    name_taken(res)?.map(|_| ()).ctx("inserting an image")
}

/// A tenant's live image.
pub async fn get(
    db: impl sqlx::PgExecutor<'_>,
    tenant: &TenantId,
    id: ImageId,
) -> Result<Image, Error> {
    sqlx::query_as!(
        ImageRow,
        r#"select i.id, i.tenant_id, i.name, i.labels, i.status, i.source, i.size_gb,
                  i.target_id, t.name as "host?", i.provider, i.region, i.atomos_name,
                  i.atomos_id, i.sha256, i.error_message, i.created_at
           from images i left join atomos_targets t on t.id = i.target_id
           where i.id = $1 and i.tenant_id = $2 and i.deleted_at is null"#,
        id.0,
        tenant.as_str(),
    )
    .fetch_optional(db)
    .await
    .ctx("fetching an image")?
    .ok_or_else(|| Error::not_found("image", id))?
    .try_into()
}

/// Any tenant's image, deleted ones included (for workers).
pub async fn get_including_deleted(
    db: impl sqlx::PgExecutor<'_>,
    id: ImageId,
) -> Result<Image, Error> {
    sqlx::query_as!(
        ImageRow,
        r#"select i.id, i.tenant_id, i.name, i.labels, i.status, i.source, i.size_gb,
                  i.target_id, t.name as "host?", i.provider, i.region, i.atomos_name,
                  i.atomos_id, i.sha256, i.error_message, i.created_at
           from images i left join atomos_targets t on t.id = i.target_id
           where i.id = $1"#,
        id.0
    )
    .fetch_optional(db)
    .await
    .ctx("fetching an image")?
    .ok_or_else(|| Error::not_found("image", id))?
    .try_into()
}

/// Locks a tenant's live image for the rest of `tx` and reads it.
pub async fn lock(tx: &mut Tx<'_>, tenant: &TenantId, id: ImageId) -> Result<Image, Error> {
    let found = sqlx::query_scalar!(
        r#"select id from images
           where id = $1 and tenant_id = $2 and deleted_at is null
           for update"#,
        id.0,
        tenant.as_str(),
    )
    .fetch_optional(&mut **tx)
    .await
    .ctx("locking an image")?;
    if found.is_none() {
        return Err(Error::not_found("image", id));
    }
    get(&mut **tx, tenant, id).await
}

/// Records (or clears) where an image lives.
pub async fn set_placement(
    pool: &PgPool,
    id: ImageId,
    placement: Option<&VolumePlacement>,
) -> Result<(), Error> {
    sqlx::query!(
        "update images set target_id = $2, provider = $3, region = $4 where id = $1",
        id.0,
        placement.map(|p| p.target_id.0),
        placement.map(|p| p.provider.as_str()),
        placement.map(|p| p.region.as_str()),
    )
    .execute(pool)
    .await
    .ctx("recording an image's placement")?;
    Ok(())
}

/// Records the sha256 of what an import downloaded.
pub async fn set_sha256(pool: &PgPool, id: ImageId, sha256: &str) -> Result<(), Error> {
    sqlx::query!("update images set sha256 = $2 where id = $1", id.0, sha256)
        .execute(pool)
        .await
        .ctx("recording an image's checksum")?;
    Ok(())
}

/// Records the AtomOS id of an image's volume (or forgets it) and its
/// status; a live image only (a deleted one keeps `deleting`).
pub async fn set_atomos(
    pool: &PgPool,
    id: ImageId,
    atomos_id: Option<&str>,
    status: ImageStatus,
) -> Result<(), Error> {
    sqlx::query!(
        r#"update images set atomos_id = $2,
                  status = case when deleted_at is null then $3 else status end
           where id = $1"#,
        id.0,
        atomos_id,
        status.as_str()
    )
    .execute(pool)
    .await
    .ctx("recording an image's AtomOS id")?;
    Ok(())
}

/// Sets a live image's status, with why when it is `error`.
pub async fn set_status(
    db: impl sqlx::PgExecutor<'_>,
    id: ImageId,
    status: ImageStatus,
    error_message: Option<&str>,
) -> Result<(), Error> {
    sqlx::query!(
        r#"update images set status = $2, error_message = $3
           where id = $1 and deleted_at is null"#,
        id.0,
        status.as_str(),
        error_message,
    )
    .execute(db)
    .await
    .ctx("updating an image's status")?;
    Ok(())
}

/// How an image is renamed and relabelled ([`crate::rename`]).
pub const RENAMED: crate::Renamed = crate::Renamed {
    kind: "image",
    name_index: Some(NAME_INDEX),
    context: "updating an image",
    also: "",
};

/// Forgets an image (it no longer counts against the quota).
pub async fn mark_deleted(pool: &PgPool, id: ImageId) -> Result<(), Error> {
    sqlx::query!(
        r#"update images set deleted_at = now(), status = 'deleting'
           where id = $1 and deleted_at is null"#,
        id.0
    )
    .execute(pool)
    .await
    .ctx("deleting an image")?;
    Ok(())
}

/// What an image list draws from: the tenant's live images, filtered by
/// name, status and labels.
impl crate::Listable for Image {
    type Row = ImageRow;
    type Filter = crate::ListFilter;
    const SOURCE: crate::Source = crate::Source {
        table: "images",
        only: "",
        columns: "i.id, i.tenant_id, i.name, i.labels, i.status, i.source, i.size_gb, \
              i.target_id, t.name as host, i.provider, i.region, i.atomos_name, i.atomos_id, \
              i.sha256, i.error_message, i.created_at",
        joins: "join images i on i.id = page.id left join atomos_targets t on t.id = i.target_id",
        usage: None,
        listing: "listing images",
        counting: "counting images",
    };
}

/// The running action that has an image among its resources (its create),
/// if any.
pub async fn running_action(
    tx: &mut Tx<'_>,
    id: ImageId,
) -> Result<Option<meson_core::ActionId>, Error> {
    let found = sqlx::query_scalar!(
        r#"select a.id from actions a
           join action_resources r on r.action_id = a.id
           where r.resource_type = 'image' and r.resource_id = $1 and a.status = 'running'
           order by a.started desc limit 1"#,
        id.0
    )
    .fetch_optional(&mut **tx)
    .await
    .ctx("finding an image's running action")?;
    Ok(found.map(meson_core::ActionId))
}
