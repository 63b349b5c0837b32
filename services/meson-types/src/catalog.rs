//! The catalogue: flavours and where meson can place things.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Flavor {
    pub name: String,
    pub description: String,
    pub vcpus: u32,
    pub memory_mib: u64,
    pub gpus: u32,
    /// PCI id `vendor:model` of the GPU, if any.
    pub gpu_model: Option<String>,
    pub cpu_flags: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FlavorList {
    pub flavors: Vec<Flavor>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Provider {
    pub name: String,
    pub continents: Vec<String>,
    pub regions: Vec<Region>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Region {
    pub name: String,
    pub continent: String,
    /// AtomOS hosts (targets) in the region.
    pub hosts: u32,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProviderList {
    pub providers: Vec<Provider>,
}
