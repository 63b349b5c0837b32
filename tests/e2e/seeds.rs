//! The canonical request payloads, shared by the e2e tests and by the crates
//! that include them (without the rest of the harness).

use serde_json::Value;

pub const SSH_KEY: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMLavtiPfhiG3t6TAxHosXoVh7Pc/lSD8L9SNPyAzp1d user@host";

/// The canonical VM payload (docs/payloads.md), with a real public key in place of
/// the seed's `AAAA...` placeholder (meson rejects keys that cannot work).
pub fn seed_vm() -> Value {
    let raw = r#"{"specs":{"req":{"cpu":{"smtEnabled":false,"numberOfCores":2,"numberOfThreads":1,
      "min_frequency":1.0,"arch":["X86_64"],"flags":[]},
      "mem":{"capacity":4096,"requireECC":0},"pci":{"devices":{}},
      "misc":{"osDistribution":"Debian"}},
      "volumes":[{"name":"test","size":30,"private":"True","shareable":"False",
        "bootable":"False","readonly":"False"}],
      "authentication":{"ssh-key":"KEY"},
      "vm_name":"test"},
     "provider":"ionos"}"#;
    serde_json::from_str(&raw.replace("KEY", SSH_KEY)).expect("seed json")
}

/// The canonical KaaS payload (docs/payloads.md), exactly as clients send it.
pub fn seed_kaas() -> Value {
    let raw = r#"{"req":{"name":"test8","metadata":{},
      "nodepool":[{"autoscale":false,"desired_nodes":3,"max_nodes":3,"min_nodes":3,
        "specs":{"cpu":2,"ram":4096,"storage":40,"gpu":0},
        "billing":"HOURLY","pool_name":"1poolname"}],
      "nodes_subnet":{"dhcp":"True","subnet_netmask":"192.168.1.0/24",
        "start_address":"192.168.1.0","last_address":"192.168.1.24"},
      "update_policy":"NEVER_UPDATE","kubernetes_version":"1.29.2"},
     "provider":"arubacloud"}"#;
    serde_json::from_str(raw).expect("seed json")
}
