//! The catalogue: flavours, the providers, continents and regions of the
//! enabled AtomOS targets, and the supported Kubernetes versions.

use super::App;
use crate::auth::Principal;
use meson_core::Result;
use meson_core::flavor::{FLAVORS, Flavor};
use meson_core::kubernetes::{self, Release};
use meson_core::target::Target;

impl App {
    pub fn flavors(&self, _p: &Principal) -> Result<&'static [Flavor]> {
        Ok(FLAVORS)
    }

    /// The Kubernetes releases clusters can run, oldest first.
    pub fn kubernetes_versions(&self, _p: &Principal) -> Result<&'static [Release]> {
        Ok(kubernetes::releases())
    }

    /// Enabled targets, sorted by provider, region and name.
    pub async fn placement_targets(&self, _p: &Principal) -> Result<Vec<Target>> {
        let mut targets: Vec<Target> = meson_db::targets::list(&self.pool)
            .await?
            .into_iter()
            .filter(|t| t.enabled)
            .collect();
        targets.sort_by(|a, b| {
            (&a.provider, &a.region, &a.name).cmp(&(&b.provider, &b.region, &b.name))
        });
        Ok(targets)
    }
}
