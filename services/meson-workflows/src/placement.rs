//! Placement: every candidate AtomOS target asked, in parallel, to fit a VM spec and price it.

use crate::atomos::driver_target;
use atomos_driver::{AtomosClient, ClientOptions};
use meson_core::target::Target;
use meson_core::vm::{Placement, VmSpec};
use meson_jobs::StepError;
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
    fn count(&self) {
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

    /// As the failure of a workflow step.
    pub fn step_error(&self) -> StepError {
        self.count();
        match self {
            NoPlacement::Unanswered => StepError::retryable("service_error", self.message()),
            _ => StepError::fatal("resource_unavailable", self.message()),
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

/// Asks every candidate allowed by the spec's constraints, in parallel, to
/// fit the VM (`canallocate`) and its disks (volume `cancreate`), and
/// returns their offers cheapest first, or why there are none.
pub async fn survey(
    candidates: Vec<(Target, AtomosClient)>,
    spec: &VmSpec,
) -> Result<Survey, NoPlacement> {
    let wire = driver_spec(spec);
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
    let asks = candidates.iter().map(|(t, c)| {
        let wire = wire.clone();
        async move {
            let answer = match c.can_allocate(&wire).await {
                Ok(quotes) => c.volume_can_create(disk).await.map(|()| quotes),
                Err(e) => Err(e),
            };
            (t, answer)
        }
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

    #[test]
    fn no_placement_maps_to_step_and_api_errors() {
        let none = NoPlacement::NoCandidates {
            constraints: " for provider 'ovh'".into(),
        };
        assert_eq!(
            none.step_error(),
            StepError::fatal(
                "resource_unavailable",
                "no hypervisor is available for provider 'ovh'"
            )
        );
        assert_eq!(
            NoPlacement::Unanswered.step_error(),
            StepError::retryable("service_error", "no hypervisor answered in time")
        );
        let e: meson_core::Error = NoPlacement::NoFit {
            reason: "too big".into(),
        }
        .into();
        assert_eq!(e.code(), "resource_unavailable");
        assert!(e.public_message().contains("too big"));
        let e: meson_core::Error = NoPlacement::Unanswered.into();
        assert_eq!(e.code(), "service_error");
    }
}
