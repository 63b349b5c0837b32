//! Quotes: what a VM payload would cost on each host that can fit it, before creating it.

use super::App;
use crate::auth::{Principal, Role};
use meson_core::Result;
use meson_core::parse::Warning;
use meson_core::vm::VmCreate;
use meson_workflows::placement::{self, Offer};

/// The offers for a VM payload, cheapest first (never empty).
pub struct VmQuotes {
    pub offers: Vec<Offer>,
    pub warnings: Vec<Warning>,
}

impl App {
    /// Validates a VM payload exactly as `vm_create` does and asks every
    /// enabled target that meets its constraints for a price; writes nothing.
    /// `resource_unavailable` when no host can fit it.
    pub async fn vm_quote(&self, p: &Principal, body: &serde_json::Value) -> Result<VmQuotes> {
        p.require(Role::Viewer)?;
        let targets = meson_db::targets::list(&self.pool).await?;
        let req = VmCreate::parse_placed(body, &targets)?;
        let survey = placement::survey_targets(targets, &req.spec).await?;
        let mut warnings = req.warnings;
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
