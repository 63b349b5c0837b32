//! Host reservations: capacity promised to VMs placed on a host and not
//! registered there yet, so that placements made at the same time see each
//! other (see the `host_reservations` migration).

use crate::{DbResult, Tx};
use meson_core::{Error, TargetId, VmId};
use sqlx::PgPool;
use std::collections::HashMap;

/// Capacity reserved on one host.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reserved {
    pub vcpus: u32,
    pub ram_mib: u64,
}

fn reserved(vcpus: i64, ram_mib: i64) -> Reserved {
    Reserved {
        vcpus: u32::try_from(vcpus).unwrap_or(u32::MAX),
        ram_mib: u64::try_from(ram_mib).unwrap_or(0),
    }
}

/// What is reserved on every host with a reservation, other than `except`'s.
/// A reservation of a VM deleted or failed meanwhile no longer counts.
pub async fn pending(pool: &PgPool, except: VmId) -> Result<HashMap<TargetId, Reserved>, Error> {
    let rows = sqlx::query!(
        r#"select r.target_id, sum(r.vcpus)::bigint as "vcpus!", sum(r.ram_mib)::bigint as "ram_mib!"
           from host_reservations r join vms v on v.id = r.vm_id
           where r.vm_id <> $1 and v.deleted_at is null and v.status <> 'error'
           group by r.target_id"#,
        except.0
    )
    .fetch_all(pool)
    .await
    .ctx("reading host reservations")?;
    Ok(rows
        .into_iter()
        .map(|r| (TargetId(r.target_id), reserved(r.vcpus, r.ram_mib)))
        .collect())
}

/// Takes the placement lock of one host until `tx` ends and returns what is
/// reserved there now, other than `except`'s.
pub async fn lock_host(tx: &mut Tx<'_>, target: TargetId, except: VmId) -> Result<Reserved, Error> {
    sqlx::query_scalar!(
        r#"select true as "locked!" from pg_advisory_xact_lock(hashtextextended($1, 0))"#,
        host_lock_key(target),
    )
    .fetch_one(&mut **tx)
    .await
    .ctx("locking a host's placement")?;
    let r = sqlx::query!(
        r#"select coalesce(sum(r.vcpus), 0)::bigint as "vcpus!",
                  coalesce(sum(r.ram_mib), 0)::bigint as "ram_mib!"
           from host_reservations r join vms v on v.id = r.vm_id
           where r.target_id = $1 and r.vm_id <> $2 and v.deleted_at is null and v.status <> 'error'"#,
        target.0,
        except.0
    )
    .fetch_one(&mut **tx)
    .await
    .ctx("reading a host's reservations")?;
    Ok(reserved(r.vcpus, r.ram_mib))
}

/// The name of a host's placement lock.
fn host_lock_key(target: TargetId) -> String {
    format!("meson:host-placement:{target}")
}

/// Takes the placement locks of `targets` until `tx` ends, in the order of
/// their ids (two callers locking several never wait on each other in a
/// cycle), and returns what is reserved on each now (hosts without a
/// reservation absent).
pub async fn lock_hosts(
    tx: &mut Tx<'_>,
    targets: &[TargetId],
) -> Result<HashMap<TargetId, Reserved>, Error> {
    let mut ids: Vec<TargetId> = targets.to_vec();
    ids.sort();
    ids.dedup();
    let keys: Vec<String> = ids.iter().map(|t| host_lock_key(*t)).collect();
    // A function scan yields the array in order: the locks are taken in it.
    sqlx::query_scalar!(
        r#"select count(*) as "locked!" from (
               select pg_advisory_xact_lock(hashtextextended(k, 0)) from unnest($1::text[]) k
           ) l"#,
        &keys,
    )
    .fetch_one(&mut **tx)
    .await
    .ctx("locking hosts' placement")?;
    let ids: Vec<uuid::Uuid> = ids.iter().map(|t| t.0).collect();
    let rows = sqlx::query!(
        r#"select r.target_id, sum(r.vcpus)::bigint as "vcpus!", sum(r.ram_mib)::bigint as "ram_mib!"
           from host_reservations r join vms v on v.id = r.vm_id
           where r.target_id = any($1) and v.deleted_at is null and v.status <> 'error'
           group by r.target_id"#,
        &ids,
    )
    .fetch_all(&mut **tx)
    .await
    .ctx("reading hosts' reservations")?;
    Ok(rows
        .into_iter()
        .map(|r| (TargetId(r.target_id), reserved(r.vcpus, r.ram_mib)))
        .collect())
}

/// Reserves `each` on its host for every VM of `vms` (replacing any
/// reservation one had), in one statement.
pub async fn reserve_many(
    tx: &mut Tx<'_>,
    vms: &[(VmId, TargetId)],
    each: Reserved,
) -> Result<(), Error> {
    let ids: Vec<uuid::Uuid> = vms.iter().map(|(v, _)| v.0).collect();
    let targets: Vec<uuid::Uuid> = vms.iter().map(|(_, t)| t.0).collect();
    sqlx::query!(
        r#"insert into host_reservations (vm_id, target_id, vcpus, ram_mib)
           select u.vm_id, u.target_id, $3, $4 from unnest($1::uuid[], $2::uuid[]) as u(vm_id, target_id)
           on conflict (vm_id) do update set target_id = excluded.target_id,
               vcpus = excluded.vcpus, ram_mib = excluded.ram_mib, created_at = now()"#,
        &ids,
        &targets,
        i32::try_from(each.vcpus).unwrap_or(i32::MAX),
        i64::try_from(each.ram_mib).unwrap_or(i64::MAX),
    )
    .execute(&mut **tx)
    .await
    .ctx("reserving host capacity")?;
    Ok(())
}

/// Reserves `what` on `target` for `vm` (replacing any reservation it had).
pub async fn reserve(
    tx: &mut Tx<'_>,
    vm: VmId,
    target: TargetId,
    what: Reserved,
) -> Result<(), Error> {
    reserve_many(tx, &[(vm, target)], what).await
}

/// Releases `vm`'s reservation, if it has one (registered, unplaced, gone).
pub async fn release(db: impl sqlx::PgExecutor<'_>, vm: VmId) -> Result<(), Error> {
    sqlx::query!("delete from host_reservations where vm_id = $1", vm.0)
        .execute(db)
        .await
        .ctx("releasing a host reservation")?;
    Ok(())
}
