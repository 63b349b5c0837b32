//! Quotas, AtomOS targets and the audit log on the wire.

use crate::{Meta, Warning};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

/// A tenant's quotas and what it holds of each.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Quota {
    #[schema(example = "acme")]
    pub tenant: String,
    /// The plan the tenant is on; null: the deployment's defaults.
    #[serde(default)]
    #[schema(required = true, example = "pro")]
    pub plan: Option<String>,
    /// One entry per resource: `vms` (cluster nodes apart), `vcpus`,
    /// `ram_mib`, `storage_gb`, `clusters`, `nodes` (control planes
    /// included, pools at `desired_nodes`), `images_gb`.
    pub limits: Vec<QuotaLimit>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct QuotaLimit {
    #[schema(example = "vms")]
    pub name: String,
    /// The most the tenant may hold.
    pub quota: i64,
    /// What the tenant holds now.
    pub current: i64,
    /// True when the quota is the deployment's default, set neither for
    /// this tenant nor by its plan.
    pub default: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct QuotaResponse {
    pub quota: Quota,
}

/// Declares a struct with the quotas as its first fields, each a number
/// that sets the quota or `null` that returns it to the default (in Rust:
/// `Some(Some(n))` sets, `Some(None)` sends `null`, `None` leaves it), then
/// its own: the quota names, docs and schema are written once.
macro_rules! with_quotas {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $($own:tt)*
        }
    ) => {
        $(#[$meta])*
        pub struct $name {
            #[serde(
                default,
                deserialize_with = "crate::lenient::present",
                skip_serializing_if = "Option::is_none"
            )]
            #[schema(value_type = Option<i64>, minimum = 0, example = 20)]
            pub vms: Option<Option<i64>>,
            #[serde(
                default,
                deserialize_with = "crate::lenient::present",
                skip_serializing_if = "Option::is_none"
            )]
            #[schema(value_type = Option<i64>, minimum = 0)]
            pub vcpus: Option<Option<i64>>,
            #[serde(
                default,
                deserialize_with = "crate::lenient::present",
                skip_serializing_if = "Option::is_none"
            )]
            #[schema(value_type = Option<i64>, minimum = 0)]
            pub ram_mib: Option<Option<i64>>,
            #[serde(
                default,
                deserialize_with = "crate::lenient::present",
                skip_serializing_if = "Option::is_none"
            )]
            #[schema(value_type = Option<i64>, minimum = 0)]
            pub storage_gb: Option<Option<i64>>,
            #[serde(
                default,
                deserialize_with = "crate::lenient::present",
                skip_serializing_if = "Option::is_none"
            )]
            #[schema(value_type = Option<i64>, minimum = 0)]
            pub clusters: Option<Option<i64>>,
            #[serde(
                default,
                deserialize_with = "crate::lenient::present",
                skip_serializing_if = "Option::is_none"
            )]
            #[schema(value_type = Option<i64>, minimum = 0)]
            pub nodes: Option<Option<i64>>,
            #[serde(
                default,
                deserialize_with = "crate::lenient::present",
                skip_serializing_if = "Option::is_none"
            )]
            #[schema(value_type = Option<i64>, minimum = 0)]
            pub images_gb: Option<Option<i64>>,
            $($own)*
        }
    };
}

with_quotas! {
    /// `PATCH /v1/tenants/{tenant}/quotas`: a number sets a quota, `null`
    /// returns it to the plan's (or the default), an absent name leaves it;
    /// `plan` puts the tenant on a plan (`null`: on none, the defaults).
    #[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
    pub struct QuotaUpdateRequest {
        #[serde(
            default,
            deserialize_with = "crate::lenient::present",
            skip_serializing_if = "Option::is_none"
        )]
        #[schema(value_type = Option<String>, example = "pro")]
        pub plan: Option<Option<String>>,
    }
}

with_quotas! {
    /// A plan's quotas by resource name: a number sets the quota, `null`
    /// or absent leaves it at the deployment's default.
    #[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
    pub struct PlanQuotas {}
}

/// A plan: a named set of quotas operators put tenants on. `default` is
/// the deployment's own defaults, the plan of a tenant on none.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Plan {
    #[schema(example = "pro")]
    pub name: String,
    #[schema(example = "For production workloads")]
    pub description: String,
    /// Each resource's quota on this plan.
    pub quotas: Vec<PlanQuota>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PlanQuota {
    #[schema(example = "vms")]
    pub name: String,
    pub quota: i64,
    /// True when the plan leaves it at the deployment's default.
    pub default: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PlanList {
    /// `default` first, then by name.
    pub plans: Vec<Plan>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PlanResponse {
    pub plan: Plan,
}

/// `PUT /v1/admin/plans/{name}`: the whole plan (what it leaves out is the
/// default).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PlanPutRequest {
    /// At most 200 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(example = "For production workloads")]
    pub description: Option<String>,
    /// Quotas by resource name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quotas: Option<PlanQuotas>,
}

/// An AtomOS target: one host's daemons, where it is and who runs it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Target {
    pub id: Uuid,
    /// Unique; shown to tenants as their VMs' `host`.
    #[schema(example = "ovh-gra-1")]
    pub name: String,
    /// Address of the daemons.
    #[schema(example = "10.0.0.5")]
    pub host: String,
    #[schema(example = 17777)]
    pub compute_port: u16,
    #[schema(example = 27777)]
    pub storage_port: u16,
    #[schema(example = 37777)]
    pub network_port: u16,
    #[schema(example = 47777)]
    pub auth_port: u16,
    #[schema(example = "ovh")]
    pub provider: String,
    #[schema(example = "gra")]
    pub region: String,
    #[schema(example = "europe")]
    pub continent: String,
    /// A disabled target takes no new VMs; those on it stay.
    pub enabled: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TargetResponse {
    pub target: Target,
    /// Unknown fields that were ignored; absent when there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<Warning>,
}

/// `POST /v1/targets/{id}/actions/drain`: the target (now taking no new
/// VMs), the migrations started, and the VMs left where they are, with why.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct TargetDrainResponse {
    pub target: Target,
    /// One `migrate_vm` action per VM moved (each in its VM's tenant).
    pub actions: Vec<crate::Action>,
    #[serde(default)]
    pub left: Vec<DrainLeft>,
}

/// A VM a drain does not move.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct DrainLeft {
    pub vm: Uuid,
    pub reason: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TargetList {
    pub targets: Vec<Target>,
}

/// `POST /v1/targets`. Ports default to AtomOS's
/// (17777, 27777, 37777, 47777); `enabled` to true.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct TargetCreateRequest {
    #[schema(example = "ovh-gra-1", max_length = 63, pattern = "^[a-zA-Z0-9-]+$")]
    pub name: String,
    #[schema(example = "10.0.0.5")]
    pub host: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_port: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_port: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_port: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_port: Option<u16>,
    #[schema(example = "ovh")]
    pub provider: String,
    #[schema(example = "gra")]
    pub region: String,
    #[schema(example = "europe")]
    pub continent: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
}

/// `PATCH /v1/targets/{id}`: the endpoint and state;
/// the name and location stay (VMs placed there refer to them).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct TargetUpdateRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_port: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_port: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_port: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_port: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
}

/// One audited request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AuditEntry {
    pub id: i64,
    pub time: DateTime<Utc>,
    pub tenant: String,
    /// The token's subject.
    pub subject: String,
    #[schema(example = "editor")]
    pub role: String,
    /// The operation (`vm_create`, ...: the OpenAPI operation id).
    #[schema(example = "vm_create")]
    pub operation: String,
    #[schema(example = "POST")]
    pub method: String,
    #[schema(example = "/v1/vms")]
    pub path: String,
    /// The resource acted on, when known (named by the path, or created).
    #[schema(required = true, example = "vm")]
    pub resource_type: Option<String>,
    #[schema(required = true)]
    pub resource_id: Option<String>,
    /// The action the request started, if any.
    #[schema(required = true)]
    pub action_id: Option<Uuid>,
    /// The HTTP status meson answered.
    pub status: u16,
    pub correlation_id: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct AuditList {
    pub audit_entries: Vec<AuditEntry>,
    pub meta: Meta,
}

/// `GET /v1/audit` filters.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AuditListQuery {
    /// Only this tenant's entries.
    pub tenant: Option<String>,
    /// Only this subject's.
    pub subject: Option<String>,
    /// Only this operation's (`vm_delete`, ...).
    pub operation: Option<String>,
    /// Only those about this resource.
    pub resource_id: Option<String>,
    /// From this time on (RFC 3339).
    pub since: Option<DateTime<Utc>>,
    /// Before this time (RFC 3339).
    pub until: Option<DateTime<Utc>>,
}

/// A VM a host holds that meson has no record of: made after the backup
/// meson's database was restored from, or made outside meson. VMs whose
/// names carry a tenant meson knows are adopted back by themselves; these
/// wait for an operator: adopt one into a tenant, or delete it from its
/// host. Nothing is deleted otherwise.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Orphan {
    pub id: Uuid,
    /// The target holding it.
    pub target_id: Uuid,
    #[schema(example = "ovh-gra-1")]
    pub host: String,
    /// The VM's id and name on its host.
    pub atomos_id: String,
    #[schema(example = "k0196f0e3a7c1-w-0196f0e3b1c27a3e8f1b2c3d4e5f6a7b-t3f1c9a2b7d4e")]
    pub atomos_name: String,
    /// The meson VM id its name carries, if meson named it.
    #[serde(default)]
    #[schema(required = true)]
    pub vm_id: Option<Uuid>,
    /// The tenant tag its name carries (the first 12 hex digits of the
    /// SHA-256 of the tenant's id), if any.
    #[serde(default)]
    #[schema(required = true, example = "3f1c9a2b7d4e")]
    pub tenant_tag: Option<String>,
    /// The tenant the tag names, among those meson knows.
    #[serde(default)]
    #[schema(required = true)]
    pub tenant: Option<String>,
    /// The first 12 hex digits of the cluster's id, for a Kubernetes node.
    #[serde(default)]
    #[schema(required = true)]
    pub cluster: Option<String>,
    /// As its host reports it (`running`, `off`, ...).
    #[schema(example = "running")]
    pub state: String,
    pub vcpus: u32,
    pub ram_mib: u64,
    #[serde(default)]
    #[schema(required = true, value_type = Option<String>, example = "10.0.0.17")]
    pub ipv4: Option<std::net::Ipv4Addr>,
    /// Its volumes no meson volume names (a deletion destroys these).
    pub volumes: Vec<OrphanVolume>,
    /// Why it was not adopted by itself.
    pub reason: String,
    /// An operator's decision, carried out by the reconciler's next pass:
    /// `adopt` or `delete`; null while undecided.
    #[serde(default)]
    #[schema(required = true, example = "delete")]
    pub decision: Option<String>,
    /// The tenant an `adopt` decision names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adopt_tenant: Option<String>,
    #[serde(default)]
    #[schema(required = true)]
    pub decided_by: Option<String>,
    #[serde(default)]
    #[schema(required = true)]
    pub decided_at: Option<DateTime<Utc>>,
    /// What stopped the decision the last time it was tried (tried again
    /// on the next pass).
    #[serde(default)]
    #[schema(required = true)]
    pub error_message: Option<String>,
    pub first_seen: DateTime<Utc>,
    pub last_seen: DateTime<Utc>,
}

/// One of an orphan's volumes, as its host's storage lists it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct OrphanVolume {
    pub atomos_id: String,
    pub name: String,
    pub size_gb: f64,
    pub bootable: bool,
    pub readonly: bool,
    pub cloudinit: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct OrphanList {
    pub orphans: Vec<Orphan>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct OrphanResponse {
    pub orphan: Orphan,
    /// Unknown fields that were ignored; absent when there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<Warning>,
}

/// `POST /v1/admin/orphans/{id}/actions/adopt`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct OrphanAdoptRequest {
    /// The tenant to adopt it into; when its name carries a tenant tag,
    /// the tenant it names.
    #[schema(example = "acme")]
    pub tenant: String,
    /// The VM's name in the tenant; its AtomOS name if absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(example = "web-1")]
    pub name: Option<String>,
}
