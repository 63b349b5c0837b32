//! The daemons' JSON, field for field: serde structs with the wire names and no logic.
//!
//! Inputs are lenient (`#[serde(default)]`, aliases, untagged alternatives)
//! because the public material disagrees on several shapes (docs/atomos.md);
//! outputs are the form the real GUI sends. The simulator reuses these types,
//! so both ends of our tests speak exactly this schema.

pub mod auth;
pub mod compute;
pub mod network;
pub mod storage;

use serde::{Deserialize, Serialize};

/// FastAPI's error body. `detail` is a string for raised `HTTPException`s and
/// an array of objects for request-validation failures (422), hence `Value`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub detail: serde_json::Value,
}

/// A PCI device as the specfile carries it: an object on the real daemons,
/// a plain string (`"10de:1bb1"`) in the thesis client (docs/atomos.md).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum PciEntry {
    Object(PciObject),
    Text(String),
}

/// `{"vendor": "10de", "model": "1bb1", "quantity": 1}`; ids are hex strings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PciObject {
    #[serde(default)]
    pub vendor: String,
    #[serde(default)]
    pub model: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quantity: Option<u32>,
}

/// A list that some daemons return bare and mocks wrap in an object.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ListOf<T> {
    Bare(Vec<T>),
    Volumes { volumes: Vec<T> },
    Networks { networks: Vec<T> },
}

impl<T> ListOf<T> {
    pub fn into_vec(self) -> Vec<T> {
        match self {
            ListOf::Bare(v) | ListOf::Volumes { volumes: v } | ListOf::Networks { networks: v } => {
                v
            }
        }
    }
}
