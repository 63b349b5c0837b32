//! The managed resources and data sources, each a schema and its calls to
//! meson through the SDK. A resource's code sees plain JSON: the planned
//! values (unknowns read as null) in, meson's view of the resource out, in
//! the schema's attribute names; the generic half ([`crate::schema`])
//! does the rest.

pub mod cluster;
pub mod data;
pub mod image;
pub mod network;
pub mod pool;
pub mod port_forward;
pub mod ssh_key;
pub mod vm;
pub mod volume;

use crate::diag::{Failure, FieldMap, Res};
use crate::schema::Block;
use meson_client::Client;
use serde_json::{Map, Value as Json};
use std::collections::BTreeMap;
use std::time::Duration;
use uuid::Uuid;

/// What meson answered that the user should know although the change was
/// made (a Kubernetes version past its end of life, a minor resolved to a
/// patch): Terraform shows each as a warning.
pub type Notes = Vec<meson_client::types::Warning>;

/// The managed resource types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Network,
    Vm,
    Cluster,
    Pool,
    Image,
    Volume,
    VolumeAttachment,
    PortForward,
    SshKey,
}

impl Kind {
    pub const ALL: [Kind; 9] = [
        Kind::Network,
        Kind::Vm,
        Kind::Cluster,
        Kind::Pool,
        Kind::Image,
        Kind::Volume,
        Kind::VolumeAttachment,
        Kind::PortForward,
        Kind::SshKey,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Network => "meson_network",
            Kind::Vm => "meson_vm",
            Kind::Cluster => "meson_cluster",
            Kind::Pool => "meson_node_pool",
            Kind::Image => "meson_image",
            Kind::Volume => "meson_volume",
            Kind::VolumeAttachment => "meson_volume_attachment",
            Kind::PortForward => "meson_port_forward",
            Kind::SshKey => "meson_ssh_key",
        }
    }

    pub fn parse(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == name)
    }

    pub fn block(self) -> Block {
        match self {
            Kind::Network => network::block(),
            Kind::Vm => vm::block(),
            Kind::Cluster => cluster::block(),
            Kind::Pool => pool::block(),
            Kind::Image => image::block(),
            Kind::Volume => volume::block(),
            Kind::VolumeAttachment => volume::attachment::block(),
            Kind::PortForward => port_forward::block(),
            Kind::SshKey => ssh_key::block(),
        }
    }

    /// Creates the resource from its planned values; meson's view of it.
    /// What meson says the user should know goes to `notes`.
    pub async fn create(self, c: &Client, planned: &Json, notes: &mut Notes) -> Res<Json> {
        let t = timeout(planned, "create")?;
        match self {
            Kind::Network => network::create(c, planned).await,
            Kind::Vm => vm::create(c, planned, t, notes).await,
            Kind::Cluster => cluster::create(c, planned, t, notes).await,
            Kind::Pool => pool::create(c, planned, t, notes).await,
            Kind::Image => image::create(c, planned, t).await,
            Kind::Volume => volume::create(c, planned, t).await,
            Kind::VolumeAttachment => volume::attachment::create(c, planned, t).await,
            Kind::PortForward => port_forward::create(c, planned, t, notes).await,
            Kind::SshKey => ssh_key::create(c, planned).await,
        }
    }

    /// meson's view of the resource, `None` when it is gone.
    pub async fn read(self, c: &Client, state: &Json) -> Res<Option<Json>> {
        match self {
            Kind::Network => network::read(c, state).await,
            Kind::Vm => vm::read(c, state).await,
            Kind::Cluster => cluster::read(c, state).await,
            Kind::Pool => pool::read(c, state).await,
            Kind::Image => image::read(c, state).await,
            Kind::Volume => volume::read(c, state).await,
            Kind::VolumeAttachment => volume::attachment::read(c, state).await,
            Kind::PortForward => port_forward::read(c, state).await,
            Kind::SshKey => ssh_key::read(c, state).await,
        }
    }

    /// Changes in place what the plan changes; meson's view after.
    /// What meson says the user should know goes to `notes`.
    pub async fn update(
        self,
        c: &Client,
        prior: &Json,
        planned: &Json,
        notes: &mut Notes,
    ) -> Res<Json> {
        let t = timeout(planned, "update")?;
        match self {
            Kind::Network => network::update(c, prior, planned).await,
            Kind::Vm => vm::update(c, prior, planned, t).await,
            Kind::Cluster => cluster::update(c, prior, planned, t, notes).await,
            Kind::Pool => pool::update(c, prior, planned, t).await,
            Kind::Image => image::update(c, prior, planned).await,
            Kind::Volume => volume::update(c, prior, planned, t).await,
            // Every attribute replaces it: nothing changes in place.
            Kind::VolumeAttachment => Ok(planned.clone()),
            // Likewise; meson's view of it as it is.
            Kind::PortForward => port_forward::update(c, prior).await,
            Kind::SshKey => ssh_key::update(c, prior, planned).await,
        }
    }

    /// The attribute one of meson's field paths is, for this resource.
    pub fn field(self, f: &str) -> Option<Vec<crate::schema::Step>> {
        match self {
            Kind::Network => network::field(f),
            Kind::Vm => vm::field(f),
            Kind::Cluster => cluster::field(f),
            Kind::Pool => pool::field(f),
            Kind::Image => image::field(f),
            Kind::Volume => volume::field(f),
            Kind::VolumeAttachment => volume::attachment::field(f),
            Kind::PortForward => port_forward::field(f),
            Kind::SshKey => ssh_key::field(f),
        }
    }

    /// Deletes the resource and waits until it is gone.
    pub async fn delete(self, c: &Client, prior: &Json) -> Res<()> {
        let t = timeout(prior, "delete")?;
        let r = match self {
            Kind::Network => network::delete(c, prior, t).await,
            Kind::Vm => vm::delete(c, prior, t).await,
            Kind::Cluster => cluster::delete(c, prior, t).await,
            Kind::Pool => pool::delete(c, prior, t).await,
            Kind::Image => image::delete(c, prior, t).await,
            Kind::Volume => volume::delete(c, prior, t).await,
            Kind::VolumeAttachment => volume::attachment::delete(c, prior, t).await,
            Kind::PortForward => port_forward::delete(c, prior, t).await,
            Kind::SshKey => ssh_key::delete(c, prior).await,
        };
        match r {
            // Already gone: what a delete wants.
            Err(f) if f.code.as_deref() == Some("not_found") => Ok(()),
            other => other,
        }
    }

    /// The state an import starts from: the id as `terraform import` gives it.
    pub fn import_state(self, id: &str) -> Res<Json> {
        match self {
            Kind::Pool => {
                let (cluster, pool) = id.split_once('/').ok_or_else(|| {
                    Failure::msg(
                        "import a node pool as CLUSTER_ID/POOL_ID",
                        format!("got {id:?}"),
                    )
                })?;
                parse_id(cluster)?;
                parse_id(pool)?;
                Ok(serde_json::json!({"id": pool, "cluster_id": cluster}))
            }
            Kind::VolumeAttachment => {
                let (volume, vm) = id.split_once('/').ok_or_else(|| {
                    Failure::msg(
                        "import a volume attachment as VOLUME_ID/VM_ID",
                        format!("got {id:?}"),
                    )
                })?;
                parse_id(volume)?;
                parse_id(vm)?;
                Ok(serde_json::json!({"id": volume, "volume_id": volume, "vm_id": vm}))
            }
            Kind::PortForward => port_forward::import_state(id),
            _ => {
                parse_id(id)?;
                Ok(serde_json::json!({"id": id}))
            }
        }
    }
}

/// How long to wait on an action: the resource's `timeouts.<op>`, else 30
/// minutes.
pub fn timeout(state: &Json, op: &str) -> Res<Duration> {
    match state
        .get("timeouts")
        .and_then(|t| t.get(op))
        .and_then(Json::as_str)
    {
        None => Ok(Duration::from_secs(30 * 60)),
        Some(s) => parse_duration(s).ok_or_else(|| {
            Failure::msg(
                format!("bad timeouts.{op}: {s:?}"),
                "give a number with a unit: 90s, 20m, 1h, 1h30m",
            )
            .at(vec![
                crate::schema::Step::Attr("timeouts".into()),
                crate::schema::Step::Attr(op.into()),
            ])
        }),
    }
}

/// `90s`, `20m`, `1h30m`, `2h`.
pub fn parse_duration(s: &str) -> Option<Duration> {
    let mut total = 0u64;
    let mut num = String::new();
    let mut any = false;
    for ch in s.trim().chars() {
        if ch.is_ascii_digit() {
            num.push(ch);
            continue;
        }
        let n: u64 = num.parse().ok()?;
        num.clear();
        total += n * match ch {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            _ => return None,
        };
        any = true;
    }
    (num.is_empty() && any).then(|| Duration::from_secs(total))
}

pub fn parse_id(s: &str) -> Res<Uuid> {
    Uuid::parse_str(s).map_err(|_| Failure::msg(format!("not a meson id: {s:?}"), "ids are UUIDs"))
}

/// The state's `id`.
pub fn id(state: &Json) -> Res<Uuid> {
    parse_id(state.get("id").and_then(Json::as_str).unwrap_or_default())
}

pub fn text(j: &Json, k: &str) -> Option<String> {
    j.get(k).and_then(Json::as_str).map(str::to_owned)
}

pub fn number(j: &Json, k: &str) -> Option<u64> {
    j.get(k).and_then(Json::as_f64).map(|f| f as u64)
}

pub fn number_u32(j: &Json, k: &str) -> Option<u32> {
    number(j, k).map(|v| v as u32)
}

pub fn flag(j: &Json, k: &str) -> Option<bool> {
    j.get(k).and_then(Json::as_bool)
}

pub fn texts(j: &Json, k: &str) -> Option<Vec<String>> {
    j.get(k).and_then(Json::as_array).map(|a| {
        a.iter()
            .filter_map(Json::as_str)
            .map(str::to_owned)
            .collect()
    })
}

pub fn labels(j: &Json) -> Option<BTreeMap<String, String>> {
    j.get("labels").and_then(Json::as_object).map(|m| {
        m.iter()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
            .collect()
    })
}

/// Labels as the state holds them: none is null (as a configuration
/// without `labels` says).
pub fn labels_json(l: &BTreeMap<String, String>) -> Json {
    if l.is_empty() {
        Json::Null
    } else {
        serde_json::to_value(l).unwrap_or_default()
    }
}

/// Whether attribute `k` differs between two states.
pub fn changed(prior: &Json, planned: &Json, k: &str) -> bool {
    prior.get(k) != planned.get(k)
}

/// The rename and/or relabel a plan makes (VMs and networks share the
/// request), if any.
pub fn rename_relabel(
    prior: &Json,
    planned: &Json,
) -> Option<meson_client::types::requests::NameLabelsUpdate> {
    let (name, labels_changed) = (
        changed(prior, planned, "name"),
        changed(prior, planned, "labels"),
    );
    (name || labels_changed).then(|| meson_client::types::requests::NameLabelsUpdate {
        name: if name { text(planned, "name") } else { None },
        labels: labels_changed.then(|| labels(planned).unwrap_or_default()),
    })
}

/// Waits on `ids` for at most `limit`.
pub async fn wait(c: &Client, ids: &[Uuid], limit: Duration, fields: FieldMap) -> Res<()> {
    c.wait_for_with(
        ids,
        meson_client::WaitOpts::default(),
        tokio::time::sleep(limit),
    )
    .await
    .map(|_| ())
    .map_err(|e| Failure::from_client(e, fields))
}

/// An object of `(name, value)` pairs.
pub fn obj<const N: usize>(pairs: [(&str, Json); N]) -> Json {
    Json::Object(
        pairs
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect::<Map<_, _>>(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_ids() {
        assert_eq!(parse_duration("90s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_duration("1h30m"), Some(Duration::from_secs(5400)));
        assert_eq!(parse_duration("20"), None);
        assert_eq!(parse_duration("5x"), None);
        assert!(Kind::Pool.import_state("nope").is_err());
        let a = Uuid::new_v4();
        let b = Uuid::new_v4();
        assert_eq!(
            Kind::Pool.import_state(&format!("{a}/{b}")).unwrap()["cluster_id"],
            a.to_string()
        );
        assert!(Kind::Vm.import_state("x").is_err());
    }

    /// Terraform's meta-arguments cannot be attribute names: a resource
    /// with `provider` fails every configuration that sets it.
    #[test]
    fn no_attribute_is_a_meta_argument() {
        const META: [&str; 7] = [
            "provider",
            "count",
            "for_each",
            "depends_on",
            "lifecycle",
            "provisioner",
            "connection",
        ];
        for k in Kind::ALL {
            for a in k.block().attrs {
                assert!(!META.contains(&a.name), "{}.{}", k.name(), a.name);
            }
        }
        for d in data::Data::ALL {
            for a in d.block().attrs {
                assert!(!META.contains(&a.name), "{}.{}", d.name(), a.name);
            }
        }
    }
}
