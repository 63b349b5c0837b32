//! Placement: every candidate AtomOS target asked, in parallel, to fit a VM spec and price it.
//!
//! A workflow places a VM in three stages, each its own function so that
//! another rule fits in where it belongs:
//! 1. [`candidates`]: the enabled targets the VM may go to (a filter on
//!    this list restricts where it can go);
//! 2. [`survey_reserved`]: each candidate asked, in parallel, whether it
//!    fits the VM plus the capacity already reserved there by placements
//!    not registered yet; the offers come cheapest first: the ordered
//!    candidate list;
//! 3. [`claim`]: the list walked in order, each host's reservations read
//!    again under its lock; the first host that still fits gets the VM's
//!    reservation and placement in one transaction.
//!
//! A host that refuses the VM at `register` all the same (full since its
//! quote, by something meson did not place) is not the end: the VM is
//! placed again without it ([`crate::provision::register_placed`]).

//!
//! The survey itself (stage 2, and the offers, reasons and prices it deals
//! in) is `meson_placement`'s, shared with the API's quotes; what is here
//! claims hosts under the database's locks.

pub use meson_placement::*;

use crate::Env;
use atomos_driver::AtomosClient;
use meson_core::Code;
use meson_core::TargetId;
use meson_core::target::Target;
use meson_core::vm::{Placement, Vm};
use meson_db::reservations::Reserved;
use meson_jobs::{StepError, StepResult};
use std::collections::HashMap;

/// A placement failure as the failure of a workflow step.
pub trait StepFailure {
    fn step_error(&self) -> StepError;
}

impl StepFailure for NoPlacement {
    /// Counted (`meson_placement_failures_total{reason}`); retryable when a
    /// host did not answer, final otherwise.
    fn step_error(&self) -> StepError {
        self.count();
        match self {
            NoPlacement::Unanswered => StepError::temporary(self.message()),
            _ => StepError::fatal(Code::ResourceUnavailable, self.message()),
        }
    }
}

/// The targets a VM may be placed on: every enabled one but those in
/// `exclude` (hosts that refused it already).
pub async fn candidates(
    env: &Env,
    exclude: &[TargetId],
) -> StepResult<Vec<(Target, AtomosClient)>> {
    Ok(env
        .atomos
        .enabled()
        .await?
        .into_iter()
        .filter(|(t, _)| !exclude.contains(&t.id))
        .collect())
}

/// Walks `offers` (best first) and claims the first host that still fits
/// the VM: under the host's placement lock (held until `tx` ends), with
/// what is reserved there now. A host whose reservations grew since
/// `surveyed` was read is asked again; one that refuses, or does not
/// answer, is passed over. The VM's reservation and placement are written
/// in `tx`. `None` when no offered host fits any more; a retryable error
/// when none fits but one did not answer. A VM placed meanwhile (by
/// another attempt of the same workflow, which lost its lease while it
/// surveyed) keeps that placement: what that attempt made is there.
pub async fn claim(
    tx: &mut meson_db::Tx<'_>,
    vm: &Vm,
    offers: &[Offer],
    clients: &[(Target, AtomosClient)],
    surveyed: &HashMap<TargetId, Reserved>,
) -> StepResult<Option<Placement>> {
    if let Some(placed) = meson_db::vms::lock_placement(tx, vm.id).await? {
        return Ok(Some(placed));
    }
    let mut unanswered = false;
    let mut tried: Vec<TargetId> = Vec::new();
    for offer in offers {
        let target = offer.placement.target_id;
        // A host offers once per quote; one answer is enough.
        if tried.contains(&target) {
            continue;
        }
        tried.push(target);
        let now = meson_db::reservations::lock_host(tx, target, vm.id).await?;
        let then = surveyed.get(&target).copied().unwrap_or_default();
        if now.vcpus > then.vcpus || now.ram_mib > then.ram_mib {
            let Some((_, c)) = clients.iter().find(|(t, _)| t.id == target) else {
                continue;
            };
            match fits(c, &vm.spec, now).await {
                Ok(_) => {}
                Err(e) => {
                    unanswered |= e.is_transient();
                    tracing::info!(vm = %vm.id, host = %offer.placement.host, error = %e,
                        "host no longer fits the vm with the placements in flight; next candidate");
                    continue;
                }
            }
        }
        meson_db::reservations::reserve(tx, vm.id, target, demand(&vm.spec)).await?;
        meson_db::vms::set_placement(&mut **tx, vm.id, Some(&offer.placement)).await?;
        return Ok(Some(offer.placement.clone()));
    }
    if unanswered {
        return Err(NoPlacement::Unanswered.step_error());
    }
    Ok(None)
}

/// [`claim`] for a group of VMs of one spec (`vms`, a cluster's node
/// group): one decision for them all, in `tx`. Under the placement locks of
/// every offered host (and the VMs' row locks), the VMs are spread over the
/// hosts ([`spread`], `used` the group's hosts so far), and each host is
/// asked once, in parallel, whether it fits its share on top of what is
/// reserved there now (bisected when it does not, the rest spread again).
/// Every VM placed gets its reservation and its placement (at the offer's
/// price: one VM's) in one statement each. Returns the VMs placed; those
/// left out (no host fits them any more, or one did not answer) are for
/// [`claim`] to place one at a time, or to fail with the reason. VMs placed
/// meanwhile (by another attempt of the same workflow) keep their placement.
pub async fn claim_group(
    tx: &mut meson_db::Tx<'_>,
    vms: &[Vm],
    offers: &[Offer],
    clients: &[(Target, AtomosClient)],
    used: &[TargetId],
) -> StepResult<Vec<(meson_core::VmId, Placement)>> {
    let Some(spec) = vms.first().map(|v| &v.spec) else {
        return Ok(Vec::new());
    };
    let ids: Vec<meson_core::VmId> = vms.iter().map(|v| v.id).collect();
    // In id order, as the rows were locked.
    let todo = meson_db::vms::lock_unplaced(tx, &ids).await?;
    let mut hosts: Vec<&Offer> = Vec::new();
    for o in offers {
        // A host offers once per quote; its best is the one.
        if !hosts
            .iter()
            .any(|h| h.placement.target_id == o.placement.target_id)
            && clients.iter().any(|(t, _)| t.id == o.placement.target_id)
        {
            hosts.push(o);
        }
    }
    let targets: Vec<TargetId> = hosts.iter().map(|o| o.placement.target_id).collect();
    let reserved = meson_db::reservations::lock_hosts(tx, &targets).await?;
    // Per host: how many are known to fit, and (when fewer than asked) the most.
    let mut fit: HashMap<TargetId, u32> = HashMap::new();
    let mut caps: HashMap<TargetId, u32> = HashMap::new();
    let plan = loop {
        let plan = spread(todo.len(), &targets, used, &caps);
        let mut counts = vec![0u32; targets.len()];
        for &i in &plan {
            counts[i] += 1;
        }
        let asks = counts.iter().enumerate().filter_map(|(i, &k)| {
            let t = targets[i];
            let known = fit.get(&t).copied().unwrap_or(0);
            let (_, c) = clients.iter().find(|(x, _)| x.id == t)?;
            let on_host = reserved.get(&t).copied().unwrap_or_default();
            (k > known)
                .then_some(async move { (t, k, most_that_fit(c, spec, on_host, known, k).await) })
        });
        let answers = futures::future::join_all(asks).await;
        if answers.is_empty() {
            break plan;
        }
        for (t, asked, (most, unanswered)) in answers {
            fit.insert(t, most);
            if most < asked {
                if !unanswered {
                    tracing::info!(host = %t, asked, most,
                        "host fits fewer of the group than planned; spreading the rest again");
                }
                caps.insert(t, most);
            }
        }
    };
    let placed: Vec<(meson_core::VmId, Placement)> = todo
        .iter()
        .zip(&plan)
        .map(|(vm, &i)| (*vm, hosts[i].placement.clone()))
        .collect();
    if placed.is_empty() {
        return Ok(placed);
    }
    let reservations: Vec<_> = placed.iter().map(|(v, p)| (*v, p.target_id)).collect();
    meson_db::reservations::reserve_many(tx, &reservations, demand(spec)).await?;
    let rows: Vec<_> = placed.iter().map(|(v, p)| (*v, p)).collect();
    meson_db::vms::set_placements(tx, &rows).await?;
    Ok(placed)
}

/// Places a plain VM on the cheapest host that fits it (none of
/// `exclude`): candidates → survey → claim. Returns the placement.
/// A VM attaching standalone volumes has one candidate: their host.
pub async fn place_vm(env: &Env, vm: &Vm, exclude: &[TargetId]) -> StepResult<Placement> {
    let mut clients = candidates(env, exclude).await?;
    let attached = meson_db::volumes::attached_to_vms(&env.pool, &[vm.id]).await?;
    let pin = match (attached.first(), vm.spec.image) {
        (Some(v), _) => {
            let p = v
                .placement
                .as_ref()
                .ok_or_else(|| StepError::internal("an attached volume has no placement"))?;
            Some(Pin {
                what: format!("volume {}", v.name),
                host: p.host.clone(),
                target: p.target_id,
            })
        }
        (None, Some(image)) => {
            let i = meson_db::images::get_including_deleted(&env.pool, image).await?;
            let p = i
                .placement
                .as_ref()
                .ok_or_else(|| StepError::internal("the VM's image has no placement"))?;
            Some(Pin {
                what: format!("image {}", i.name),
                host: p.host.clone(),
                target: p.target_id,
            })
        }
        (None, None) => match vm.spec.backup {
            Some(backup) => {
                let b = meson_db::backups::get_including_deleted(&env.pool, backup).await?;
                Some(Pin {
                    what: format!("backup {}", b.name),
                    host: b.host,
                    target: b.target_id,
                })
            }
            None => None,
        },
    };
    if let Some(pin) = &pin {
        clients.retain(|(t, _)| t.id == pin.target);
    }
    let reserved = meson_db::reservations::pending(&env.pool, vm.id).await?;
    let survey = survey_reserved(clients.clone(), &vm.spec, &reserved)
        .await
        .map_err(|e| pinned(pin.as_ref(), e).step_error())?;
    let mut tx = meson_db::begin(&env.pool).await?;
    let Some(placement) = claim(&mut tx, vm, survey.offers(), &clients, &reserved).await? else {
        return Err(pinned(pin.as_ref(), all_taken(&vm.spec, &survey)).step_error());
    };
    meson_db::commit(tx).await?;
    Ok(placement)
}

/// A VM placed this long after it was asked for is looked for on the hosts
/// first ([`found_on_a_host`]): a restore takes far longer, and placing a
/// fresh VM far less.
pub const LATE_PLACEMENT: std::time::Duration = std::time::Duration::from_secs(10);

/// How old a host's listing may be when looking for a VM already on it
/// ([`found_on_a_host`]): such a VM was made minutes before, by a run of
/// the workflow the database no longer remembers.
const FOUND_LISTING_AGE: std::time::Duration = std::time::Duration::from_secs(30);

/// Where AtomOS already holds the VM, by its name, on any host that
/// answers (drained ones too): a create running again on a database
/// restored to before it placed the VM. Its placement is recorded there,
/// and nothing is made a second time elsewhere. Hosts are listed at most
/// every [`FOUND_LISTING_AGE`] for this, shared by the creates of a worker.
pub async fn found_on_a_host(env: &Env, vm: &Vm) -> StepResult<Option<Placement>> {
    let now = tokio::time::Instant::now();
    let since = now.checked_sub(FOUND_LISTING_AGE).unwrap_or(now);
    for target in meson_db::targets::list(&env.pool).await? {
        let Ok(c) = env.atomos.client(target.id).await else {
            continue;
        };
        let Ok(vms) = env.atomos.vms_since(target.id, &c, since).await else {
            continue;
        };
        if vms.iter().any(|v| v.name == vm.atomos_name) {
            let placement = quoted(&target, &c, &vm.spec).await;
            meson_db::vms::set_placement(&env.pool, vm.id, Some(&placement)).await?;
            return Ok(Some(placement));
        }
    }
    Ok(None)
}

/// A placement on `target` of a VM already there: at the price the host
/// quotes for its size now, or none when it will not say (billed at no
/// price rather than a guessed one).
pub async fn quoted(target: &Target, c: &AtomosClient, spec: &meson_core::vm::VmSpec) -> Placement {
    let quote = c
        .can_allocate(&driver_spec(spec))
        .await
        .ok()
        .and_then(|q| q.into_iter().next());
    Placement {
        target_id: target.id,
        host: target.name.clone(),
        provider: target.provider.clone(),
        region: target.region.clone(),
        price_hourly: quote.as_ref().map_or(0.0, |q| q.price_hour),
        price_monthly: quote.as_ref().map_or(0.0, |q| q.price_month),
        currency: quote.map_or_else(|| "EUR".into(), |q| q.currency),
    }
}

/// The host a VM's attached volume, its image or its backup holds it to.
struct Pin {
    /// `volume <name>`, `image <name>` or `backup <name>`.
    what: String,
    host: String,
    target: TargetId,
}

/// A pinned VM's placement failure says which volume pins it where.
fn pinned(pin: Option<&Pin>, e: NoPlacement) -> NoPlacement {
    match (pin, e) {
        (Some(p), NoPlacement::NoCandidates { constraints }) => NoPlacement::NoFit {
            reason: format!(
                "{} pins the VM to host {}, which is not available{constraints}",
                p.what, p.host
            ),
        },
        (Some(p), NoPlacement::NoFit { reason }) => NoPlacement::NoFit {
            reason: format!(
                "{} pins the VM to host {}, which cannot host it: {reason}",
                p.what, p.host
            ),
        },
        (_, e) => e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_placement_maps_to_step_errors() {
        let none = NoPlacement::NoCandidates {
            constraints: " for provider 'ovh'".into(),
        };
        assert_eq!(
            none.step_error(),
            StepError::fatal(
                Code::ResourceUnavailable,
                "no hypervisor is available for provider 'ovh'"
            )
        );
        assert_eq!(
            NoPlacement::Unanswered.step_error(),
            StepError::temporary("no hypervisor answered in time")
        );
        // A host that did not answer the survey may have room: retry.
        assert!(matches!(
            NoPlacement::Unanswered.step_error(),
            StepError::Retryable { .. }
        ));
    }
}
