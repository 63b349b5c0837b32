//! List metadata and response warnings.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Meta {
    pub pagination: Pagination,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Pagination {
    pub page: u32,
    pub per_page: u32,
    pub previous_page: Option<u32>,
    pub next_page: Option<u32>,
    pub last_page: Option<u32>,
    pub total_entries: Option<u64>,
}

/// A non-fatal remark about the request (an unknown field that was ignored).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Warning {
    pub field: String,
    pub message: String,
}
