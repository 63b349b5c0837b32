//! Inbound bodies and query strings, for the OpenAPI document only.
//!
//! meson-core reads requests leniently from `serde_json::Value` (booleans as
//! `"True"`/`"False"` strings or 0/1, `pci.devices` as a map or a list,
//! unknown fields kept as warnings, `null` as absent), so no serde type
//! parses them. These types describe what that reader accepts, quirks
//! included; change them with `meson-core/src/vm.rs` and `parse.rs`.

// Documentation types: never constructed.
#![allow(dead_code)]

use crate::action::ActionStatus;
use crate::vm::VmStatus;
use crate::volume::VolumeKind;
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, OneOfBuilder, Schema, Type};
use utoipa::{IntoParams, PartialSchema, ToSchema};
use uuid::Uuid;

/// A label value: empty, or alphanumerics, `-`, `_` and `.` between alphanumerics.
const LABEL_VALUE: &str = "^([A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?)?$";
/// A label key: an optional DNS-subdomain prefix and `/`, then a name.
const LABEL_KEY: &str = "^([a-z0-9]([a-z0-9-]*[a-z0-9])?(\\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*/)?[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?$";

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

/// `POST /v1/vms` (and `POST /v1/quotes`): a VM request.
///
/// Fields not described here are ignored and reported in the response's
/// `warnings`; a `null` value counts as absent. Every rejected field is named
/// in the `invalid_input` error.
#[derive(ToSchema)]
pub struct VmCreateRequest {
    pub specs: VmRequestSpecs,
    /// Place the VM with this provider (`ovh`, `ionos`, `gigas`, `arubacloud`,
    /// `atomos`, ...; trimmed and lowercased). Without it meson picks the
    /// cheapest placement that fits.
    #[schema(example = "ionos")]
    pub provider: Option<String>,
    /// Place the VM on this continent (`europe`, `north-america`, ...).
    pub continent: Option<String>,
    /// Place the VM in this region.
    pub region: Option<String>,
    pub labels: Option<LabelsRequest>,
    /// Private networks to attach (ids, in NIC order, at most 4). On a
    /// network without DHCP meson hands the VM an address.
    #[schema(max_items = 4)]
    pub networks: Option<Vec<Uuid>>,
    /// Standalone volumes to attach (ids, at most 8): the tenant's,
    /// `available`, all on one AtomOS host. They pin the VM to that host (a
    /// VM that does not fit there fails with `resource_unavailable`), are
    /// `attached` from this request on, and become `available` again, with
    /// their data, when the VM is deleted.
    #[schema(max_items = 8)]
    pub volumes: Option<Vec<Uuid>>,
}

#[derive(ToSchema)]
pub struct VmRequestSpecs {
    /// What the VM needs from its host.
    pub req: VmRequirements,
    /// Data disks, besides the boot disk meson creates (20 GB).
    #[schema(max_items = 8)]
    pub volumes: Option<Vec<VolumeRequest>>,
    pub authentication: Option<VmAuthentication>,
    /// The VM's name, also its hostname; unique per tenant.
    #[schema(
        example = "test",
        max_length = 63,
        pattern = "^[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?$"
    )]
    pub vm_name: String,
}

#[derive(ToSchema)]
pub struct VmRequirements {
    pub cpu: CpuRequest,
    pub mem: MemRequest,
    /// PCI devices to pass through (GPUs).
    pub pci: Option<PciRequest>,
    pub misc: Option<MiscRequest>,
}

#[derive(ToSchema)]
pub struct CpuRequest {
    /// Simultaneous multithreading; default false.
    #[schema(rename = "smtEnabled")]
    pub smt_enabled: Option<LenientBool>,
    #[schema(rename = "numberOfCores", minimum = 1, maximum = 128)]
    pub number_of_cores: u32,
    /// Threads per core; must be 1 (the default) unless `smtEnabled` is true.
    #[schema(rename = "numberOfThreads", minimum = 1, maximum = 8)]
    pub number_of_threads: Option<u32>,
    /// Lowest acceptable clock, GHz.
    #[schema(minimum = 0.1, maximum = 6.0)]
    pub min_frequency: Option<f64>,
    /// Acceptable architectures; default `["X86_64"]`.
    pub arch: Option<CpuArch>,
    /// CPU flags the host must have (`sse2`, `avx2`, ...).
    #[schema(max_items = 64, value_type = Option<Vec<CpuFlag>>)]
    pub flags: Option<Vec<String>>,
}

#[derive(ToSchema)]
pub struct MemRequest {
    /// MiB.
    #[schema(minimum = 128, maximum = 1_048_576, example = 4096)]
    pub capacity: u64,
    /// ECC memory; default false. Clients send 0/1 here.
    #[schema(rename = "requireECC")]
    pub require_ecc: Option<LenientBool>,
}

#[derive(ToSchema)]
pub struct PciRequest {
    pub devices: Option<PciDevices>,
}

#[derive(ToSchema)]
pub struct MiscRequest {
    /// `Debian` (the default), `Ubuntu`, `Ubuntu 22.04`, `AlmaLinux`,
    /// `Rocky`, `Fedora`, ...; case and spaces do not matter.
    #[schema(rename = "osDistribution", example = "Debian")]
    pub os_distribution: Option<String>,
}

#[derive(ToSchema)]
pub struct VolumeRequest {
    /// Unique among the VM's volumes.
    #[schema(max_length = 40, pattern = "^[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?$")]
    pub name: String,
    /// GB.
    #[schema(minimum = 1, maximum = 10_240)]
    pub size: u32,
    /// Default true.
    pub private: Option<LenientBool>,
    /// Default false; a shareable volume cannot be bootable.
    pub shareable: Option<LenientBool>,
    /// Default false.
    pub bootable: Option<LenientBool>,
    /// Default false.
    pub readonly: Option<LenientBool>,
}

/// SSH public keys for the VM's default user (OpenSSH lines such as
/// `ssh-ed25519 AAAA... user@host`; DSA keys are refused).
#[derive(ToSchema)]
pub struct VmAuthentication {
    #[schema(rename = "ssh-key", max_length = 16384)]
    pub ssh_key: Option<String>,
    #[schema(rename = "ssh-keys", max_items = 16)]
    pub ssh_keys: Option<Vec<String>>,
}

/// `PATCH /v1/vms/{id}`: rename and/or relabel. Both optional; labels
/// replace the VM's labels.
#[derive(ToSchema)]
pub struct VmUpdateRequest {
    #[schema(max_length = 63, pattern = "^[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?$")]
    pub name: Option<String>,
    pub labels: Option<LabelsRequest>,
}

/// Labels: up to 64, keys `[prefix/]name` and values as in Kubernetes (63
/// characters at most: alphanumerics, `-`, `_`, `.`); the prefix
/// `meson.elemento.cloud/` is reserved.
pub struct LabelsRequest;

impl PartialSchema for LabelsRequest {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::Object)
            .additional_properties(Some(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .max_length(Some(63))
                    .pattern(Some(LABEL_VALUE)),
            ))
            .property_names(Some(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .max_length(Some(317))
                    .pattern(Some(LABEL_KEY)),
            ))
            .max_properties(Some(64))
            .examples([serde_json::json!({"env": "prod", "example.com/team": "infra"})])
            .into()
    }
}

impl ToSchema for LabelsRequest {}

/// A boolean as clients send it: a JSON boolean, the string `"true"` or
/// `"false"` in any case (`"True"`, `"FALSE"`), or 0/1.
pub struct LenientBool;

impl PartialSchema for LenientBool {
    fn schema() -> RefOr<Schema> {
        OneOfBuilder::new()
            .item(ObjectBuilder::new().schema_type(Type::Boolean))
            .item(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .pattern(Some("^([Tt][Rr][Uu][Ee]|[Ff][Aa][Ll][Ss][Ee])$"))
                    .examples(["True", "False"]),
            )
            .item(
                ObjectBuilder::new()
                    .schema_type(Type::Integer)
                    .enum_values(Some([0, 1])),
            )
            .description(Some(
                "A boolean: true/false, \"True\"/\"False\" (any case) or 0/1.",
            ))
            .into()
    }
}

impl ToSchema for LenientBool {}

/// One CPU architecture (any case), or a list of acceptable ones.
pub struct CpuArch;

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

/// A CPU flag such as `avx2`.
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
/// listed once.
pub struct PciDevices;

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

/// `page` and `per_page` of a list.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PageQuery {
    /// Page number, from 1.
    #[param(minimum = 1, default = 1)]
    pub page: Option<u32>,
    /// Entries per page.
    #[param(minimum = 1, maximum = 50, default = 25)]
    pub per_page: Option<u32>,
}

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

/// A sort key of `GET /v1/vms`.
pub struct VmSort;

impl PartialSchema for VmSort {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .pattern(Some("^(id|name|status|created)(:(asc|desc))?$"))
            .examples(["created:desc"])
            .into()
    }
}

impl ToSchema for VmSort {}

/// A sort key of action lists.
pub struct ActionSort;

impl PartialSchema for ActionSort {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .pattern(Some(
                "^(id|command|status|progress|started|finished)(:(asc|desc))?$",
            ))
            .examples(["started:desc"])
            .into()
    }
}

impl ToSchema for ActionSort {}

/// `GET /v1/actions`: the actions to read, by id.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ActionListQuery {
    /// Action ids (repeat the parameter: `?id=..&id=..`), 1 to 25; ids that
    /// are unknown (or another tenant's) are skipped.
    #[param(min_items = 1, max_items = 25)]
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
