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

/// Which page of a list: `page` (from 1) of `per_page` entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Page {
    pub page: u32,
    pub per_page: u32,
}

impl Default for Page {
    fn default() -> Self {
        Page {
            page: 1,
            per_page: Page::DEFAULT_PER_PAGE,
        }
    }
}

impl Page {
    pub const DEFAULT_PER_PAGE: u32 = 25;
    pub const MAX_PER_PAGE: u32 = 50;

    /// How many entries come before this page.
    pub fn offset(&self) -> i64 {
        i64::from(self.page.max(1) - 1) * i64::from(self.per_page)
    }

    pub fn limit(&self) -> i64 {
        i64::from(self.per_page)
    }

    /// `meta.pagination` of this page in a list of `total` entries.
    pub fn pagination(&self, total: u64) -> Pagination {
        let last = total.div_ceil(u64::from(self.per_page.max(1))).max(1) as u32;
        Pagination {
            page: self.page,
            per_page: self.per_page,
            previous_page: (self.page > 1).then(|| self.page - 1),
            next_page: (self.page < last).then(|| self.page + 1),
            last_page: Some(last),
            total_entries: Some(total),
        }
    }
}

/// A non-fatal remark about the request (an unknown field that was ignored).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Warning {
    pub field: String,
    pub message: String,
}

#[cfg(test)]
mod tests {
    use super::Page;

    #[test]
    fn a_page_knows_its_neighbours() {
        let p = Page {
            page: 2,
            per_page: 10,
        };
        assert_eq!(p.offset(), 10);
        let meta = p.pagination(25);
        assert_eq!(
            (meta.previous_page, meta.next_page, meta.last_page),
            (Some(1), Some(3), Some(3))
        );
        let first = Page::default().pagination(0);
        assert_eq!(
            (first.previous_page, first.next_page, first.last_page),
            (None, None, Some(1))
        );
    }
}
