//! Port forwards: a public port of a network's VM's host relayed to the VM.

use crate::{DbResult, Tx, corrupt};
use meson_core::port_forward::{PortForward, PortForwardStatus, Protocol};
use meson_core::{Error, NetworkId, PortForwardId, TargetId, TenantId, VmId};
use sqlx::PgPool;
use uuid::Uuid;

/// A forward as its queries read it (with its host's name and address).
#[derive(Debug, sqlx::FromRow)]
pub struct PortForwardRow {
    id: Uuid,
    tenant_id: String,
    network_id: Uuid,
    vm_id: Uuid,
    protocol: String,
    public_port: i32,
    private_port: i32,
    status: String,
    target_id: Uuid,
    host: String,
    public_ip: String,
    error_message: Option<String>,
    created_at: chrono::DateTime<chrono::Utc>,
}

impl TryFrom<PortForwardRow> for PortForward {
    type Error = Error;
    fn try_from(r: PortForwardRow) -> Result<Self, Error> {
        let port = |p: i32| u16::try_from(p).map_err(|_| corrupt("port forward port", p));
        Ok(PortForward {
            id: PortForwardId(r.id),
            tenant: TenantId(r.tenant_id),
            network_id: NetworkId(r.network_id),
            vm_id: VmId(r.vm_id),
            protocol: Protocol::parse(&r.protocol)
                .ok_or_else(|| corrupt("port forward protocol", &r.protocol))?,
            public_port: port(r.public_port)?,
            private_port: port(r.private_port)?,
            status: PortForwardStatus::parse(&r.status)
                .ok_or_else(|| corrupt("port forward status", &r.status))?,
            target_id: TargetId(r.target_id),
            host: r.host,
            public_ip: r.public_ip,
            error_message: r.error_message,
            created: r.created_at,
        })
    }
}

/// Writes a new forward; a public port another live forward holds on the
/// same host is a `conflict` naming the port and the host (not the other
/// forward, which may be another tenant's).
pub async fn insert(tx: &mut Tx<'_>, f: &PortForward) -> Result<(), Error> {
    let res = sqlx::query!(
        r#"insert into port_forwards (id, tenant_id, network_id, vm_id, protocol, public_port,
                                      private_port, status, target_id, created_at)
           values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"#,
        f.id.0,
        f.tenant.as_str(),
        f.network_id.0,
        f.vm_id.0,
        f.protocol.as_str(),
        i32::from(f.public_port),
        i32::from(f.private_port),
        f.status.as_str(),
        f.target_id.0,
        f.created,
    )
    .execute(&mut **tx)
    .await;
    match res {
        Err(sqlx::Error::Database(e)) if e.constraint() == Some("port_forwards_public_port") => {
            Err(Error::Conflict {
                message: format!(
                    "public_port {}/{} is taken on host {}: choose another port",
                    f.public_port,
                    f.protocol.as_str(),
                    f.host
                ),
            })
        }
        other => other.map(|_| ()).ctx("inserting a port forward"),
    }
}

/// Which forwards a read returns: every condition given holds.
#[derive(Clone, Copy, Debug, Default)]
struct Select<'a> {
    id: Option<PortForwardId>,
    tenant: Option<&'a TenantId>,
    network: Option<NetworkId>,
    vm: Option<VmId>,
    target: Option<TargetId>,
    /// Deleted ones too (for workers).
    deleted: bool,
    /// Only `active` and `error` ones whose VM runs no action (what drift
    /// detection compares).
    watched: bool,
}

/// The one read of forwards, oldest first, with their hosts' names and
/// addresses.
async fn select(db: impl sqlx::PgExecutor<'_>, s: Select<'_>) -> Result<Vec<PortForward>, Error> {
    sqlx::query_as!(
        PortForwardRow,
        r#"select f.id, f.tenant_id, f.network_id, f.vm_id, f.protocol, f.public_port,
                  f.private_port, f.status, f.target_id, t.name as host, t.host as public_ip,
                  f.error_message, f.created_at
           from port_forwards f join atomos_targets t on t.id = f.target_id
           where ($1::uuid is null or f.id = $1)
             and ($2::text is null or f.tenant_id = $2)
             and ($3::uuid is null or f.network_id = $3)
             and ($4::uuid is null or f.vm_id = $4)
             and ($5::uuid is null or f.target_id = $5)
             and ($6 or f.deleted_at is null)
             and (not $7 or (f.status in ('active', 'error')
                  and not exists (select 1 from jobs j
                                  where j.concurrency_key = 'vm:' || f.vm_id::text
                                    and j.state in ('available', 'running'))))
           order by f.created_at, f.id"#,
        s.id.map(|i| i.0),
        s.tenant.map(|t| t.as_str()),
        s.network.map(|n| n.0),
        s.vm.map(|v| v.0),
        s.target.map(|t| t.0),
        s.deleted,
        s.watched,
    )
    .fetch_all(db)
    .await
    .ctx("reading port forwards")?
    .into_iter()
    .map(TryInto::try_into)
    .collect()
}

/// The one forward `s` selects, or `not_found` naming `id`.
async fn one(
    db: impl sqlx::PgExecutor<'_>,
    id: PortForwardId,
    s: Select<'_>,
) -> Result<PortForward, Error> {
    select(db, Select { id: Some(id), ..s })
        .await?
        .pop()
        .ok_or_else(|| Error::not_found("port_forward", id))
}

/// A tenant's live forward on a network.
pub async fn get(
    db: impl sqlx::PgExecutor<'_>,
    tenant: &TenantId,
    network: NetworkId,
    id: PortForwardId,
) -> Result<PortForward, Error> {
    let s = Select {
        tenant: Some(tenant),
        network: Some(network),
        ..Select::default()
    };
    one(db, id, s).await
}

/// Any forward, deleted ones included (for workers).
pub async fn get_including_deleted(
    db: impl sqlx::PgExecutor<'_>,
    id: PortForwardId,
) -> Result<PortForward, Error> {
    let s = Select {
        deleted: true,
        ..Select::default()
    };
    one(db, id, s).await
}

/// Which live forwards to read: a network's, a VM's, or a host's.
#[derive(Clone, Copy, Debug)]
pub enum Of {
    Network(NetworkId),
    Vm(VmId),
    Target(TargetId),
}

/// Live forwards, oldest first.
pub async fn list(db: impl sqlx::PgExecutor<'_>, of: Of) -> Result<Vec<PortForward>, Error> {
    let s = match of {
        Of::Network(n) => Select {
            network: Some(n),
            ..Select::default()
        },
        Of::Vm(v) => Select {
            vm: Some(v),
            ..Select::default()
        },
        Of::Target(t) => Select {
            target: Some(t),
            ..Select::default()
        },
    };
    select(db, s).await
}

/// Sets a live forward's status, with why when it is `error`; answers
/// whether it was `from` (and so changed). An `error` forward gives up its
/// public port, an `active` one holds it again (a port another forward
/// took meanwhile is a `conflict`).
pub async fn set_status(
    db: impl sqlx::PgExecutor<'_>,
    id: PortForwardId,
    from: &[PortForwardStatus],
    to: PortForwardStatus,
    error_message: Option<&str>,
) -> Result<bool, Error> {
    let from: Vec<&str> = from.iter().map(|s| s.as_str()).collect();
    let done = sqlx::query!(
        r#"update port_forwards set status = $3, error_message = $4,
                  port_held = case $3 when 'error' then false when 'active' then true
                                      else port_held end
           where id = $1 and status = any($2) and deleted_at is null"#,
        id.0,
        &from as &[&str],
        to.as_str(),
        error_message,
    )
    .execute(db)
    .await
    .ctx("updating a port forward's status")?;
    Ok(done.rows_affected() == 1)
}

/// Forgets a forward: its public port is free again.
pub async fn mark_deleted(db: impl sqlx::PgExecutor<'_>, id: PortForwardId) -> Result<(), Error> {
    sqlx::query!(
        r#"update port_forwards set deleted_at = now(), status = 'deleting'
           where id = $1 and deleted_at is null"#,
        id.0
    )
    .execute(db)
    .await
    .ctx("deleting a port forward")?;
    Ok(())
}

/// Every live forward drift detection compares with its host (`active`
/// or `error`, its VM running no action), with the time they were read
/// (a change after it is not overwritten).
pub async fn watched(
    pool: &PgPool,
) -> Result<(Vec<PortForward>, chrono::DateTime<chrono::Utc>), Error> {
    let mut tx = pool.begin().await.ctx("reading port forwards")?;
    let now = sqlx::query_scalar!(r#"select now() as "now!""#)
        .fetch_one(&mut *tx)
        .await
        .ctx("reading the time")?;
    let s = Select {
        watched: true,
        ..Select::default()
    };
    let forwards = select(&mut *tx, s).await?;
    tx.commit().await.ctx("reading port forwards")?;
    Ok((forwards, now))
}

/// Records what drift detection found, unless the forward changed since
/// `seen_at`; answers whether it did.
pub async fn record_drift(
    pool: &PgPool,
    id: PortForwardId,
    from: PortForwardStatus,
    to: PortForwardStatus,
    message: Option<&str>,
    seen_at: chrono::DateTime<chrono::Utc>,
) -> Result<bool, Error> {
    let done = sqlx::query!(
        r#"update port_forwards set status = $3, error_message = $4,
                  port_held = case $3 when 'error' then false when 'active' then true
                                      else port_held end
           where id = $1 and status = $2 and deleted_at is null and updated_at <= $5"#,
        id.0,
        from.as_str(),
        to.as_str(),
        message,
        seen_at,
    )
    .execute(pool)
    .await;
    match done {
        // Back to active, the port was meanwhile given to another forward.
        Err(sqlx::Error::Database(e)) if e.constraint() == Some("port_forwards_public_port") => {
            Ok(false)
        }
        other => Ok(other
            .ctx("recording a port forward's drift")?
            .rows_affected()
            == 1),
    }
}
