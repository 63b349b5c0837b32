//! What the simulator simulates: hosts with capacity, prices and faults, and a ready-made dev fleet.

use crate::faults::FaultSpec;
use atomos_driver::PciDevice;
use serde::{Deserialize, Serialize};
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::time::Duration;

/// One simulated AtomOS host (one set of four daemons).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct HostConfig {
    pub name: String,
    pub provider: String,
    pub region: String,
    pub continent: String,
    /// Physical cores; a VM uses `slots / overprovision` of them.
    pub cores: u32,
    pub ram_mib: u64,
    pub disk_gb: u64,
    #[serde(default)]
    pub gpus: Vec<PciDevice>,
    #[serde(default = "default_archs")]
    pub archs: Vec<String>,
    #[serde(default)]
    pub ecc: bool,
    #[serde(default)]
    pub flags: Vec<String>,
    /// Highest CPU clock, in GHz; a spec's `min_frequency` above it does not fit.
    #[serde(default = "default_max_frequency_ghz")]
    pub max_frequency_ghz: f64,
    #[serde(default)]
    pub price_core_hour: f64,
    #[serde(default)]
    pub price_gib_ram_hour: f64,
    #[serde(default)]
    pub price_gpu_hour: f64,
    /// Faults in force from the start (the control endpoint's body, without
    /// the VM-specific `crash_vm` and `lose_vm`).
    #[serde(default, skip_serializing_if = "FaultSpec::is_empty")]
    pub faults: FaultSpec,
}

fn default_archs() -> Vec<String> {
    vec!["X86_64".to_owned()]
}

/// A common server clock when a hosts file does not say.
fn default_max_frequency_ghz() -> f64 {
    3.0
}

#[derive(Clone, Debug)]
pub struct SimConfig {
    pub hosts: Vec<HostConfig>,
    /// From register until the VM reports `running` with an IPv4.
    pub boot_time: Duration,
    /// Address every listener binds (each on an ephemeral port).
    pub bind: IpAddr,
    /// A directory keeping every host's VMs, volumes and networks (one JSON
    /// file per host), written through before each change is acknowledged:
    /// a simulator started again on it, even after `kill -9`, carries on
    /// where the last one stopped. Created when missing. `None`: in memory only.
    pub state: Option<PathBuf>,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            hosts: dev_hosts(),
            boot_time: Duration::from_millis(1500),
            bind: IpAddr::V4(Ipv4Addr::LOCALHOST),
            state: None,
        }
    }
}

/// NVIDIA Quadro P4000, the GPU of Elemento's Argon templates.
fn p4000(quantity: u32) -> PciDevice {
    PciDevice {
        vendor: "10de".to_owned(),
        model: "1bb1".to_owned(),
        quantity,
    }
}

struct Prices {
    core: f64,
    gib: f64,
    gpu: f64,
    /// The provider's CPUs' highest clock, GHz.
    ghz: f64,
}

fn host(
    name: &str,
    provider: &str,
    region: &str,
    continent: &str,
    gpus: Vec<PciDevice>,
    ecc: bool,
    p: &Prices,
) -> HostConfig {
    HostConfig {
        name: name.to_owned(),
        provider: provider.to_owned(),
        region: region.to_owned(),
        continent: continent.to_owned(),
        cores: 64,
        ram_mib: 256 * 1024,
        disk_gb: 4000,
        gpus,
        archs: default_archs(),
        ecc,
        flags: ["sse2", "sse4_2", "avx", "avx2", "aes"]
            .map(str::to_owned)
            .to_vec(),
        max_frequency_ghz: p.ghz,
        price_core_hour: p.core,
        price_gib_ram_hour: p.gib,
        price_gpu_hour: p.gpu,
        faults: FaultSpec::default(),
    }
}

/// Eleven generous hosts: ovh, ionos, gigas, arubacloud and on-prem
/// `atomos`, in `europe` and `north-america`, with per-provider prices
/// (on-prem is free). Two regions have three hosts each (ovh's Gravelines
/// and Aruba's Arezzo), so a cluster placed there spreads its nodes over
/// several hosts and a 50-node cluster fits; their first host has the GPUs,
/// the two added after it are plain. The added hosts come last, so the
/// first seven keep their positions.
pub fn dev_hosts() -> Vec<HostConfig> {
    let ovh = Prices {
        core: 0.011,
        gib: 0.0042,
        gpu: 0.55,
        ghz: 3.7,
    };
    let ionos = Prices {
        core: 0.013,
        gib: 0.0039,
        gpu: 0.60,
        ghz: 3.4,
    };
    let gigas = Prices {
        core: 0.012,
        gib: 0.0045,
        gpu: 0.0,
        ghz: 3.0,
    };
    let aruba = Prices {
        core: 0.010,
        gib: 0.0050,
        gpu: 0.65,
        ghz: 3.3,
    };
    let onprem = Prices {
        core: 0.0,
        gib: 0.0,
        gpu: 0.0,
        ghz: 4.2,
    };
    vec![
        host(
            "ovh-gra-1",
            "ovh",
            "eu-west-gra",
            "europe",
            vec![p4000(4)],
            true,
            &ovh,
        ),
        host(
            "ovh-bhs-1",
            "ovh",
            "ca-east-bhs",
            "north-america",
            vec![],
            true,
            &ovh,
        ),
        host(
            "ionos-fra-1",
            "ionos",
            "de-fra",
            "europe",
            vec![],
            true,
            &ionos,
        ),
        host(
            "ionos-las-1",
            "ionos",
            "us-las",
            "north-america",
            vec![],
            false,
            &ionos,
        ),
        host(
            "gigas-mad-1",
            "gigas",
            "es-mad",
            "europe",
            vec![],
            false,
            &gigas,
        ),
        host(
            "arubacloud-ar-1",
            "arubacloud",
            "it-ar1",
            "europe",
            vec![p4000(2)],
            true,
            &aruba,
        ),
        host(
            "atomos-onprem-1",
            "atomos",
            "on-prem",
            "europe",
            vec![p4000(2)],
            false,
            &onprem,
        ),
        host(
            "ovh-gra-2",
            "ovh",
            "eu-west-gra",
            "europe",
            vec![],
            true,
            &ovh,
        ),
        host(
            "ovh-gra-3",
            "ovh",
            "eu-west-gra",
            "europe",
            vec![],
            true,
            &ovh,
        ),
        host(
            "arubacloud-ar-2",
            "arubacloud",
            "it-ar1",
            "europe",
            vec![],
            true,
            &aruba,
        ),
        host(
            "arubacloud-ar-3",
            "arubacloud",
            "it-ar1",
            "europe",
            vec![],
            true,
            &aruba,
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn dev_fleet_covers_providers_and_continents() {
        let hosts = dev_hosts();
        let providers: HashSet<_> = hosts.iter().map(|h| h.provider.as_str()).collect();
        for p in ["ovh", "ionos", "gigas", "arubacloud", "atomos"] {
            assert!(providers.contains(p), "{p}");
        }
        let continents: HashSet<_> = hosts.iter().map(|h| h.continent.as_str()).collect();
        assert_eq!(continents, HashSet::from(["europe", "north-america"]));
        let names: HashSet<_> = hosts.iter().map(|h| h.name.as_str()).collect();
        assert_eq!(names.len(), hosts.len());
        let onprem = hosts.iter().find(|h| h.provider == "atomos").unwrap();
        assert_eq!(
            onprem.price_core_hour + onprem.price_gib_ram_hour + onprem.price_gpu_hour,
            0.0
        );
        assert!(hosts.iter().filter(|h| !h.gpus.is_empty()).count() >= 2);
    }

    /// The prices are what a tenant sees in quotes and on every VM: each
    /// hosting provider charges for cores and memory, and for GPUs where a
    /// host has them; the on-premises hosts (provider `atomos`, the
    /// tenant's own hardware) charge nothing at all, so placement, which
    /// picks the cheapest host that fits, sends unplaced work there.
    #[test]
    fn prices_agree_with_what_each_host_is() {
        for h in dev_hosts() {
            let all = [h.price_core_hour, h.price_gib_ram_hour, h.price_gpu_hour];
            assert!(all.iter().all(|p| p.is_finite() && *p >= 0.0), "{}", h.name);
            if h.provider == "atomos" {
                assert_eq!(all, [0.0; 3], "{} is on-premises: free", h.name);
                continue;
            }
            assert!(h.price_core_hour > 0.0, "{} charges for cores", h.name);
            assert!(h.price_gib_ram_hour > 0.0, "{} charges for memory", h.name);
            if !h.gpus.is_empty() {
                assert!(h.price_gpu_hour > 0.0, "{} charges for its GPUs", h.name);
            }
        }
        // Hosts of one provider price alike: a region is not cheaper by
        // accident of a typo.
        let hosts = dev_hosts();
        for a in &hosts {
            for b in hosts.iter().filter(|b| b.provider == a.provider) {
                assert_eq!(
                    (a.price_core_hour, a.price_gib_ram_hour, a.price_gpu_hour),
                    (b.price_core_hour, b.price_gib_ram_hour, b.price_gpu_hour),
                    "{} and {}",
                    a.name,
                    b.name
                );
            }
        }
    }

    #[test]
    fn two_regions_have_room_for_a_fifty_node_cluster_over_three_hosts() {
        let hosts = dev_hosts();
        for (provider, region) in [("ovh", "eu-west-gra"), ("arubacloud", "it-ar1")] {
            let here: Vec<_> = hosts
                .iter()
                .filter(|h| h.provider == provider && h.region == region)
                .collect();
            assert_eq!(here.len(), 3, "{provider}/{region}");
            // 3 control-plane nodes of 4 vCPU / 4 GiB / 40 GB and 47 workers
            // of 2 vCPU / 4 GiB / 40 GB (one dedicated core per vCPU).
            let cores: u32 = here.iter().map(|h| h.cores).sum();
            let ram: u64 = here.iter().map(|h| h.ram_mib).sum();
            let disk: u64 = here.iter().map(|h| h.disk_gb).sum();
            assert!(cores >= 3 * 4 + 47 * 2, "{cores}");
            assert!(ram >= 50 * 4096, "{ram}");
            assert!(disk >= 50 * 41, "{disk}");
        }
        // The first seven hosts keep their positions (tests index them).
        assert_eq!(hosts[0].name, "ovh-gra-1");
        assert_eq!(hosts[6].name, "atomos-onprem-1");
    }

    #[test]
    fn hosts_file_needs_only_the_essentials() {
        let h: HostConfig = serde_json::from_value(serde_json::json!({
            "name": "h", "provider": "ovh", "region": "r", "continent": "europe",
            "cores": 8, "ram_mib": 16384, "disk_gb": 500
        }))
        .unwrap();
        assert_eq!(h.archs, vec!["X86_64"]);
        assert!(h.gpus.is_empty());
        assert_eq!(h.max_frequency_ghz, 3.0);
        assert!(h.faults.is_empty());
    }

    #[test]
    fn hosts_file_can_carry_frequency_and_faults() {
        let h: HostConfig = serde_json::from_value(serde_json::json!({
            "name": "h", "provider": "ovh", "region": "r", "continent": "europe",
            "cores": 8, "ram_mib": 16384, "disk_gb": 500, "max_frequency_ghz": 2.2,
            "faults": {"error_rates": [{"route": "vm/status", "rate": 0.1}], "latency_ms": 5}
        }))
        .unwrap();
        assert_eq!(h.max_frequency_ghz, 2.2);
        assert_eq!(h.faults.error_rates[0].rate, 0.1);
        assert_eq!(h.faults.latency_ms, Some(5));
        let typo = serde_json::from_value::<HostConfig>(serde_json::json!({
            "name": "h", "provider": "ovh", "region": "r", "continent": "europe",
            "cores": 8, "ram_mib": 16384, "disk_gb": 500, "faults": {"latncy_ms": 5}
        }));
        assert!(typo.is_err(), "unknown fault fields are refused");
    }
}
