//! List metadata and response warnings.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Meta {
    pub pagination: Pagination,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Pagination {
    #[schema(minimum = 1)]
    pub page: u32,
    #[schema(minimum = 1, maximum = 50)]
    pub per_page: u32,
    /// `null` on the first page.
    #[schema(required = true, minimum = 1)]
    pub previous_page: Option<u32>,
    /// `null` on the last page.
    #[schema(required = true, minimum = 2)]
    pub next_page: Option<u32>,
    #[schema(required = true, minimum = 1)]
    pub last_page: Option<u32>,
    #[schema(required = true)]
    pub total_entries: Option<u64>,
}

/// A non-fatal remark about the request (an unknown field that was ignored).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Warning {
    pub field: String,
    pub message: String,
}
