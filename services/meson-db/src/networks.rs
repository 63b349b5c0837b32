//! Private networks, where they exist on AtomOS, and the VMs attached to them.

use crate::{DbResult, ListFilter, Tx, corrupt};
use chrono::{DateTime, Utc};
use meson_core::labels::Labels;
use meson_core::network::{AddressRange, Attachment, Network, NetworkStatus, Subnet};
use meson_core::{Error, NetworkId, TargetId, TenantId, VmId};
use serde_json::Value;
use sqlx::PgPool;
use std::collections::BTreeSet;
use std::net::Ipv4Addr;
use uuid::Uuid;

#[derive(sqlx::FromRow)]
struct NetworkRow {
    id: Uuid,
    tenant_id: String,
    name: String,
    status: String,
    labels: Value,
    cidr: String,
    gateway: String,
    dhcp: bool,
    range_start: String,
    range_last: String,
    created_at: DateTime<Utc>,
}

/// A network of a list, with the VMs attached to it.
#[derive(sqlx::FromRow)]
pub struct ListedRow {
    #[sqlx(flatten)]
    network: NetworkRow,
    vm_ids: Vec<Uuid>,
}

impl TryFrom<ListedRow> for (Network, Vec<VmId>) {
    type Error = Error;
    fn try_from(r: ListedRow) -> Result<Self, Error> {
        Ok((
            r.network.try_into()?,
            r.vm_ids.into_iter().map(VmId).collect(),
        ))
    }
}

fn ip(what: &'static str, s: &str) -> Result<Ipv4Addr, Error> {
    s.parse().map_err(|_| corrupt(what, s))
}

impl TryFrom<NetworkRow> for Network {
    type Error = Error;
    fn try_from(r: NetworkRow) -> Result<Self, Error> {
        let range = AddressRange::new(
            ip("range start", &r.range_start)?,
            ip("range end", &r.range_last)?,
        )
        .ok_or_else(|| corrupt("network range", &r.range_start))?;
        Ok(Network {
            id: NetworkId(r.id),
            tenant: TenantId(r.tenant_id),
            name: r.name,
            status: NetworkStatus::parse(&r.status)
                .ok_or_else(|| corrupt("network status", &r.status))?,
            labels: serde_json::from_value::<Labels>(r.labels)
                .map_err(|e| Error::internal_from("decoding network labels", e))?,
            subnet: Subnet {
                cidr: r.cidr.parse().map_err(|_| corrupt("cidr", &r.cidr))?,
                gateway: ip("gateway", &r.gateway)?,
                dhcp: r.dhcp,
                range,
            },
            created: r.created_at,
        })
    }
}

/// A write that broke the per-tenant name uniqueness becomes `uniqueness_error`.
/// Holds a live network's name once in its tenant.
const NAME_INDEX: &str = "networks_tenant_name";

fn name_taken<T>(res: Result<T, sqlx::Error>) -> Result<Result<T, sqlx::Error>, Error> {
    crate::unique_violation(res, NAME_INDEX, "network", "name")
}

pub async fn insert(tx: &mut Tx<'_>, n: &Network) -> Result<(), Error> {
    let labels = serde_json::to_value(&n.labels).map_err(|e| Error::internal_from("labels", e))?;
    let res = sqlx::query!(
        r#"insert into networks (id, tenant_id, name, status, labels, cidr, gateway, dhcp,
                                 range_start, range_last, created_at)
           values ($1, $2, $3, $4, $5, $6::text::cidr, $7::text::inet, $8,
                   $9::text::inet, $10::text::inet, $11)"#,
        n.id.0,
        n.tenant.as_str(),
        n.name,
        n.status.as_str(),
        labels,
        n.subnet.cidr.to_string(),
        n.subnet.gateway.to_string(),
        n.subnet.dhcp,
        n.subnet.range.start.to_string(),
        n.subnet.range.last.to_string(),
        n.created,
    )
    .execute(&mut **tx)
    .await;
    name_taken(res)?.map(|_| ()).ctx("inserting a network")
}

/// A tenant's own live network (not a cluster's).
pub async fn get(
    db: impl sqlx::PgExecutor<'_>,
    tenant: &TenantId,
    id: NetworkId,
) -> Result<Network, Error> {
    get_with(db, Some(tenant), id).await
}

/// Any tenant's live network, clusters' included (for workers).
pub async fn get_any(db: impl sqlx::PgExecutor<'_>, id: NetworkId) -> Result<Network, Error> {
    get_with(db, None, id).await
}

/// A live network of `tenant` (None: any tenant's, clusters' included).
async fn get_with(
    db: impl sqlx::PgExecutor<'_>,
    tenant: Option<&TenantId>,
    id: NetworkId,
) -> Result<Network, Error> {
    sqlx::query_as!(
        NetworkRow,
        r#"select id, tenant_id, name, status, labels, text(cidr) as "cidr!",
                  host(gateway) as "gateway!", dhcp, host(range_start) as "range_start!",
                  host(range_last) as "range_last!", created_at
           from networks
           where id = $1 and ($2::text is null or (tenant_id = $2 and cluster_id is null))
             and deleted_at is null"#,
        id.0,
        tenant.map(TenantId::as_str),
    )
    .fetch_optional(db)
    .await
    .ctx("fetching a network")?
    .ok_or_else(|| Error::not_found("network", id))?
    .try_into()
}

/// Locks a network row for the rest of the transaction: attaching a VM (and
/// its address) and deleting the network serialize on it. A cluster's own
/// network is only found by its cluster (`cluster_owned`).
pub async fn lock(
    tx: &mut Tx<'_>,
    tenant: &TenantId,
    id: NetworkId,
    cluster_owned: bool,
) -> Result<Network, Error> {
    sqlx::query_as!(
        NetworkRow,
        r#"select id, tenant_id, name, status, labels, text(cidr) as "cidr!",
                  host(gateway) as "gateway!", dhcp, host(range_start) as "range_start!",
                  host(range_last) as "range_last!", created_at
           from networks
           where id = $1 and tenant_id = $2 and deleted_at is null
             and (cluster_id is not null) = $3
           for update"#,
        id.0,
        tenant.as_str(),
        cluster_owned,
    )
    .fetch_optional(&mut **tx)
    .await
    .ctx("locking a network")?
    .ok_or_else(|| Error::not_found("network", id))?
    .try_into()
}

/// What a network list draws from: the tenant's own networks (not a
/// cluster's), each with the VMs attached to it.
impl crate::Listable for (Network, Vec<VmId>) {
    type Row = ListedRow;
    type Filter = ListFilter;
    const SOURCE: crate::Source = crate::Source {
        table: "networks",
        only: "x.cluster_id is null",
        columns: "n.id, n.tenant_id, n.name, n.status, n.labels, text(n.cidr) as cidr, \
              host(n.gateway) as gateway, n.dhcp, host(n.range_start) as range_start, \
              host(n.range_last) as range_last, n.created_at, \
              array(select w.vm_id from vm_networks w where w.network_id = n.id \
                    order by w.vm_id) as vm_ids",
        joins: "join networks n on n.id = page.id",
        usage: None,
        listing: "listing networks",
        counting: "counting networks",
    };
}

/// How a network (not a cluster's) is renamed and relabelled
/// ([`crate::rename`]).
pub const RENAMED: crate::Renamed = crate::Renamed {
    kind: "network",
    name_index: Some(NAME_INDEX),
    context: "updating a network",
    also: "",
};

pub async fn set_status(
    db: impl sqlx::PgExecutor<'_>,
    id: NetworkId,
    status: NetworkStatus,
) -> Result<(), Error> {
    sqlx::query!(
        "update networks set status = $2 where id = $1",
        id.0,
        status.as_str()
    )
    .execute(db)
    .await
    .ctx("updating network status")?;
    Ok(())
}

/// Marks the network deleted (the row stays for the record; its name is
/// free again) and releases its reservations.
pub async fn mark_deleted(pool: &PgPool, id: NetworkId) -> Result<(), Error> {
    let mut tx = crate::begin(pool).await?;
    sqlx::query!(
        "delete from network_reservations where network_id = $1",
        id.0
    )
    .execute(&mut *tx)
    .await
    .ctx("releasing reservations")?;
    sqlx::query!(
        "update networks set deleted_at = now(), status = 'deleting' where id = $1 and deleted_at is null",
        id.0
    )
    .execute(&mut *tx)
    .await
    .ctx("deleting a network")?;
    crate::commit(tx).await
}

// ---- Attachments: VMs on networks, and meson's IPAM. ----

/// Records a VM's NIC on a network (in the VM's create transaction). An
/// address already held in the network is `conflict`.
pub async fn attach(tx: &mut Tx<'_>, a: &Attachment) -> Result<(), Error> {
    let res = sqlx::query!(
        r#"insert into vm_networks (vm_id, network_id, position, mac, address)
           values ($1, $2, $3, $4::text::macaddr, $5::text::inet)"#,
        a.vm_id.0,
        a.network_id.0,
        a.position as i16,
        a.mac,
        a.address.map(|ip| ip.to_string()),
    )
    .execute(&mut **tx)
    .await;
    match res {
        Err(sqlx::Error::Database(e))
            if e.constraint() == Some("vm_networks_network_id_address_key") =>
        {
            Err(Error::Conflict {
                message: format!(
                    "address {} is already taken",
                    a.address.map(|a| a.to_string()).unwrap_or_default()
                ),
            })
        }
        other => other.map(|_| ()).ctx("attaching a vm to a network"),
    }
}

/// The addresses held in a network, by VMs and by reservations (call with
/// the network locked).
pub async fn taken_addresses(tx: &mut Tx<'_>, id: NetworkId) -> Result<BTreeSet<Ipv4Addr>, Error> {
    let rows = sqlx::query_scalar!(
        r#"select host(address) as "address!" from vm_networks
           where network_id = $1 and address is not null
           union all
           select host(address) from network_reservations where network_id = $1"#,
        id.0
    )
    .fetch_all(&mut **tx)
    .await
    .ctx("listing taken addresses")?;
    rows.iter().map(|s| ip("address", s)).collect()
}

/// The VMs attached to a network.
pub async fn vms_on(db: impl sqlx::PgExecutor<'_>, id: NetworkId) -> Result<Vec<VmId>, Error> {
    let rows = sqlx::query_scalar!(
        "select vm_id from vm_networks where network_id = $1 order by vm_id",
        id.0
    )
    .fetch_all(db)
    .await
    .ctx("listing a network's vms")?;
    Ok(rows.into_iter().map(VmId).collect())
}

/// The NICs of these VMs, by VM then position.
pub async fn attachments_of(
    db: impl sqlx::PgExecutor<'_>,
    vms: &[VmId],
) -> Result<Vec<Attachment>, Error> {
    let ids: Vec<Uuid> = vms.iter().map(|v| v.0).collect();
    sqlx::query_as!(
        AttachmentRow,
        r#"select vm_id, network_id, position, text(mac) as "mac!", host(address) as "address?"
           from vm_networks where vm_id = any($1) order by vm_id, position"#,
        &ids
    )
    .fetch_all(db)
    .await
    .ctx("listing vm attachments")?
    .into_iter()
    .map(Attachment::try_from)
    .collect()
}

/// A NIC as its queries read it (also from JSON: a VM read aggregates its
/// NICs into one column).
#[derive(Debug, sqlx::FromRow, serde::Deserialize)]
pub(crate) struct AttachmentRow {
    vm_id: Uuid,
    network_id: Uuid,
    position: i16,
    mac: String,
    address: Option<String>,
}

impl TryFrom<AttachmentRow> for Attachment {
    type Error = Error;
    fn try_from(r: AttachmentRow) -> Result<Attachment, Error> {
        Ok(Attachment {
            vm_id: VmId(r.vm_id),
            network_id: NetworkId(r.network_id),
            position: u16::try_from(r.position).map_err(|_| corrupt("position", r.position))?,
            mac: r.mac,
            address: r.address.as_deref().map(|a| ip("address", a)).transpose()?,
        })
    }
}

/// Releases every NIC of a VM (its addresses become free).
pub async fn detach_vm(tx: &mut Tx<'_>, vm: VmId) -> Result<(), Error> {
    sqlx::query!("delete from vm_networks where vm_id = $1", vm.0)
        .execute(&mut **tx)
        .await
        .ctx("detaching a vm")?;
    Ok(())
}

/// Ties a network to the cluster that owns it (in the cluster's create
/// transaction); it then leaves `/v1/networks`.
pub async fn set_cluster(
    tx: &mut Tx<'_>,
    id: NetworkId,
    cluster: meson_core::ClusterId,
) -> Result<(), Error> {
    sqlx::query!(
        "update networks set cluster_id = $2 where id = $1",
        id.0,
        cluster.0
    )
    .execute(&mut **tx)
    .await
    .ctx("tying a network to its cluster")?;
    Ok(())
}

/// Holds an address in a network for something that is not a VM's NIC.
pub async fn reserve(
    tx: &mut Tx<'_>,
    id: NetworkId,
    address: Ipv4Addr,
    purpose: &str,
) -> Result<(), Error> {
    sqlx::query!(
        "insert into network_reservations (network_id, address, purpose) values ($1, $2::text::inet, $3)",
        id.0,
        address.to_string(),
        purpose,
    )
    .execute(&mut **tx)
    .await
    .ctx("reserving an address")?;
    Ok(())
}

// ---- Where each network exists on AtomOS. ----

/// The network on one target: its AtomOS id once made there (`None`: being
/// made, or a crash left it unrecorded; look for it by name).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostNetwork {
    pub target: TargetId,
    pub atomos_id: Option<String>,
}

/// Notes that the network is about to be made on a target (no-op if it is
/// there already) and returns the row as it stands.
pub async fn claim_host_network(
    pool: &PgPool,
    id: NetworkId,
    target: TargetId,
) -> Result<HostNetwork, Error> {
    sqlx::query!(
        r#"insert into network_hosts (network_id, target_id) values ($1, $2)
           on conflict (network_id, target_id) do nothing"#,
        id.0,
        target.0,
    )
    .execute(pool)
    .await
    .ctx("claiming a network's host")?;
    let atomos_id = sqlx::query_scalar!(
        "select atomos_id from network_hosts where network_id = $1 and target_id = $2",
        id.0,
        target.0
    )
    .fetch_one(pool)
    .await
    .ctx("fetching a network's host")?;
    Ok(HostNetwork { target, atomos_id })
}

/// Records the network's AtomOS id on a target.
pub async fn set_host_network(
    pool: &PgPool,
    id: NetworkId,
    target: TargetId,
    atomos_id: &str,
) -> Result<(), Error> {
    sqlx::query!(
        "update network_hosts set atomos_id = $3 where network_id = $1 and target_id = $2",
        id.0,
        target.0,
        atomos_id
    )
    .execute(pool)
    .await
    .ctx("recording a network's host")?;
    Ok(())
}

/// Every target the network is (or may be) made on.
pub async fn host_networks(pool: &PgPool, id: NetworkId) -> Result<Vec<HostNetwork>, Error> {
    let rows = sqlx::query!(
        "select target_id, atomos_id from network_hosts where network_id = $1 order by target_id",
        id.0
    )
    .fetch_all(pool)
    .await
    .ctx("listing a network's hosts")?;
    Ok(rows
        .into_iter()
        .map(|r| HostNetwork {
            target: TargetId(r.target_id),
            atomos_id: r.atomos_id,
        })
        .collect())
}

pub async fn forget_host_network(
    pool: &PgPool,
    id: NetworkId,
    target: TargetId,
) -> Result<(), Error> {
    sqlx::query!(
        "delete from network_hosts where network_id = $1 and target_id = $2",
        id.0,
        target.0
    )
    .execute(pool)
    .await
    .ctx("forgetting a network's host")?;
    Ok(())
}

/// Attaches a VM being created to its networks, in its create transaction
/// (see [`attach_network`]; an unknown network is a `400` naming it).
pub async fn attach_networks(
    tx: &mut Tx<'_>,
    tenant: &meson_core::TenantId,
    vm: VmId,
    networks: &[NetworkId],
    cluster_owned: bool,
) -> meson_core::Result<Vec<meson_core::network::Attachment>> {
    let mut out = Vec::with_capacity(networks.len());
    for (position, &network_id) in networks.iter().enumerate() {
        let field = format!("networks[{position}]");
        match attach_network(
            tx,
            tenant,
            vm,
            network_id,
            position as u16,
            &field,
            cluster_owned,
        )
        .await
        {
            Err(meson_core::Error::NotFound { .. }) => {
                return Err(meson_core::Error::invalid(field, "no such network"));
            }
            other => out.push(other?),
        }
    }
    Ok(out)
}

/// Attaches a VM to one network as its NIC at `position` (a create's, or
/// a live VM's attach): the network must be the tenant's (else
/// `not_found`) and not being deleted (a `400` naming `field`); on a
/// network without DHCP, and on a cluster's network always, the VM gets
/// the lowest free address of the range (the row lock serializes
/// concurrent attaches), and none left is `resource_unavailable`.
pub async fn attach_network(
    tx: &mut Tx<'_>,
    tenant: &meson_core::TenantId,
    vm: VmId,
    network_id: NetworkId,
    position: u16,
    field: &str,
    cluster_owned: bool,
) -> meson_core::Result<meson_core::network::Attachment> {
    let network = lock(tx, tenant, network_id, cluster_owned).await?;
    if network.status == meson_core::network::NetworkStatus::Deleting {
        return Err(meson_core::Error::invalid(
            field,
            "the network is being deleted",
        ));
    }
    // A cluster's nodes are addressed by meson even on a DHCP network:
    // the network exists once per host, each with its own DHCP server,
    // so leases from two hosts could collide.
    let address = if network.subnet.dhcp && !cluster_owned {
        None
    } else {
        let taken = taken_addresses(tx, network_id).await?;
        Some(network.subnet.next_free(&taken).ok_or_else(|| {
            meson_core::Error::InsufficientCapacity {
                reason: format!(
                    "network {} ({}) has no free address left in {}..{}",
                    network.name, network_id, network.subnet.range.start, network.subnet.range.last
                ),
            }
        })?)
    };
    let attachment = meson_core::network::Attachment {
        vm_id: vm,
        network_id,
        position,
        mac: meson_core::network::random_mac(),
        address,
    };
    attach(tx, &attachment).await?;
    Ok(attachment)
}

/// Releases one NIC of a VM (its address becomes free).
pub async fn detach_network(
    db: impl sqlx::PgExecutor<'_>,
    vm: VmId,
    network: NetworkId,
) -> Result<(), Error> {
    sqlx::query!(
        "delete from vm_networks where vm_id = $1 and network_id = $2",
        vm.0,
        network.0
    )
    .execute(db)
    .await
    .ctx("detaching a vm from a network")?;
    Ok(())
}
