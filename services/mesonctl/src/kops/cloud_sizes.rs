//! Common cloud instance sizes (AWS, GCE, Hetzner, DigitalOcean) as
//! `(vCPUs, MiB)`; meson's own flavours come from its catalogue.

use meson_core::flavor;

/// `(vCPUs, MiB)` of a common cloud instance size, or of a meson flavour.
pub fn instance_size(name: &str) -> Option<(u32, u64)> {
    let n = name.trim().to_ascii_lowercase();
    if let Some(f) = flavor::lookup(&n) {
        return Some((f.vcpus, f.memory_mib));
    }
    aws(&n)
        .or_else(|| gce(&n))
        .or_else(|| hetzner(&n))
        .or_else(|| digitalocean(&n))
}

const GIB: u64 = 1024;

fn gib(g: f64) -> u64 {
    (g * GIB as f64).round() as u64
}

/// AWS: the burstable `t2`/`t3`/`t3a`/`t4g` table, and the `m`/`c`/`r`
/// families by their size suffix (`large` 2 vCPUs, `xlarge` 4, `Nxlarge` 4N;
/// 4, 2 and 8 GiB per vCPU).
fn aws(n: &str) -> Option<(u32, u64)> {
    let (family, size) = n.split_once('.')?;
    match family {
        "t2" => {
            return match size {
                "nano" => Some((1, 512)),
                "micro" => Some((1, GIB)),
                "small" => Some((1, 2 * GIB)),
                "medium" => Some((2, 4 * GIB)),
                "large" => Some((2, 8 * GIB)),
                "xlarge" => Some((4, 16 * GIB)),
                "2xlarge" => Some((8, 32 * GIB)),
                _ => None,
            };
        }
        "t3" | "t3a" | "t4g" => {
            return match size {
                "nano" => Some((2, 512)),
                "micro" => Some((2, GIB)),
                "small" => Some((2, 2 * GIB)),
                "medium" => Some((2, 4 * GIB)),
                "large" => Some((2, 8 * GIB)),
                "xlarge" => Some((4, 16 * GIB)),
                "2xlarge" => Some((8, 32 * GIB)),
                _ => None,
            };
        }
        _ => {}
    }
    let per_vcpu = match family {
        "m4" | "m5" | "m5a" | "m5n" | "m6i" | "m6a" | "m6g" | "m7i" | "m7a" | "m7g" => 4,
        "c4" | "c5" | "c5a" | "c5n" | "c6i" | "c6a" | "c6g" | "c7i" | "c7a" | "c7g" => 2,
        "r4" | "r5" | "r5a" | "r5n" | "r6i" | "r6a" | "r6g" | "r7i" | "r7a" | "r7g" => 8,
        _ => return None,
    };
    let vcpus: u32 = match size {
        "large" => 2,
        "xlarge" => 4,
        s => 4 * s.strip_suffix("xlarge")?.parse::<u32>().ok()?,
    };
    if vcpus == 0 || vcpus > 192 {
        return None;
    }
    Some((vcpus, u64::from(vcpus) * per_vcpu * GIB))
}

/// GCE: `e2-micro|small|medium`, `f1-micro`, `g1-small`, and
/// `<family>-standard|highmem|highcpu-N`.
fn gce(n: &str) -> Option<(u32, u64)> {
    match n {
        "e2-micro" => return Some((2, GIB)),
        "e2-small" => return Some((2, 2 * GIB)),
        "e2-medium" => return Some((2, 4 * GIB)),
        "f1-micro" => return Some((1, gib(0.6))),
        "g1-small" => return Some((1, gib(1.7))),
        _ => {}
    }
    let mut parts = n.splitn(3, '-');
    let family = parts.next()?;
    let class = parts.next()?;
    let vcpus: u32 = parts.next()?.parse().ok()?;
    if vcpus == 0 || vcpus > 224 {
        return None;
    }
    let per_vcpu = match (family, class) {
        ("n1", "standard") => 3.75,
        ("n1", "highmem") => 6.5,
        ("n1", "highcpu") => 0.9,
        ("e2" | "n2" | "n2d" | "n4" | "t2d" | "c3" | "c3d", "standard") => 4.0,
        ("e2" | "n2" | "n2d" | "n4" | "c3" | "c3d", "highmem") => 8.0,
        ("e2" | "n2" | "n2d" | "n4" | "c3" | "c3d", "highcpu") => 1.0,
        _ => return None,
    };
    Some((vcpus, gib(per_vcpu * f64::from(vcpus))))
}

/// Hetzner Cloud's `cx`, `cpx`, `cax` and `ccx` types.
fn hetzner(n: &str) -> Option<(u32, u64)> {
    let g = |c: u32, m: u64| Some((c, m * GIB));
    match n {
        "cx11" => g(1, 2),
        "cx21" | "cx22" => g(2, 4),
        "cx31" => g(2, 8),
        "cx32" => g(4, 8),
        "cx41" => g(4, 16),
        "cx42" => g(8, 16),
        "cx51" => g(8, 32),
        "cx52" => g(16, 32),
        "cpx11" => g(2, 2),
        "cpx21" => g(3, 4),
        "cpx31" => g(4, 8),
        "cpx41" => g(8, 16),
        "cpx51" => g(16, 32),
        "cax11" => g(2, 4),
        "cax21" => g(4, 8),
        "cax31" => g(8, 16),
        "cax41" => g(16, 32),
        "ccx13" => g(2, 8),
        "ccx23" => g(4, 16),
        "ccx33" => g(8, 32),
        "ccx43" => g(16, 64),
        "ccx53" => g(32, 128),
        "ccx63" => g(48, 192),
        _ => None,
    }
}

/// DigitalOcean slugs: `s-2vcpu-4gb` (and `-amd`/`-intel`), `g-`, `gd-`,
/// `m-`, `c-2` (2 GiB per vCPU), `s-1vcpu-512mb-10gb`.
fn digitalocean(n: &str) -> Option<(u32, u64)> {
    let parts: Vec<&str> = n.split('-').collect();
    if parts.len() == 2 && parts[0] == "c" {
        let vcpus: u32 = parts[1].parse().ok()?;
        return (1..=48)
            .contains(&vcpus)
            .then(|| (vcpus, u64::from(vcpus) * 2 * GIB));
    }
    if parts.len() < 3 || !matches!(parts[0], "s" | "g" | "gd" | "m" | "m3" | "so" | "c") {
        return None;
    }
    let vcpus: u32 = parts[1].strip_suffix("vcpu")?.parse().ok()?;
    let mem = parts[2];
    let mib = if let Some(gb) = mem.strip_suffix("gb") {
        gb.parse::<u64>().ok()? * GIB
    } else {
        mem.strip_suffix("mb")?.parse::<u64>().ok()?
    };
    (vcpus > 0 && mib > 0).then_some((vcpus, mib))
}
