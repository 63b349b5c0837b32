//! Which AtomOS hosts can take a VM, a volume or a whole cluster, and at
//! what price: every candidate asked, in parallel, whether it fits a spec
//! (compute `canallocate`, storage `cancreate`) and what it would cost.
//!
//! The survey only reads: it changes nothing on AtomOS and writes nothing.
//! The API's quotes (`POST /v1/quotes`) call it as it is; the workflows'
//! placement (`meson_workflows::placement`) surveys with it, then claims a
//! host under the database's placement locks.

pub mod cluster;

use atomos_driver::{AtomosClient, ClientOptions, Ports};
use meson_core::TargetId;
use meson_core::target::Target;
use meson_core::vm::{Placement, VmSpec};
use meson_db::reservations::Reserved;
use std::collections::HashMap;
use std::time::Duration;

/// One target's offer to host a VM.
#[derive(Clone, Debug, PartialEq)]
pub struct Offer {
    pub placement: Placement,
    pub continent: String,
}

/// The offers of every target that can host a spec: never empty, cheapest
/// first (ties broken by host name).
#[derive(Clone, Debug, PartialEq)]
pub struct Survey {
    offers: Vec<Offer>,
    /// Candidates that did not answer in time; their offers are missing.
    pub unanswered: usize,
}

impl Survey {
    pub fn offers(&self) -> &[Offer] {
        &self.offers
    }

    pub fn into_offers(self) -> Vec<Offer> {
        self.offers
    }

    pub fn cheapest(&self) -> &Offer {
        // `survey` only builds a Survey with at least one offer.
        &self.offers[0]
    }
}

/// Why no target can host a spec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NoPlacement {
    /// No enabled target meets the provider/continent/region constraints.
    NoCandidates { constraints: String },
    /// No target offered, and at least one did not answer: worth retrying.
    Unanswered,
    /// Every candidate answered and none can fit the spec.
    NoFit { reason: String },
}

impl NoPlacement {
    /// A metrics label.
    pub fn reason(&self) -> &'static str {
        match self {
            NoPlacement::NoCandidates { .. } => "no_candidates",
            NoPlacement::Unanswered => "unanswered",
            NoPlacement::NoFit { .. } => "no_fit",
        }
    }

    /// Counts this failure (`meson_placement_failures_total{reason}`).
    pub fn count(&self) {
        metrics::counter!("meson_placement_failures_total", "reason" => self.reason()).increment(1);
    }

    pub fn message(&self) -> String {
        match self {
            NoPlacement::NoCandidates { constraints } => {
                format!("no hypervisor is available{constraints}")
            }
            NoPlacement::Unanswered => "no hypervisor answered in time".to_owned(),
            NoPlacement::NoFit { reason } => reason.clone(),
        }
    }
}

impl From<NoPlacement> for meson_core::Error {
    fn from(e: NoPlacement) -> Self {
        e.count();
        match e {
            NoPlacement::Unanswered => meson_core::Error::Unavailable {
                message: e.message(),
            },
            _ => meson_core::Error::InsufficientCapacity {
                reason: e.message(),
            },
        }
    }
}

/// Whether a target satisfies the request's provider/continent/region constraints.
pub fn placement_allows(spec: &VmSpec, t: &Target) -> bool {
    t.meets([&spec.provider, &spec.continent, &spec.region])
}

/// ` for provider 'x', region 'y'` (empty without constraints).
pub fn describe_constraints([provider, continent, region]: [&Option<String>; 3]) -> String {
    let parts: Vec<String> = [
        ("provider", provider),
        ("continent", continent),
        ("region", region),
    ]
    .iter()
    .filter_map(|(k, v)| v.as_ref().map(|v| format!("{k} '{v}'")))
    .collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!(" for {}", parts.join(", "))
    }
}

/// The driver's view of a VM spec.
pub fn driver_spec(s: &VmSpec) -> atomos_driver::VmSpec {
    atomos_driver::VmSpec {
        slots: s.cpu.vcpus(),
        // Dedicated vCPUs: one VM per core.
        overprovision: 1,
        allow_smt: s.cpu.smt,
        archs: s.cpu.archs.clone(),
        flags: s.cpu.flags.clone(),
        min_frequency_ghz: s.cpu.min_frequency_ghz,
        ram_mib: s.memory_mib,
        require_ecc: s.require_ecc,
        pci: s
            .pci
            .iter()
            .map(|p| atomos_driver::PciDevice {
                vendor: p.vendor.clone(),
                model: p.model.clone(),
                quantity: p.quantity,
            })
            .collect(),
        os_family: s.os.family.clone(),
        os_flavour: s.os.flavour.clone(),
    }
}

/// Disk the VM needs on its target, in GB.
pub fn total_disk_gb(spec: &VmSpec) -> u32 {
    // The cloud-init ISO is tiny but AtomOS still reserves a slot for it.
    spec.boot_volume_gb + 1 + spec.volumes.iter().map(|v| v.size_gb).sum::<u32>()
}

/// What a VM reserves on its host until it is registered there.
pub fn demand(spec: &VmSpec) -> Reserved {
    Reserved {
        vcpus: spec.cpu.vcpus(),
        ram_mib: spec.memory_mib,
    }
}

/// The driver's spec of a VM with what is reserved on the host added: the
/// host must fit both.
fn with_reserved(wire: &atomos_driver::VmSpec, r: Reserved) -> atomos_driver::VmSpec {
    let mut w = wire.clone();
    w.slots = w.slots.saturating_add(r.vcpus);
    w.ram_mib = w.ram_mib.saturating_add(r.ram_mib);
    w
}

/// Whether one host fits the VM and its disks on top of `reserved`.
pub async fn fits(
    c: &AtomosClient,
    spec: &VmSpec,
    reserved: Reserved,
) -> Result<Vec<atomos_driver::Quote>, atomos_driver::DriverError> {
    fits_many(c, spec, reserved, 1).await
}

/// Whether one host fits `count` (at least one) VMs of `spec` and their
/// disks on top of `reserved`: the VMs beyond the first are asked for as
/// reserved capacity, like the placements in flight.
pub async fn fits_many(
    c: &AtomosClient,
    spec: &VmSpec,
    reserved: Reserved,
    count: u32,
) -> Result<Vec<atomos_driver::Quote>, atomos_driver::DriverError> {
    let one = demand(spec);
    let more = count.saturating_sub(1);
    let on_top = Reserved {
        vcpus: reserved
            .vcpus
            .saturating_add(one.vcpus.saturating_mul(more)),
        ram_mib: reserved
            .ram_mib
            .saturating_add(one.ram_mib.saturating_mul(u64::from(more))),
    };
    let quotes = c
        .can_allocate(&with_reserved(&driver_spec(spec), on_top))
        .await?;
    c.volume_can_create(total_disk_gb(spec).saturating_mul(count.max(1)))
        .await?;
    Ok(quotes)
}

/// Asks every candidate allowed by the spec's constraints, in parallel, to
/// fit the VM (`canallocate`) and its disks (volume `cancreate`), and
/// returns their offers cheapest first, or why there are none.
pub async fn survey(
    candidates: Vec<(Target, AtomosClient)>,
    spec: &VmSpec,
) -> Result<Survey, NoPlacement> {
    survey_reserved(candidates, spec, &HashMap::new()).await
}

/// [`survey`], each host asked to fit the VM on top of what `reserved`
/// says is promised there to placements not registered yet.
pub async fn survey_reserved(
    candidates: Vec<(Target, AtomosClient)>,
    spec: &VmSpec,
    reserved: &HashMap<TargetId, Reserved>,
) -> Result<Survey, NoPlacement> {
    let disk = total_disk_gb(spec);
    let candidates: Vec<_> = candidates
        .into_iter()
        .filter(|(t, _)| placement_allows(spec, t))
        .collect();
    if candidates.is_empty() {
        return Err(NoPlacement::NoCandidates {
            constraints: describe_constraints([&spec.provider, &spec.continent, &spec.region]),
        });
    }
    let asks = candidates.iter().map(|(t, c)| async move {
        let on_host = reserved.get(&t.id).copied().unwrap_or_default();
        (t, fits(c, spec, on_host).await)
    });
    let mut offers = Vec::new();
    let mut unanswered = 0;
    for (t, answer) in futures::future::join_all(asks).await {
        match answer {
            Ok(quotes) => {
                for q in quotes {
                    // A price that is not money would poison the ordering
                    // (and the database's CHECK): not an offer.
                    if !(q.price_hour.is_finite()
                        && q.price_hour >= 0.0
                        && q.price_month.is_finite()
                        && q.price_month >= 0.0)
                    {
                        tracing::warn!(host = %t.name, hourly = q.price_hour, monthly = q.price_month, "ignoring a quote with an invalid price");
                        continue;
                    }
                    offers.push(Offer {
                        placement: Placement {
                            target_id: t.id,
                            host: t.name.clone(),
                            provider: t.provider.clone(),
                            region: if q.region.is_empty() {
                                t.region.clone()
                            } else {
                                q.region
                            },
                            price_hourly: q.price_hour,
                            price_monthly: q.price_month,
                            currency: if q.currency.is_empty() {
                                "EUR".into()
                            } else {
                                q.currency
                            },
                        },
                        continent: t.continent.clone(),
                    });
                }
            }
            Err(e) if e.is_transient() => unanswered += 1,
            Err(e) => tracing::debug!(host = %t.name, error = %e, "target cannot host the vm"),
        }
    }
    if offers.is_empty() {
        if unanswered > 0 {
            return Err(NoPlacement::Unanswered);
        }
        return Err(NoPlacement::NoFit {
            reason: format!(
                "no hypervisor can host {} vCPUs, {} MiB RAM and {disk} GB of disk{}",
                spec.cpu.vcpus(),
                spec.memory_mib,
                if spec.pci.is_empty() {
                    ""
                } else {
                    " with the requested PCI devices"
                }
            ),
        });
    }
    offers.sort_by(|a, b| {
        let (a, b) = (&a.placement, &b.placement);
        a.price_hourly
            .total_cmp(&b.price_hourly)
            .then_with(|| a.host.cmp(&b.host))
    });
    Ok(Survey { offers, unanswered })
}

/// The target a standalone volume of `size_gb` goes to: among the
/// candidates meeting `constraints` ([provider, continent, region]) that
/// have room for it (storage `cancreate`, asked in parallel), the first by
/// name, so a tenant's volumes (and the VMs they pin) gather predictably.
pub async fn place_volume(
    candidates: Vec<(Target, AtomosClient)>,
    constraints: [&Option<String>; 3],
    size_gb: u32,
) -> Result<Target, NoPlacement> {
    let mut candidates: Vec<_> = candidates
        .into_iter()
        .filter(|(t, _)| t.meets(constraints))
        .collect();
    if candidates.is_empty() {
        return Err(NoPlacement::NoCandidates {
            constraints: describe_constraints(constraints),
        });
    }
    candidates.sort_by(|a, b| a.0.name.cmp(&b.0.name));
    let asks = candidates
        .iter()
        .map(|(t, c)| async move { (t, c.volume_can_create(size_gb).await) });
    let mut unanswered = 0;
    for (t, answer) in futures::future::join_all(asks).await {
        match answer {
            Ok(()) => return Ok(t.clone()),
            Err(e) if e.is_transient() => unanswered += 1,
            Err(e) => tracing::debug!(host = %t.name, error = %e, "target cannot hold the volume"),
        }
    }
    if unanswered > 0 {
        return Err(NoPlacement::Unanswered);
    }
    Err(NoPlacement::NoFit {
        reason: format!(
            "no hypervisor has room for a {size_gb} GB volume{}",
            describe_constraints(constraints)
        ),
    })
}

/// The hosts a group's VMs go to, one by one: each to the host holding the
/// fewest of the group so far (`used`: one entry per VM of the group
/// already placed; then those planned here), the first of them in `hosts`'
/// order (best first), never beyond a host's cap. Returns, per VM planned,
/// its host's index in `hosts`; shorter than `count` when the caps leave
/// VMs without a host.
pub fn spread(
    count: usize,
    hosts: &[TargetId],
    used: &[TargetId],
    caps: &HashMap<TargetId, u32>,
) -> Vec<usize> {
    let mut holds: Vec<usize> = hosts
        .iter()
        .map(|h| used.iter().filter(|u| *u == h).count())
        .collect();
    let mut planned = vec![0u32; hosts.len()];
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        let open =
            (0..hosts.len()).filter(|&i| caps.get(&hosts[i]).is_none_or(|cap| planned[i] < *cap));
        // `min_by_key` keeps the first of equals: the best host.
        let Some(i) = open.min_by_key(|&i| holds[i]) else {
            break;
        };
        holds[i] += 1;
        planned[i] += 1;
        out.push(i);
    }
    out
}

/// The most VMs of `spec` the host fits on top of `reserved`, knowing that
/// `lo` fit and asking up to `hi`: `hi` asked first (the common answer),
/// then a bisection. `true` with it when the host did not answer (then
/// only what was known to fit counts).
pub async fn most_that_fit(
    c: &AtomosClient,
    spec: &VmSpec,
    reserved: Reserved,
    lo: u32,
    hi: u32,
) -> (u32, bool) {
    let (mut lo, mut hi) = (lo, hi);
    match fits_many(c, spec, reserved, hi).await {
        Ok(_) => return (hi, false),
        Err(e) if e.is_transient() => return (lo, true),
        Err(_) => {}
    }
    // `lo` fits, `hi` does not.
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        match fits_many(c, spec, reserved, mid).await {
            Ok(_) => lo = mid,
            Err(e) if e.is_transient() => return (lo, true),
            Err(_) => hi = mid,
        }
    }
    (lo, false)
}

/// The failure of a placement whose every offered host was taken by
/// placements in flight: final only when every candidate answered the
/// survey (one that did not may have room: worth retrying).
pub fn all_taken(spec: &VmSpec, survey: &Survey) -> NoPlacement {
    if survey.unanswered > 0 {
        return NoPlacement::Unanswered;
    }
    let Reserved { vcpus, ram_mib } = demand(spec);
    NoPlacement::NoFit {
        reason: format!(
            "no hypervisor has room left for {vcpus} vCPUs and {ram_mib} MiB RAM: the hosts that fit are taken by VMs being placed"
        ),
    }
}

/// The driver's view of a target.
pub fn driver_target(t: &Target) -> atomos_driver::Target {
    atomos_driver::Target {
        name: t.name.clone(),
        host: t.host.clone(),
        ports: Ports {
            compute: t.compute_port,
            storage: t.storage_port,
            network: t.network_port,
            auth: t.auth_port,
        },
        provider: t.provider.clone(),
        region: t.region.clone(),
        continent: t.continent.clone(),
    }
}

/// Driver settings for a survey made while an API request waits: short
/// enough that every candidate answers or gives up well within the API's
/// request timeout.
fn interactive_options() -> ClientOptions {
    ClientOptions {
        timeout: Duration::from_secs(5),
        retries: 1,
        ..ClientOptions::default()
    }
}

/// A survey of the enabled `targets`, for callers outside a workflow (the
/// quotes endpoint): driver failures become domain errors.
pub async fn survey_targets(targets: Vec<Target>, spec: &VmSpec) -> meson_core::Result<Survey> {
    Ok(survey(interactive_clients(targets)?, spec).await?)
}

/// Clients for the enabled `targets` with [`interactive_options`]; clones
/// share their connections, so one set serves several surveys.
pub fn interactive_clients(
    targets: Vec<Target>,
) -> meson_core::Result<Vec<(Target, AtomosClient)>> {
    let mut candidates = Vec::new();
    for t in targets.into_iter().filter(|t| t.enabled) {
        let client = AtomosClient::new(driver_target(&t), interactive_options()).map_err(|e| {
            meson_core::Error::internal_from(format!("building a client for target {}", t.name), e)
        })?;
        candidates.push((t, client));
    }
    Ok(candidates)
}

#[cfg(test)]
mod tests {
    use super::*;
    use meson_core::Code;

    #[test]
    fn a_group_spreads_evenly_best_host_first_within_caps() {
        let [a, b, c] = [TargetId::new(), TargetId::new(), TargetId::new()];
        let hosts = [a, b, c];
        let none = HashMap::new();
        // Even, the best host first at each turn.
        assert_eq!(spread(5, &hosts, &[], &none), [0, 1, 2, 0, 1]);
        // The group's nodes already placed count.
        assert_eq!(spread(3, &hosts, &[a, a, b], &none), [2, 1, 2]);
        // A host at its cap takes no more; the others share the rest.
        let caps = HashMap::from([(a, 1), (c, 0)]);
        assert_eq!(spread(4, &hosts, &[], &caps), [0, 1, 1, 1]);
        // Nowhere left: fewer planned than asked.
        let full = HashMap::from([(a, 1), (b, 0), (c, 1)]);
        assert_eq!(spread(4, &hosts, &[], &full), [0, 2]);
        assert!(spread(2, &[], &[], &none).is_empty());
    }

    #[test]
    fn hosts_taken_in_flight_are_final_only_when_every_candidate_answered() {
        let spec = VmSpec {
            name: "n".into(),
            cpu: meson_core::vm::CpuSpec {
                cores: 2,
                threads_per_core: 1,
                smt: false,
                min_frequency_ghz: None,
                archs: Vec::new(),
                flags: Vec::new(),
            },
            memory_mib: 2048,
            require_ecc: false,
            pci: Vec::new(),
            os: meson_core::os::OsImage {
                distribution: "debian".into(),
                family: "linux".into(),
                flavour: "debian".into(),
                version: "12".into(),
                image_url: String::new(),
            },
            boot_volume_gb: 10,
            volumes: Vec::new(),
            ssh_keys: Vec::new(),
            provider: None,
            continent: None,
            region: None,
            image: None,
            backup: None,
        };
        let answered = Survey {
            offers: Vec::new(),
            unanswered: 0,
        };
        assert_eq!(
            all_taken(&spec, &answered).message(),
            "no hypervisor has room left for 2 vCPUs and 2048 MiB RAM: the hosts that fit are taken by VMs being placed"
        );
        // A host that did not answer the survey may have room: retry.
        let partial = Survey {
            offers: Vec::new(),
            unanswered: 1,
        };
        assert_eq!(all_taken(&spec, &partial), NoPlacement::Unanswered);
    }

    #[test]
    fn no_placement_maps_to_api_errors() {
        let e: meson_core::Error = NoPlacement::NoFit {
            reason: "too big".into(),
        }
        .into();
        assert_eq!(e.code(), Code::ResourceUnavailable.as_str());
        assert!(e.public_message().contains("too big"));
        let e: meson_core::Error = NoPlacement::Unanswered.into();
        assert_eq!(e.code(), Code::ServiceError.as_str());
    }
}
