//! Metering on the wire: what a tenant used and what it cost, monthly
//! statements, and the price list.
//!
//! Amounts and quantities are decimal strings (`"12.34"`), never floats:
//! a line's to six places, a total to the cent.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

/// What is metered, one meter per kind of resource.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Meter {
    /// A running VM, per hour, at its own price (its host's quote).
    Vm,
    /// A volume's size, per GB-hour, while it exists.
    Volume,
    /// A running cluster's control plane, per hour (its nodes are VMs).
    Cluster,
    /// An image's size, per GB-hour.
    Image,
    /// A backup's size, per GB-hour.
    Backup,
}

impl Meter {
    pub const ALL: [Meter; 5] = [
        Meter::Vm,
        Meter::Volume,
        Meter::Cluster,
        Meter::Image,
        Meter::Backup,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Meter::Vm => "vm",
            Meter::Volume => "volume",
            Meter::Cluster => "cluster",
            Meter::Image => "image",
            Meter::Backup => "backup",
        }
    }

    pub fn parse(s: &str) -> Option<Meter> {
        Meter::ALL.into_iter().find(|m| m.as_str() == s)
    }

    /// What its quantities count.
    pub fn unit(self) -> &'static str {
        match self {
            Meter::Vm | Meter::Cluster => "hour",
            Meter::Volume | Meter::Image | Meter::Backup => "GB-hour",
        }
    }
}

/// An amount of money.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Money {
    #[schema(example = "EUR")]
    pub currency: String,
    /// To the cent.
    #[schema(example = "12.34")]
    pub amount: String,
}

/// `GET /v1/usage`: usage and cost within `[from, to)`, grouped.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Usage {
    pub from: DateTime<Utc>,
    /// Usage after now is not known yet: open usage runs to now.
    pub to: DateTime<Utc>,
    /// `resource`, `day`, `tenant` or `label:<key>`.
    #[schema(example = "resource")]
    pub group_by: String,
    /// Ordered by group, then meter.
    pub lines: Vec<UsageLine>,
    /// The cost of every line, per currency, to the cent.
    pub totals: Vec<Money>,
}

/// One group's usage of one meter.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct UsageLine {
    pub tenant: String,
    pub meter: Meter,
    /// `hour` or `GB-hour`.
    pub unit: String,
    /// The group: a resource's id, a day (`2026-11-28`), a tenant, or a
    /// label's value (null: resources without that label).
    #[serde(default)]
    #[schema(required = true)]
    pub group: Option<String>,
    /// With `group_by=resource`: the resource's name (its latest).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// With `group_by=resource`: a node VM's (or its volume's) cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_id: Option<Uuid>,
    #[schema(example = "720.000000")]
    pub quantity: String,
    #[schema(example = "21.888000")]
    pub cost: String,
    #[schema(example = "EUR")]
    pub currency: String,
}

/// Whether a statement's month is over.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum StatementStatus {
    /// The running month: its figures grow until it ends.
    Open,
    /// Written once its month was over; it never changes.
    Closed,
}

/// A month's bill for one tenant, in one currency.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Statement {
    /// `current` for the running month.
    #[schema(example = "current")]
    pub id: String,
    pub tenant: String,
    pub status: StatementStatus,
    /// The month, UTC: `[period_start, period_end)`.
    pub period_start: DateTime<Utc>,
    pub period_end: DateTime<Utc>,
    pub currency: String,
    /// To the cent: the sum of the lines' exact costs, rounded once.
    #[schema(example = "12.34")]
    pub total: String,
    /// When it was written; null while open.
    #[serde(default)]
    #[schema(required = true)]
    pub closed: Option<DateTime<Utc>>,
    /// A line per resource; absent from lists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lines: Option<Vec<StatementLine>>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct StatementLine {
    pub meter: Meter,
    pub resource_id: Uuid,
    pub resource_name: String,
    #[serde(default)]
    #[schema(required = true)]
    pub cluster_id: Option<Uuid>,
    /// `hour` or `GB-hour`.
    pub unit: String,
    #[schema(example = "720.000000")]
    pub quantity: String,
    #[schema(example = "21.888000")]
    pub cost: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct StatementList {
    /// The running month first (when the tenant is known), then the closed
    /// ones, newest first.
    pub statements: Vec<Statement>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct StatementResponse {
    pub statement: Statement,
}

/// A price of the price list: per unit and hour, for a provider (`*`:
/// every provider without its own), from a time on. A VM's price is its
/// host's quote, shown on the VM and in quotes, not here.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PriceEntry {
    pub meter: Meter,
    #[schema(example = "*")]
    pub provider: String,
    /// `hour` or `GB-hour`.
    pub unit: String,
    #[schema(example = "0.00006")]
    pub unit_price: String,
    #[schema(example = "EUR")]
    pub currency: String,
    pub effective_from: DateTime<Utc>,
    /// When the next price takes over; null: in force until further notice.
    #[serde(default)]
    #[schema(required = true)]
    pub until: Option<DateTime<Utc>>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PriceList {
    /// By meter and provider, then time.
    pub prices: Vec<PriceEntry>,
}

/// `POST /v1/admin/prices`: a new price from `effective_from` on (never in
/// the past: what was billed keeps its prices).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PriceCreateRequest {
    /// `volume`, `cluster`, `image` or `backup` (a VM's price is its host's).
    #[schema(example = "volume")]
    pub meter: String,
    /// A provider's name, or `*` (the default) for every provider without
    /// its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(example = "*")]
    pub provider: Option<String>,
    /// Per unit and hour, a decimal string or number, at least 0.
    #[schema(value_type = String, example = "0.00007")]
    pub unit_price: serde_json::Value,
    /// Three capital letters.
    #[schema(example = "EUR")]
    pub currency: String,
    /// Absent: now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effective_from: Option<DateTime<Utc>>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PriceResponse {
    pub price: PriceEntry,
}
