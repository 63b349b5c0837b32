//! Inbound bodies and query strings: what clients send, typed.
//!
//! meson-core reads requests leniently from `serde_json::Value` (booleans as
//! `"True"`/`"False"` strings or 0/1, `pci.devices` as a map or a list,
//! unknown fields kept as warnings, `null` as absent) and stays the
//! authority on validation. These types are what clients build: they
//! deserialize whatever that reader accepts (see [`crate::lenient`]),
//! serialize the canonical form, and their schemas document the quirks
//! accepted. Change them with `meson-core/src/vm.rs` and `parse.rs`.

use crate::action::ActionStatus;
pub use crate::common::{
    AbbreviatedId, ActionSort, CursorQuery, Labels, LabelsRequest, LenientBool, NameLabelsUpdate,
    PageQuery, VmSort,
};
use crate::lenient;
use crate::vm::VmStatus;
use crate::volume::VolumeKind;
use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize, Serializer};
use std::collections::BTreeMap;
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, OneOfBuilder, Schema, Type};
use utoipa::{IntoParams, PartialSchema, ToSchema};
use uuid::Uuid;

/// The canonical VM payload (docs/payloads.md), with a public key that works.
pub fn vm_create_example() -> serde_json::Value {
    serde_json::json!({
        "specs": {
            "req": {
                "cpu": {"smtEnabled": false, "numberOfCores": 2, "numberOfThreads": 1,
                        "min_frequency": 1.0, "arch": ["X86_64"], "flags": []},
                "mem": {"capacity": 4096, "requireECC": 0},
                "pci": {"devices": {}},
                "misc": {"osDistribution": "Debian"}
            },
            "volumes": [{"name": "test", "size": 30, "private": "True", "shareable": "False",
                         "bootable": "False", "readonly": "False"}],
            "authentication": {"ssh-key": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMLavtiPfhiG3t6TAxHosXoVh7Pc/lSD8L9SNPyAzp1d user@host"},
            "vm_name": "test"
        },
        "provider": "ionos"
    })
}

crate::common::placed! {
    /// `POST /v1/vms` (and `POST /v1/quotes`): a VM request.
    ///
    /// Fields not described here are ignored and reported in the response's
    /// `warnings`; a `null` value counts as absent. Every rejected field is named
    /// in the `invalid_input` error.
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
    pub struct VmCreateRequest {
        pub specs: VmRequestSpecs,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schema(value_type = Option<LabelsRequest>)]
        pub labels: Option<Labels>,
        /// Private networks to attach (ids, in NIC order, at most 4). On a
        /// network without DHCP meson hands the VM an address.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schema(max_items = 4)]
        pub networks: Option<Vec<Uuid>>,
        /// Standalone volumes to attach (ids, at most 8): the tenant's,
        /// `available`, all on one AtomOS host. They pin the VM to that host (a
        /// VM that does not fit there fails with `resource_unavailable`), are
        /// `attached` from this request on, and become `available` again, with
        /// their data, when the VM is deleted.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schema(max_items = 8)]
        pub volumes: Option<Vec<Uuid>>,
        /// The tenant's `available` image to copy the boot volume from, in
        /// place of the OS's cloud image (`os_distribution` then names what
        /// the image holds, for its cloud-init; default Debian). The VM runs
        /// on the image's AtomOS host; its boot volume has the image's size,
        /// or the flavour's when larger (grown after the copy).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub image: Option<Uuid>,
    }
}

impl VmCreateRequest {
    /// A VM named `name` with `cores` cores and `memory_mib` MiB; the rest
    /// meson's defaults (Debian, x86-64, no data disk, no key).
    pub fn new(name: impl Into<String>, cores: u32, memory_mib: u64) -> VmCreateRequest {
        VmCreateRequest {
            specs: VmRequestSpecs {
                req: VmRequirements {
                    cpu: CpuRequest {
                        number_of_cores: cores,
                        ..CpuRequest::default()
                    },
                    mem: MemRequest {
                        capacity: memory_mib,
                        ..MemRequest::default()
                    },
                    ..VmRequirements::default()
                },
                vm_name: name.into(),
                ..VmRequestSpecs::default()
            },
            ..VmCreateRequest::default()
        }
    }

    /// Places the VM with `provider`.
    pub fn provider(mut self, provider: impl Into<String>) -> Self {
        self.provider = Some(provider.into());
        self
    }

    /// Boots from a copy of the tenant's image `id`.
    pub fn image(mut self, id: Uuid) -> Self {
        self.image = Some(id);
        self
    }

    /// The guest's distribution (`Debian`, `Ubuntu 22.04`, ...).
    pub fn os(mut self, distribution: impl Into<String>) -> Self {
        self.specs.req.misc = Some(MiscRequest {
            os_distribution: Some(distribution.into()),
        });
        self
    }

    /// Adds an SSH public key for the default user.
    pub fn ssh_key(mut self, key: impl Into<String>) -> Self {
        let auth = self
            .specs
            .authentication
            .get_or_insert_with(Default::default);
        auth.ssh_keys.get_or_insert_with(Vec::new).push(key.into());
        self
    }

    /// Adds a data disk of `size_gb` GB.
    pub fn data_volume(mut self, name: impl Into<String>, size_gb: u32) -> Self {
        self.specs
            .volumes
            .get_or_insert_with(Vec::new)
            .push(VolumeRequest::new(name, size_gb));
        self
    }

    /// Attaches these standalone volumes (replacing any given before).
    pub fn attach_volumes(mut self, volumes: &[Uuid]) -> Self {
        self.volumes = Some(volumes.to_vec());
        self
    }

    /// Attaches these private networks, in NIC order.
    pub fn networks(mut self, networks: &[Uuid]) -> Self {
        self.networks = Some(networks.to_vec());
        self
    }

    /// Sets the VM's labels.
    pub fn labels(mut self, labels: Labels) -> Self {
        self.labels = Some(labels);
        self
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct VmRequestSpecs {
    /// What the VM needs from its host.
    pub req: VmRequirements,
    /// Data disks, besides the boot disk meson creates (20 GB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_items = 8)]
    pub volumes: Option<Vec<VolumeRequest>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentication: Option<VmAuthentication>,
    /// The VM's name, also its hostname; unique per tenant.
    #[schema(
        example = "test",
        max_length = 63,
        pattern = "^[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?$"
    )]
    pub vm_name: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct VmRequirements {
    pub cpu: CpuRequest,
    pub mem: MemRequest,
    /// PCI devices to pass through (GPUs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci: Option<PciRequest>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub misc: Option<MiscRequest>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct CpuRequest {
    /// Simultaneous multithreading; default false.
    #[serde(
        rename = "smtEnabled",
        default,
        deserialize_with = "lenient::opt_bool",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<LenientBool>)]
    pub smt_enabled: Option<bool>,
    #[serde(rename = "numberOfCores", deserialize_with = "lenient::int")]
    #[schema(minimum = 1, maximum = 128)]
    pub number_of_cores: u32,
    /// Threads per core; must be 1 (the default) unless `smtEnabled` is true.
    #[serde(
        rename = "numberOfThreads",
        default,
        deserialize_with = "lenient::opt_int",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(minimum = 1, maximum = 8)]
    pub number_of_threads: Option<u32>,
    /// Lowest acceptable clock, GHz.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0.1, maximum = 6.0)]
    pub min_frequency: Option<f64>,
    /// Acceptable architectures; default `["X86_64"]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arch: Option<CpuArch>,
    /// CPU flags the host must have (`sse2`, `avx2`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_items = 64, value_type = Option<Vec<CpuFlag>>)]
    pub flags: Option<Vec<String>>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MemRequest {
    /// MiB.
    #[serde(deserialize_with = "lenient::int")]
    #[schema(minimum = 128, maximum = 1_048_576, example = 4096)]
    pub capacity: u64,
    /// ECC memory; default false. Clients send 0/1 here.
    #[serde(
        rename = "requireECC",
        default,
        deserialize_with = "lenient::opt_bool",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<LenientBool>)]
    pub require_ecc: Option<bool>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PciRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub devices: Option<PciDevices>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MiscRequest {
    /// `Debian` (the default), `Ubuntu`, `Ubuntu 22.04`, `AlmaLinux`,
    /// `Rocky`, `Fedora`, ...; case and spaces do not matter.
    #[serde(
        rename = "osDistribution",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(example = "Debian")]
    pub os_distribution: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct VolumeRequest {
    /// Unique among the VM's volumes.
    #[schema(max_length = 40, pattern = "^[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?$")]
    pub name: String,
    /// GB.
    #[serde(deserialize_with = "lenient::int")]
    #[schema(minimum = 1, maximum = 10_240)]
    pub size: u32,
    /// Default true.
    #[serde(
        default,
        deserialize_with = "lenient::opt_bool",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<LenientBool>)]
    pub private: Option<bool>,
    /// Default false; a shareable volume cannot be bootable.
    #[serde(
        default,
        deserialize_with = "lenient::opt_bool",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<LenientBool>)]
    pub shareable: Option<bool>,
    /// Default false.
    #[serde(
        default,
        deserialize_with = "lenient::opt_bool",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<LenientBool>)]
    pub bootable: Option<bool>,
    /// Default false.
    #[serde(
        default,
        deserialize_with = "lenient::opt_bool",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<LenientBool>)]
    pub readonly: Option<bool>,
}

impl VolumeRequest {
    /// A data disk with meson's defaults (private, not shareable).
    pub fn new(name: impl Into<String>, size_gb: u32) -> VolumeRequest {
        VolumeRequest {
            name: name.into(),
            size: size_gb,
            ..VolumeRequest::default()
        }
    }
}

/// SSH public keys for the VM's default user (OpenSSH lines such as
/// `ssh-ed25519 AAAA... user@host`; DSA keys are refused).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct VmAuthentication {
    #[serde(rename = "ssh-key", default, skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 16384)]
    pub ssh_key: Option<String>,
    #[serde(rename = "ssh-keys", default, skip_serializing_if = "Option::is_none")]
    #[schema(max_items = 16)]
    pub ssh_keys: Option<Vec<String>>,
    /// Keys the tenant keeps at meson (`/v1/ssh-keys`), each by id or
    /// name: installed as if given in `ssh-keys` (the same key once).
    #[serde(
        rename = "ssh-key-ids",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(max_items = 16)]
    pub ssh_key_ids: Option<Vec<String>>,
}

/// Acceptable CPU architectures (`X86_64`, `ARM_8`, ...). Clients may send
/// one as a string or a list; it serializes as a list.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CpuArch(pub Vec<String>);

impl Serialize for CpuArch {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl<'de> Deserialize<'de> for CpuArch {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum OneOrList {
            One(String),
            List(Vec<String>),
        }
        Ok(CpuArch(match OneOrList::deserialize(d)? {
            OneOrList::One(a) => vec![a],
            OneOrList::List(l) => l,
        }))
    }
}

impl PartialSchema for CpuArch {
    fn schema() -> RefOr<Schema> {
        let one = || {
            ObjectBuilder::new()
                .schema_type(Type::String)
                .pattern(Some(
                    "^([Xx]86_64|[Xx]86_32|[Aa][Rr][Mm]_7|[Aa][Rr][Mm]_8|[Pp][Pp][Cc]_64|[Ss]390[Xx])$",
                ))
                .examples(["X86_64"])
        };
        OneOfBuilder::new()
            .item(one())
            .item(
                ArrayBuilder::new()
                    .items(one())
                    .min_items(Some(1))
                    .max_items(Some(8)),
            )
            .description(Some(
                "X86_64, X86_32, ARM_7, ARM_8, PPC_64 or S390X (any case), or a list of them.",
            ))
            .into()
    }
}

impl ToSchema for CpuArch {}

/// A CPU flag such as `avx2` (the schema of `flags`' items).
pub struct CpuFlag;

impl PartialSchema for CpuFlag {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .pattern(Some("^[A-Za-z0-9_.]{1,32}$"))
            .examples(["avx2"])
            .into()
    }
}

impl ToSchema for CpuFlag {}

/// PCI devices: a map `{"<vendor>:<model>": count}` (PCI ids, 4 hex digits
/// each) or a list of `{vendor, model, quantity}`; at most 8 kinds, each
/// listed once. Read in either form; serialized as the list.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PciDevices(pub Vec<PciDevice>);

/// One kind of PCI device and how many of it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PciDevice {
    /// 4 hex digits (`10de`).
    pub vendor: String,
    /// 4 hex digits (`1bb1`).
    pub model: String,
    #[serde(default = "one", deserialize_with = "lenient::int")]
    pub quantity: u32,
}

fn one() -> u32 {
    1
}

impl Serialize for PciDevices {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl<'de> Deserialize<'de> for PciDevices {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        /// A count of the map form.
        #[derive(Deserialize)]
        struct Count(#[serde(deserialize_with = "lenient::int")] u32);
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum MapOrList {
            Map(BTreeMap<String, Count>),
            List(Vec<PciDevice>),
        }
        match MapOrList::deserialize(d)? {
            MapOrList::List(l) => Ok(PciDevices(l)),
            MapOrList::Map(m) => m
                .into_iter()
                .map(|(id, Count(quantity))| match id.split_once(':') {
                    Some((vendor, model)) => Ok(PciDevice {
                        vendor: vendor.to_owned(),
                        model: model.to_owned(),
                        quantity,
                    }),
                    None => Err(de::Error::invalid_value(
                        de::Unexpected::Str(&id),
                        &"a PCI id \"<vendor>:<model>\"",
                    )),
                })
                .collect::<Result<_, _>>()
                .map(PciDevices),
        }
    }
}

impl PartialSchema for PciDevices {
    fn schema() -> RefOr<Schema> {
        let hex4 = || {
            ObjectBuilder::new()
                .schema_type(Type::String)
                .pattern(Some("^[0-9A-Fa-f]{4}$"))
        };
        let quantity = || {
            ObjectBuilder::new()
                .schema_type(Type::Integer)
                .minimum(Some(1))
                .maximum(Some(8))
        };
        let map = ObjectBuilder::new()
            .schema_type(Type::Object)
            .property_names(Some(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .pattern(Some("^[0-9A-Fa-f]{4}:[0-9A-Fa-f]{4}$")),
            ))
            .additional_properties(Some(quantity()))
            .max_properties(Some(8))
            .examples([serde_json::json!({"10de:1bb1": 1})]);
        let item = ObjectBuilder::new()
            .schema_type(Type::Object)
            .property("vendor", hex4().examples(["10de"]))
            .required("vendor")
            .property("model", hex4().examples(["1bb1"]))
            .required("model")
            .property("quantity", quantity().default(Some(1.into())));
        OneOfBuilder::new()
            .item(map)
            .item(ArrayBuilder::new().items(item).max_items(Some(8)))
            .description(Some(
                "{\"<vendor>:<model>\": count} or [{vendor, model, quantity}]",
            ))
            .into()
    }
}

impl ToSchema for PciDevices {}

/// `GET /v1/vms` filters.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
pub struct VmListQuery {
    /// Only the VM with this name.
    pub name: Option<String>,
    /// Only VMs in one of these statuses (repeat the parameter).
    pub status: Option<Vec<VmStatus>>,
    /// Kubernetes label selector: `env=prod,tier!=db,team in (a,b),!legacy`.
    pub label_selector: Option<String>,
    /// `field[:asc|:desc]`, field among id, name, status and created; up to
    /// two keys (repeat the parameter).
    #[param(max_items = 2, value_type = Option<Vec<VmSort>>)]
    pub sort: Option<Vec<String>>,
}

/// `GET /v1/actions`: the actions to read, by id.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ActionListQuery {
    /// Action ids (repeat the parameter: `?id=..&id=..`), 1 to 25; ids that
    /// are unknown (or another tenant's) are skipped. An id may be
    /// abbreviated to 8 or more of its first or last hex digits (tables
    /// print the last 8): it then stands for every action of the caller it
    /// matches, at most 25.
    #[param(min_items = 1, max_items = 25, value_type = Vec<AbbreviatedId>, inline)]
    pub id: Vec<Uuid>,
    /// Only actions in one of these statuses.
    pub status: Option<Vec<ActionStatus>>,
    /// `field[:asc|:desc]` (repeatable), field among id, command, status,
    /// progress, started and finished.
    #[param(value_type = Option<Vec<ActionSort>>)]
    pub sort: Option<Vec<String>>,
}

/// `GET /v1/vms/{id}/actions` filters.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
pub struct VmActionListQuery {
    /// Only actions in one of these statuses.
    pub status: Option<Vec<ActionStatus>>,
    /// `field[:asc|:desc]` (repeatable), field among id, command, status,
    /// progress, started and finished; default `started:desc`.
    #[param(value_type = Option<Vec<ActionSort>>)]
    pub sort: Option<Vec<String>>,
}

/// `GET /v1/actions/stream`: the actions to watch.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ActionStreamQuery {
    /// Action ids (repeat the parameter), 1 to 25; every one must exist.
    #[param(min_items = 1, max_items = 25)]
    pub id: Vec<Uuid>,
}

/// `GET /v1/volumes` filters.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
pub struct VolumeListQuery {
    /// Only the volumes of this VM: its own and the standalone ones attached to it.
    pub vm: Option<Uuid>,
    /// Only volumes of this kind.
    pub kind: Option<VolumeKind>,
    /// `true`: only standalone volumes; `false`: only VMs' own.
    pub standalone: Option<bool>,
}
