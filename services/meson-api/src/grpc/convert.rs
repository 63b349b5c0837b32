//! Between the REST API's wire types and `meson.v1` messages, both ways.
//!
//! Answers are built from the REST wire types (`views` makes those from the
//! domain), so both transports show the same thing. Requests become the
//! REST request's JSON and go through the same parser, so both validate
//! alike and name a bad field by the same JSON path; a zero value stands
//! for an absent field (the REST default applies).

use meson_proto::meson::v1 as pb;
use meson_types as wire;
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, HashMap};

pub fn timestamp(t: chrono::DateTime<chrono::Utc>) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: t.timestamp(),
        nanos: i32::try_from(t.timestamp_subsec_nanos()).unwrap_or(0),
    }
}

pub fn map(m: &BTreeMap<String, String>) -> HashMap<String, String> {
    m.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

pub fn action(a: wire::Action) -> pb::Action {
    pb::Action {
        id: a.id.to_string(),
        command: a.command,
        status: a.status,
        progress: u32::from(a.progress),
        started: Some(timestamp(a.started)),
        finished: a.finished.map(timestamp),
        resources: a
            .resources
            .into_iter()
            .map(|r| pb::ActionResource {
                id: r.id.to_string(),
                r#type: r.kind,
            })
            .collect(),
        error: a.error.map(|e| pb::ActionError {
            code: e.code,
            message: e.message,
        }),
    }
}

pub fn warning(w: wire::Warning) -> pb::Warning {
    pb::Warning {
        field: w.field,
        message: w.message,
    }
}

pub fn warnings(w: &[meson_core::parse::Warning]) -> Vec<pb::Warning> {
    w.iter().map(crate::views::warning).map(warning).collect()
}

pub fn price(p: wire::Price) -> pb::Price {
    pb::Price {
        hourly: p.hourly,
        monthly: p.monthly,
        currency: p.currency,
    }
}

/// `meta.pagination` of `page` in a list of `total` entries.
pub fn pagination(page: crate::app::Page, total: u64) -> pb::Pagination {
    let p = crate::app::list::pagination(page, total);
    pb::Pagination {
        page: p.page,
        per_page: p.per_page,
        previous_page: p.previous_page,
        next_page: p.next_page,
        last_page: p.last_page.unwrap_or(1),
        total_entries: p.total_entries.unwrap_or(0),
    }
}

pub fn vm(v: wire::Vm) -> pb::Vm {
    let s = v.specs;
    pb::Vm {
        id: v.id.to_string(),
        name: v.name,
        status: v.status,
        error_message: v.error_message,
        labels: map(&v.labels),
        created: Some(timestamp(v.created)),
        provider: v.provider,
        region: v.region,
        host: v.host,
        ipv4: v.ipv4,
        specs: Some(pb::VmSpecs {
            vcpus: s.vcpus,
            cores: s.cores,
            threads_per_core: s.threads_per_core,
            smt: s.smt,
            min_frequency_ghz: s.min_frequency_ghz,
            arch: s.arch,
            flags: s.flags,
            memory_mib: s.memory_mib,
            require_ecc: s.require_ecc,
            pci_devices: s
                .pci_devices
                .into_iter()
                .map(|d| pb::PciDevice {
                    vendor: d.vendor,
                    model: d.model,
                    quantity: d.quantity,
                })
                .collect(),
            os_distribution: s.os_distribution,
            os_version: s.os_version,
            ssh_keys: s.ssh_keys,
            requested_provider: s.requested_provider,
            requested_continent: s.requested_continent,
            requested_region: s.requested_region,
        }),
        volumes: v
            .volumes
            .into_iter()
            .map(|x| pb::VmVolume {
                id: x.id.to_string(),
                name: x.name,
                size: x.size,
                kind: x.kind,
                standalone: x.standalone,
            })
            .collect(),
        private_net: v
            .private_net
            .into_iter()
            .map(|n| pb::PrivateNet {
                network: n.network.to_string(),
                ip: n.ip,
                mac_address: n.mac_address,
            })
            .collect(),
        price: v.price.map(price),
    }
}

/// A JSON object of the fields that are set (non-empty, non-zero).
pub struct Obj(Map<String, Value>);

impl Obj {
    pub fn new() -> Obj {
        Obj(Map::new())
    }

    pub fn str(mut self, key: &str, v: &str) -> Obj {
        if !v.is_empty() {
            self.0.insert(key.to_owned(), v.into());
        }
        self
    }

    pub fn num(mut self, key: &str, v: impl Into<f64> + Copy) -> Obj {
        let f: f64 = v.into();
        if f != 0.0 {
            // Integral numbers as integers: the parser wants those.
            let value = if f.fract() == 0.0 && f.abs() < 9e15 {
                json!(f as i64)
            } else {
                json!(f)
            };
            self.0.insert(key.to_owned(), value);
        }
        self
    }

    pub fn opt<T: Into<Value>>(mut self, key: &str, v: Option<T>) -> Obj {
        if let Some(v) = v {
            self.0.insert(key.to_owned(), v.into());
        }
        self
    }

    pub fn flag(mut self, key: &str, v: bool) -> Obj {
        if v {
            self.0.insert(key.to_owned(), true.into());
        }
        self
    }

    pub fn list(mut self, key: &str, v: &[String]) -> Obj {
        if !v.is_empty() {
            self.0.insert(key.to_owned(), v.into());
        }
        self
    }

    pub fn labels(mut self, key: &str, v: &HashMap<String, String>) -> Obj {
        if !v.is_empty() {
            self.0.insert(key.to_owned(), json!(v));
        }
        self
    }

    pub fn obj(mut self, key: &str, v: Option<Obj>) -> Obj {
        if let Some(o) = v.filter(|o| !o.0.is_empty()) {
            self.0.insert(key.to_owned(), Value::Object(o.0));
        }
        self
    }

    pub fn objs(mut self, key: &str, v: Vec<Obj>) -> Obj {
        if !v.is_empty() {
            let items = v.into_iter().map(|o| Value::Object(o.0)).collect();
            self.0.insert(key.to_owned(), Value::Array(items));
        }
        self
    }

    pub fn value(self) -> Value {
        Value::Object(self.0)
    }
}

/// `CreateVmRequest` as the REST VM request.
pub fn vm_create(r: &pb::CreateVmRequest) -> Value {
    let specs = r.specs.as_ref().map(|s| {
        let req = s.req.as_ref().map(|q| {
            let cpu = q.cpu.as_ref().map(|c| {
                Obj::new()
                    .flag("smtEnabled", c.smt_enabled)
                    .num("numberOfCores", c.number_of_cores)
                    .num("numberOfThreads", c.number_of_threads)
                    .num("min_frequency", c.min_frequency)
                    .list("arch", &c.arch)
                    .list("flags", &c.flags)
            });
            let mem = q.mem.as_ref().map(|m| {
                Obj::new()
                    .num("capacity", m.capacity as f64)
                    .flag("requireECC", m.require_ecc)
            });
            let pci = (!q.pci_devices.is_empty()).then(|| {
                let devices = q
                    .pci_devices
                    .iter()
                    .map(|d| {
                        Obj::new()
                            .str("vendor", &d.vendor)
                            .str("model", &d.model)
                            .num("quantity", d.quantity)
                    })
                    .collect();
                Obj::new().objs("devices", devices)
            });
            Obj::new()
                .obj("cpu", cpu)
                .obj("mem", mem)
                .obj("pci", pci)
                .obj(
                    "misc",
                    Some(Obj::new().str("osDistribution", &q.os_distribution)),
                )
        });
        let volumes = s
            .volumes
            .iter()
            .map(|v| {
                Obj::new()
                    .str("name", &v.name)
                    .num("size", v.size)
                    .opt("private", v.private)
                    .flag("shareable", v.shareable)
                    .flag("bootable", v.bootable)
                    .flag("readonly", v.readonly)
            })
            .collect();
        let auth = s
            .authentication
            .as_ref()
            .map(|a| Obj::new().list("ssh-keys", &a.ssh_keys));
        Obj::new()
            .obj("req", req)
            .objs("volumes", volumes)
            .obj("authentication", auth)
            .str("vm_name", &s.vm_name)
    });
    Obj::new()
        .obj("specs", specs)
        .str("provider", &r.provider)
        .str("continent", &r.continent)
        .str("region", &r.region)
        .labels("labels", &r.labels)
        .list("networks", &r.networks)
        .list("volumes", &r.volumes)
        .value()
}

/// A PATCH of a name and/or labels.
pub fn name_labels(name: &Option<String>, labels: &Option<pb::Labels>) -> Value {
    Obj::new()
        .opt("name", name.clone())
        .opt("labels", labels.as_ref().map(|l| json!(l.labels)))
        .value()
}

/// `ListOptions` as the REST list's query pairs.
pub fn list_query(o: Option<&pb::ListOptions>) -> Vec<(String, String)> {
    let mut q = Vec::new();
    let Some(o) = o else { return q };
    page_query(o.page.as_ref(), &mut q);
    if !o.name.is_empty() {
        q.push(("name".into(), o.name.clone()));
    }
    for s in &o.status {
        q.push(("status".into(), s.clone()));
    }
    if !o.label_selector.is_empty() {
        q.push(("label_selector".into(), o.label_selector.clone()));
    }
    for s in &o.sort {
        q.push(("sort".into(), s.clone()));
    }
    q
}

/// `ListVolumesRequest` as the REST list's query pairs: an empty field
/// filters nothing.
pub fn volume_list_query(r: &pb::ListVolumesRequest) -> Vec<(String, String)> {
    let mut q = Vec::new();
    page_query(r.page.as_ref(), &mut q);
    if !r.vm.is_empty() {
        q.push(("vm".into(), r.vm.clone()));
    }
    if !r.kind.is_empty() {
        q.push(("kind".into(), r.kind.clone()));
    }
    if let Some(standalone) = r.standalone {
        q.push(("standalone".into(), standalone.to_string()));
    }
    q
}

/// `PageRequest` as `page` and `per_page` query pairs.
pub fn page_query(p: Option<&pb::PageRequest>, q: &mut Vec<(String, String)>) {
    if let Some(p) = p {
        if p.page != 0 {
            q.push(("page".into(), p.page.to_string()));
        }
        if p.per_page != 0 {
            q.push(("per_page".into(), p.per_page.to_string()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_typed_vm_request_is_the_rest_one() {
        let r = pb::CreateVmRequest {
            specs: Some(pb::VmRequestSpecs {
                req: Some(pb::VmRequirements {
                    cpu: Some(pb::CpuRequest {
                        number_of_cores: 2,
                        arch: vec!["X86_64".into()],
                        ..Default::default()
                    }),
                    mem: Some(pb::MemRequest {
                        capacity: 4096,
                        require_ecc: false,
                    }),
                    pci_devices: vec![],
                    os_distribution: "Debian".into(),
                }),
                volumes: vec![pb::VolumeRequest {
                    name: "data".into(),
                    size: 30,
                    private: Some(false),
                    ..Default::default()
                }],
                authentication: Some(pb::VmAuthentication {
                    ssh_keys: vec!["ssh-ed25519 AAAA x".into()],
                }),
                vm_name: "web".into(),
            }),
            provider: "ionos".into(),
            ..Default::default()
        };
        assert_eq!(
            vm_create(&r),
            json!({"specs": {"req": {"cpu": {"numberOfCores": 2, "arch": ["X86_64"]},
                "mem": {"capacity": 4096}, "misc": {"osDistribution": "Debian"}},
                "volumes": [{"name": "data", "size": 30, "private": false}],
                "authentication": {"ssh-keys": ["ssh-ed25519 AAAA x"]},
                "vm_name": "web"}, "provider": "ionos"})
        );
        // Nothing set: the parser names what is missing.
        assert_eq!(vm_create(&pb::CreateVmRequest::default()), json!({}));
    }
}
