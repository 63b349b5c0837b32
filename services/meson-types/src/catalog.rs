//! The catalogue: flavours and where meson can place things.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A named VM size.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Flavor {
    pub name: String,
    pub description: String,
    pub vcpus: u32,
    pub memory_mib: u64,
    pub gpus: u32,
    /// PCI id `vendor:model` of the GPU, if any.
    #[schema(required = true, example = "10de:1bb1")]
    pub gpu_model: Option<String>,
    pub cpu_flags: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct FlavorList {
    pub flavors: Vec<Flavor>,
}

/// A provider meson can place resources with, and where.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Provider {
    pub name: String,
    pub continents: Vec<String>,
    pub regions: Vec<Region>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Region {
    pub name: String,
    pub continent: String,
    /// AtomOS hosts (targets) in the region.
    pub hosts: u32,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ProviderList {
    pub providers: Vec<Provider>,
}

/// A Kubernetes release clusters can run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct KubernetesVersion {
    #[schema(example = "1.36.4")]
    pub version: String,
    /// The minor line, `major.minor`.
    #[schema(example = "1.36")]
    pub minor: String,
    /// What a cluster gets today when its request names no version: the
    /// latest patch of the second-newest minor not past end of life.
    pub default: bool,
    /// Past upstream end of life: still accepted, with a warning.
    pub deprecated: bool,
    /// Upstream release date of the minor line, `YYYY-MM-DD`.
    #[schema(example = "2026-04-22")]
    pub released: String,
    /// Upstream end of life of the minor line, `YYYY-MM-DD` (deprecated
    /// from that day on).
    #[schema(example = "2027-06-28")]
    pub end_of_life: String,
    /// Versions a cluster on this one may upgrade to (a later patch of the
    /// same minor, or any patch of the next minor), oldest first.
    pub upgradable_to: Vec<String>,
}

/// `GET /v1/kubernetes-versions`: every supported release, oldest first.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct KubernetesVersionList {
    pub kubernetes_versions: Vec<KubernetesVersion>,
}
