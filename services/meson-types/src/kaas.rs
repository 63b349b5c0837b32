//! The KaaS request body (docs/payloads.md), typed.
//!
//! meson-core (`kaas/`) reads it leniently from `serde_json::Value`, like
//! the VM request (see `requests.rs`), and stays the authority on
//! validation; these types deserialize what that reader accepts, quirks
//! included, serialize the canonical form, and document the defaults.
//! Change them with `meson-core/src/kaas/`.

use crate::lenient;
use crate::requests::{Labels, LabelsRequest, LenientBool};
use serde::de::Deserializer;
use serde::{Deserialize, Serialize, Serializer};
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Schema, Type};
use utoipa::{PartialSchema, ToSchema};

/// The canonical KaaS payload (docs/payloads.md), exactly as clients send it.
pub fn kaas_create_example() -> serde_json::Value {
    serde_json::json!({
        "req": {
            "name": "test8",
            "metadata": {},
            "nodepool": [{
                "autoscale": false, "desired_nodes": 3, "max_nodes": 3, "min_nodes": 3,
                "specs": {"cpu": 2, "ram": 4096, "storage": 40, "gpu": 0},
                "billing": "HOURLY", "pool_name": "1poolname"
            }],
            "nodes_subnet": {"dhcp": "True", "subnet_netmask": "192.168.1.0/24",
                             "start_address": "192.168.1.0", "last_address": "192.168.1.24"},
            "update_policy": "NEVER_UPDATE",
            "kubernetes_version": "1.29.2"
        },
        "provider": "arubacloud"
    })
}

crate::common::placed! {
    /// A KaaS request: a Kubernetes cluster with one or more node pools.
    ///
    /// Fields not described here are ignored and reported in the response's
    /// `warnings`; a `null` value counts as absent. Every rejected field is named
    /// in the `invalid_input` error by its path (`req.nodepool[0].min_nodes`).
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
    pub struct KaasCreateRequest {
        pub req: KaasRequestSpec,
        /// The cluster's labels (or give them as `req.labels`, not both).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schema(value_type = Option<LabelsRequest>)]
        pub labels: Option<Labels>,
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct KaasRequestSpec {
    /// The cluster's name.
    #[schema(
        example = "test8",
        max_length = 32,
        pattern = "^[a-z0-9]([a-z0-9-]*[a-z0-9])?$"
    )]
    pub name: String,
    /// Free-form metadata, kept as sent (at most 16 KiB of JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<serde_json::Value>,
    /// The worker pools, 1 to 16, with unique names.
    #[schema(min_items = 1, max_items = 16)]
    pub nodepool: Vec<NodePoolRequest>,
    pub nodes_subnet: NodesSubnetRequest,
    /// `NEVER_UPDATE` (the default; `MANUAL` is an alias), `PATCH_UPDATE`
    /// or `ALWAYS_UPDATE`, any case.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(example = "NEVER_UPDATE")]
    pub update_policy: Option<String>,
    /// A supported version (`GET /v1/kubernetes-versions`): `1.29.2`,
    /// `v1.29.2`, or `1.29` for that minor's latest patch. Default: the
    /// catalogue's default of the day (the latest patch of the second-newest
    /// minor not past end of life). A version past end of life is accepted
    /// with a warning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(example = "1.29.2")]
    pub kubernetes_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane: Option<ControlPlaneRequest>,
    /// The pod network; a /24 per node. Default `10.244.0.0/16`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(example = "10.244.0.0/16")]
    pub pod_cidr: Option<String>,
    /// The service network, /12 to /28. Default `10.96.0.0/12`. Neither
    /// network may overlap the other or the nodes subnet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(example = "10.96.0.0/12")]
    pub service_cidr: Option<String>,
    /// `calico` (the default), `cilium` or `flannel`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cni: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<LabelsRequest>)]
    pub labels: Option<Labels>,
}

counted! {
    /// Identical worker nodes. `min_nodes` and `max_nodes` default to
    /// `desired_nodes`, `desired_nodes` to `min_nodes`; `min <= desired <= max`.
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
    pub struct NodePoolRequest {
        /// Unique in the cluster; a leading digit is fine.
        #[schema(
            example = "1poolname",
            max_length = 24,
            pattern = "^[a-z0-9]([a-z0-9-]*[a-z0-9])?$"
        )]
        pub pool_name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub specs: Option<NodeSpecsRequest>,
        /// `HOURLY` (the default) or `MONTHLY`, any case.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schema(example = "HOURLY")]
        pub billing: Option<String>,
        /// Kubernetes labels for the pool's nodes; the `kubernetes.io` and
        /// `k8s.io` prefixes are reserved.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schema(value_type = Option<LabelsRequest>)]
        pub labels: Option<Labels>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schema(max_items = 32)]
        pub taints: Option<Vec<TaintRequest>>,
    }
}

/// A node's size. Worker defaults: 2 vCPUs, 2048 MiB, 40 GB, no GPU;
/// control-plane defaults: 4 vCPUs, 4096 MiB, 40 GB.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct NodeSpecsRequest {
    /// vCPUs, 1 to 128 (at least 2 for the control plane).
    #[serde(
        default,
        deserialize_with = "lenient::opt_int",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(minimum = 1, maximum = 128, example = 2)]
    pub cpu: Option<u32>,
    /// MiB, 1024 to 1048576 (at least 2048 for the control plane).
    #[serde(
        default,
        deserialize_with = "lenient::opt_int",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(minimum = 1024, maximum = 1_048_576, example = 4096)]
    pub ram: Option<u64>,
    /// GB of disk.
    #[serde(
        default,
        deserialize_with = "lenient::opt_int",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(minimum = 20, maximum = 10_240, example = 40)]
    pub storage: Option<u32>,
    /// NVIDIA GPUs (10de:1bb1).
    #[serde(
        default,
        deserialize_with = "lenient::opt_int",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(minimum = 0, maximum = 8, example = 0)]
    pub gpu: Option<u32>,
}

/// The nodes' private network. The network, broadcast and gateway
/// addresses are never handed out: a range starting on the network address
/// (as in `192.168.1.0`) starts at the next one, with a warning.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct NodesSubnetRequest {
    /// Default true. When false meson hands out the addresses, and the
    /// range must hold every node at its maximum.
    #[serde(
        default,
        deserialize_with = "lenient::opt_bool",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<LenientBool>)]
    pub dhcp: Option<bool>,
    /// An IPv4 CIDR, /8 to /29, no host bits set.
    #[schema(example = "192.168.1.0/24")]
    pub subnet_netmask: String,
    /// Default: the first usable address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(example = "192.168.1.0")]
    pub start_address: Option<String>,
    /// Default: the last usable address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(example = "192.168.1.24")]
    pub last_address: Option<String>,
    /// Default: the first usable address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ControlPlaneRequest {
    /// 1 (the default) or 3.
    #[serde(
        default,
        deserialize_with = "lenient::opt_int",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(minimum = 1, maximum = 3)]
    pub nodes: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub specs: Option<NodeSpecsRequest>,
}

/// A node taint: `key=value:Effect`, `key:Effect`, or `{key, value, effect}`;
/// Effect is NoSchedule, PreferNoSchedule or NoExecute (any case). Read in
/// any of the forms; serialized as the object.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TaintRequest {
    pub key: String,
    pub value: Option<String>,
    pub effect: String,
}

/// The object form of a taint.
#[derive(Serialize, Deserialize)]
struct TaintObject {
    key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    value: Option<String>,
    effect: String,
}

impl Serialize for TaintRequest {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        TaintObject {
            key: self.key.clone(),
            value: self.value.clone(),
            effect: self.effect.clone(),
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for TaintRequest {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Form {
            Text(String),
            Object(TaintObject),
        }
        Ok(match Form::deserialize(d)? {
            Form::Object(o) => TaintRequest {
                key: o.key,
                value: o.value,
                effect: o.effect,
            },
            Form::Text(t) => {
                let (kv, effect) = t.rsplit_once(':').unwrap_or((t.as_str(), ""));
                let (key, value) = match kv.split_once('=') {
                    Some((k, v)) => (k, Some(v.to_owned())),
                    None => (kv, None),
                };
                TaintRequest {
                    key: key.to_owned(),
                    value,
                    effect: effect.to_owned(),
                }
            }
        })
    }
}

impl PartialSchema for TaintRequest {
    fn schema() -> RefOr<Schema> {
        let effect = ObjectBuilder::new()
            .schema_type(Type::String)
            .enum_values(Some(["NoSchedule", "PreferNoSchedule", "NoExecute"]));
        OneOfBuilder::new()
            .item(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .examples(["dedicated=gpu:NoSchedule"]),
            )
            .item(
                ObjectBuilder::new()
                    .schema_type(Type::Object)
                    .property("key", ObjectBuilder::new().schema_type(Type::String))
                    .property("value", ObjectBuilder::new().schema_type(Type::String))
                    .property("effect", effect)
                    .required("key")
                    .required("effect"),
            )
            .description(Some(
                "key=value:Effect, key:Effect or {key, value, effect}; Effect is \
                 NoSchedule, PreferNoSchedule or NoExecute.",
            ))
            .into()
    }
}

impl ToSchema for TaintRequest {}

impl From<crate::quote::NodeSpecs> for NodeSpecsRequest {
    /// A size given in full.
    fn from(s: crate::quote::NodeSpecs) -> Self {
        NodeSpecsRequest {
            cpu: Some(s.cpu),
            ram: Some(s.ram),
            storage: Some(s.storage),
            gpu: Some(s.gpu),
        }
    }
}

/// Declares a pool request with the node-count fields a pool is created
/// and resized with (`autoscale`, `min_nodes`, `max_nodes`,
/// `desired_nodes`) after its own, so that their names, docs, lenient
/// reading and schema are written once.
macro_rules! counted {
    ($($request:tt)*) => {
        $crate::common::extended! {
            [
                /// Let the cluster-autoscaler move `desired_nodes` between the
                /// bounds (false for a pool created without it).
                #[serde(
                    default,
                    deserialize_with = "crate::lenient::opt_bool",
                    skip_serializing_if = "Option::is_none"
                )]
                #[schema(value_type = Option<crate::requests::LenientBool>)]
                pub autoscale: Option<bool>,
                #[serde(
                    default,
                    deserialize_with = "crate::lenient::opt_int",
                    skip_serializing_if = "Option::is_none"
                )]
                #[schema(minimum = 0, maximum = 100)]
                pub min_nodes: Option<u32>,
                /// Without DHCP, the cluster network must hold every node at
                /// its maximum plus the API endpoint.
                #[serde(
                    default,
                    deserialize_with = "crate::lenient::opt_int",
                    skip_serializing_if = "Option::is_none"
                )]
                #[schema(minimum = 1, maximum = 100)]
                pub max_nodes: Option<u32>,
                /// The node count to converge to.
                #[serde(
                    default,
                    deserialize_with = "crate::lenient::opt_int",
                    skip_serializing_if = "Option::is_none"
                )]
                #[schema(minimum = 0, maximum = 100)]
                pub desired_nodes: Option<u32>,
            ]
            $($request)*
        }
    };
}
pub(crate) use counted;
