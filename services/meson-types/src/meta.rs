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
    /// Where the next page starts, for `cursor=` (opaque). Unlike `page=`, a
    /// cursor costs the same however deep the page is, and rows inserted or
    /// deleted meanwhile neither repeat nor skip the rows that stay. Absent
    /// on the last page, and from lists that page by number only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub next_cursor: Option<String>,
}

/// Which page of a list: `page` (from 1) of `per_page` entries, or the
/// `per_page` entries after `cursor` (a list's `next_cursor`). With a
/// cursor, `page` is the number of the page the cursor leads to, as counted
/// while walking.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Page {
    pub page: u32,
    pub per_page: u32,
    pub cursor: Option<String>,
}

impl Default for Page {
    fn default() -> Self {
        Page {
            page: 1,
            per_page: Page::DEFAULT_PER_PAGE,
            cursor: None,
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

    /// The `per_page` entries after `cursor`.
    pub fn after(cursor: impl Into<String>, per_page: u32) -> Page {
        Page {
            page: 1,
            per_page,
            cursor: Some(cursor.into()),
        }
    }

    /// This page's query parameters: `page` or `cursor`, and `per_page`.
    pub fn query(&self) -> Vec<(&'static str, String)> {
        let mut q = Vec::with_capacity(2);
        match &self.cursor {
            Some(c) => q.push(("cursor", c.clone())),
            None => q.push(("page", self.page.to_string())),
        }
        q.push(("per_page", self.per_page.to_string()));
        q
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
            next_cursor: None,
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
            cursor: None,
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
