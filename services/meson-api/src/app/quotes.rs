//! Quotes: what a VM payload would cost on each host that can fit it, or a
//! KaaS payload in each region that can host the whole cluster, before
//! creating it.

use super::App;
use crate::auth::Principal;
use meson_core::kaas::KaasCreate;
use meson_core::parse::Warning;
use meson_core::vm::VmCreate;
use meson_core::{Error, Result};
use meson_placement::cluster::{self as cluster_placement, ClusterOffer};
use meson_placement::{self as placement, Offer};

/// The offers for a VM payload, cheapest first (never empty).
pub struct VmQuotes {
    pub offers: Vec<Offer>,
    pub warnings: Vec<Warning>,
}

/// The regions that can host a KaaS payload's cluster, cheapest first (never empty).
pub struct KaasQuotes {
    pub offers: Vec<ClusterOffer>,
    pub warnings: Vec<Warning>,
}

/// A quote for whichever payload was sent.
pub enum Quotes {
    Vm(VmQuotes),
    Kaas(KaasQuotes),
}

/// Which payload a quote request carries: a top-level `req` object is a
/// KaaS payload, `specs` a VM payload.
fn is_kaas(body: &serde_json::Value) -> Result<bool> {
    let Some(o) = body.as_object() else {
        // The VM parser names the body and its type.
        return Ok(false);
    };
    let has = |k: &str| o.get(k).is_some_and(|v| !v.is_null());
    match (has("specs"), has("req")) {
        (true, false) => Ok(false),
        (false, true) => Ok(true),
        (true, true) => Err(Error::invalid(
            "(body)",
            "give either specs (a VM payload) or req (a KaaS payload), not both",
        )),
        (false, false) => Err(Error::invalid(
            "(body)",
            "must be a VM payload (with specs) or a KaaS payload (with req)",
        )),
    }
}

impl App {
    /// Quotes a VM or a KaaS payload (see [`App::vm_quote`], [`App::kaas_quote`]).
    pub async fn quote(&self, p: &Principal, body: &serde_json::Value) -> Result<Quotes> {
        if is_kaas(body)? {
            Ok(Quotes::Kaas(self.kaas_quote(p, body).await?))
        } else {
            Ok(Quotes::Vm(self.vm_quote(p, body).await?))
        }
    }

    /// Validates a KaaS payload and prices the cluster in every region where
    /// all its nodes fit (the control plane and each pool at its cheapest
    /// host there); writes nothing. `resource_unavailable` names the pool
    /// that fits nowhere, or says no single region fits them all.
    pub async fn kaas_quote(&self, _p: &Principal, body: &serde_json::Value) -> Result<KaasQuotes> {
        let targets = meson_db::targets::list(&self.pool).await?;
        let req = KaasCreate::parse_placed(body, &targets, meson_core::kubernetes::today())?;
        super::clusters::check_network(&req.spec)?;
        let survey = cluster_placement::survey_cluster(targets, &req.spec).await?;
        let mut warnings = req.warnings;
        if survey.unanswered > 0 {
            warnings.push(Warning {
                field: "placements".to_owned(),
                message: format!(
                    "{} hypervisor(s) did not answer in time; their quotes are missing",
                    survey.unanswered
                ),
            });
        }
        Ok(KaasQuotes {
            offers: survey.offers,
            warnings,
        })
    }

    /// Validates a VM payload exactly as `vm_create` does and asks every
    /// enabled target that meets its constraints for a price; writes nothing.
    /// `resource_unavailable` when no host can fit it.
    pub async fn vm_quote(&self, _p: &Principal, body: &serde_json::Value) -> Result<VmQuotes> {
        let targets = meson_db::targets::list(&self.pool).await?;
        let req = VmCreate::parse_placed(body, &targets)?;
        let survey = placement::survey_targets(targets, &req.spec).await?;
        let mut warnings = req.warnings;
        if !req.volumes.is_empty() {
            warnings.push(Warning {
                field: "volumes".to_owned(),
                message: "ignored by a quote: every host that fits is listed, though \
                          standalone volumes would pin the VM to theirs"
                    .to_owned(),
            });
        }
        if survey.unanswered > 0 {
            warnings.push(Warning {
                field: "quotes".to_owned(),
                message: format!(
                    "{} hypervisor(s) did not answer in time; their quotes are missing",
                    survey.unanswered
                ),
            });
        }
        Ok(VmQuotes {
            offers: survey.into_offers(),
            warnings,
        })
    }
}
