//! Elemento's VM flavours (from its official VM templates).

use serde::Serialize;

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Flavor {
    pub name: &'static str,
    pub description: &'static str,
    pub vcpus: u32,
    pub memory_mib: u64,
    pub gpus: u32,
    /// PCI id of the GPU model, `vendor:model`.
    pub gpu_model: Option<&'static str>,
    pub flags: &'static [&'static str],
}

pub const FLAVORS: &[Flavor] = &[
    Flavor {
        name: "helium",
        description: "Smallest virtual machine for light tasks",
        vcpus: 1,
        memory_mib: 512,
        gpus: 0,
        gpu_model: None,
        flags: &[],
    },
    Flavor {
        name: "neon",
        description: "Small office and web workloads",
        vcpus: 2,
        memory_mib: 2048,
        gpus: 0,
        gpu_model: None,
        flags: &["sse2"],
    },
    Flavor {
        name: "argon",
        description: "Decent CPU and one NVIDIA Quadro P4000",
        vcpus: 4,
        memory_mib: 4096,
        gpus: 1,
        gpu_model: Some("10de:1bb1"),
        flags: &["sse2", "avx2"],
    },
    Flavor {
        name: "argon2",
        description: "Decent CPU and two NVIDIA Quadro P4000",
        vcpus: 4,
        memory_mib: 4096,
        gpus: 2,
        gpu_model: Some("10de:1bb1"),
        flags: &["sse2", "avx2"],
    },
    Flavor {
        name: "kripton",
        description: "Eight cores and one NVIDIA Quadro P4000",
        vcpus: 8,
        memory_mib: 8192,
        gpus: 1,
        gpu_model: Some("10de:1bb1"),
        flags: &["sse2", "avx2"],
    },
];

pub fn lookup(name: &str) -> Option<&'static Flavor> {
    FLAVORS.iter().find(|f| f.name.eq_ignore_ascii_case(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptions_say_what_the_specs_hold() {
        for f in FLAVORS {
            let gpu_named = f.description.contains("NVIDIA");
            assert_eq!(gpu_named, f.gpus > 0, "{}: {}", f.name, f.description);
            assert_eq!(f.gpu_model.is_some(), f.gpus > 0, "{}", f.name);
            let count = match f.gpus {
                0 => "",
                1 => "one NVIDIA",
                2 => "two NVIDIA",
                n => panic!("{}: {n} GPUs, say how many", f.name),
            };
            assert!(
                f.description.contains(count),
                "{}: {}",
                f.name,
                f.description
            );
        }
    }
}
