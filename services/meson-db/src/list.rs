//! Lists: which of a tenant's live rows pass a filter, one page of them in
//! order, and how many pass in all. Every resource list (VMs, clusters,
//! networks, volumes) is written here once; a resource names its table and
//! how its rows are read ([`Source`]).
//!
//! The page is found first, as ids in order, then its rows are read: the
//! filter's conditions and the order are written into the SQL only when
//! given, so the planner sees plain `order by x.id` (or `x.name`, …) and
//! finds a page with an index scan however deep it is.

use crate::DbResult;
use meson_core::quota::Resources;
use meson_core::{Error, TenantId};
use sqlx::postgres::PgRow;
use sqlx::{PgPool, Postgres, QueryBuilder};
use std::future::Future;

/// Which resources a list returns and in what order.
#[derive(Clone, Debug, Default)]
pub struct ListFilter {
    pub name: Option<String>,
    pub statuses: Vec<String>,
    /// Label selector requirements (`meson_core::selector`).
    pub selector: Vec<meson_core::selector::Requirement>,
    /// Up to two sort keys, `field:asc|desc` with field id|name|status|created.
    pub sort: Vec<String>,
}

/// What a list keeps of a tenant's live rows, as SQL conditions on the row
/// `x`, and in what order.
pub(crate) trait Filter {
    /// Appends ` and …` for each condition it sets.
    fn push_conditions(&self, qb: &mut QueryBuilder<'_, Postgres>) -> Result<(), Error>;
    /// Whether it lets every live resource of the tenant through.
    fn matches_all(&self) -> bool;
    /// Its sort keys (`field:asc|desc`), before the id that ends every order.
    fn sort(&self) -> &[String] {
        &[]
    }
}

impl Filter for ListFilter {
    fn push_conditions(&self, qb: &mut QueryBuilder<'_, Postgres>) -> Result<(), Error> {
        if let Some(name) = &self.name {
            qb.push(" and x.name = ").push_bind(name.clone());
        }
        if !self.statuses.is_empty() {
            qb.push(" and x.status = any(")
                .push_bind(self.statuses.clone())
                .push(")");
        }
        if !self.selector.is_empty() {
            let selector = serde_json::to_value(&self.selector)
                .map_err(|e| Error::internal_from("selector", e))?;
            qb.push(" and meson_selector_matches(x.labels, ")
                .push_bind(selector)
                .push("::jsonb)");
        }
        Ok(())
    }

    fn matches_all(&self) -> bool {
        self.name.is_none() && self.statuses.is_empty() && self.selector.is_empty()
    }

    fn sort(&self) -> &[String] {
        &self.sort
    }
}

/// A sort key as SQL on `x` (`None`: not a key lists know).
fn sort_sql(key: &str) -> Option<&'static str> {
    Some(match key {
        "id:asc" => "x.id asc",
        "id:desc" => "x.id desc",
        "name:asc" => "x.name asc",
        "name:desc" => "x.name desc",
        "status:asc" => "x.status asc",
        "status:desc" => "x.status desc",
        "created:asc" => "x.created_at asc",
        "created:desc" => "x.created_at desc",
        _ => return None,
    })
}

/// The `order by` of a list: its keys, then the id (unique, so pages are
/// stable under inserts) unless a key sorts by it already.
fn order_by(sort: &[String]) -> String {
    let mut keys: Vec<&str> = sort.iter().filter_map(|k| sort_sql(k)).collect();
    if !keys.iter().any(|k| k.starts_with("x.id ")) {
        keys.push("x.id");
    }
    keys.join(", ")
}

/// A table lists draw from and how a page of it is read.
pub(crate) struct Source {
    /// The table, aliased `x` in the conditions.
    pub table: &'static str,
    /// More that a listed row must be (after a live row of the tenant),
    /// as SQL on `x`; empty for nothing more.
    pub only: &'static str,
    /// The columns of a row, read from the page (`page.id`, `page.ord`)
    /// and whatever `joins` names.
    pub columns: &'static str,
    /// Joins from `page` to the rows (and what else `columns` reads).
    pub joins: &'static str,
    /// Where the kept usage has the total of an unfiltered list.
    pub usage: Option<fn(&Resources) -> i64>,
    pub listing: &'static str,
    pub counting: &'static str,
}

impl Source {
    /// Appends `from <table> x where …`: the tenant's live rows that pass `filter`.
    fn push_matching(
        &self,
        qb: &mut QueryBuilder<'_, Postgres>,
        tenant: &TenantId,
        filter: &impl Filter,
    ) -> Result<(), Error> {
        qb.push(format_args!(" from {} x where x.tenant_id = ", self.table))
            .push_bind(tenant.as_str().to_owned())
            .push(" and x.deleted_at is null");
        if !self.only.is_empty() {
            qb.push(" and ").push(self.only);
        }
        filter.push_conditions(qb)
    }

    /// One page of the tenant's rows that pass `filter`, in its order, read
    /// as rows `R` made into `T`, and how many pass in all.
    pub async fn page<R, T>(
        &self,
        pool: &PgPool,
        tenant: &TenantId,
        filter: &impl Filter,
        limit: i64,
        offset: i64,
    ) -> Result<(Vec<T>, i64), Error>
    where
        R: for<'r> sqlx::FromRow<'r, PgRow> + Send + Unpin,
        T: TryFrom<R, Error = Error>,
    {
        let mut qb = QueryBuilder::new(format!(
            "select {} from unnest(array(select x.id",
            self.columns
        ));
        self.push_matching(&mut qb, tenant, filter)?;
        qb.push(format_args!(" order by {} limit ", order_by(filter.sort())))
            .push_bind(limit)
            .push(" offset ")
            .push_bind(offset)
            .push(format_args!(
                ")) with ordinality as page(id, ord) {} order by page.ord",
                self.joins
            ));
        let rows: Vec<R> = qb
            .build_query_as()
            .fetch_all(pool)
            .await
            .ctx(self.listing)?;
        let total = total(rows.len(), limit, offset, async {
            match self.usage {
                Some(usage) if filter.matches_all() => {
                    Ok(usage(&crate::quotas::usage(pool, tenant).await?))
                }
                _ => self.count(pool, tenant, filter).await,
            }
        })
        .await?;
        let page = rows
            .into_iter()
            .map(T::try_from)
            .collect::<Result<Vec<_>, _>>()?;
        Ok((page, total))
    }

    /// How many of the tenant's rows pass `filter`.
    async fn count(
        &self,
        pool: &PgPool,
        tenant: &TenantId,
        filter: &impl Filter,
    ) -> Result<i64, Error> {
        let mut qb = QueryBuilder::new("select count(*)");
        self.push_matching(&mut qb, tenant, filter)?;
        qb.build_query_scalar()
            .fetch_one(pool)
            .await
            .ctx(self.counting)
    }
}

/// The total of a list whose page at `offset` held `rows` of at most
/// `limit`: a page that is neither full nor past the end tells it; else
/// `count` is asked.
async fn total(
    rows: usize,
    limit: i64,
    offset: i64,
    count: impl Future<Output = Result<i64, Error>>,
) -> Result<i64, Error> {
    let rows = rows as i64;
    if rows < limit && (rows > 0 || offset == 0) {
        Ok(offset + rows)
    } else {
        count.await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A count that must not be needed.
    async fn never() -> Result<i64, Error> {
        panic!("the page told the total; no count was needed")
    }

    #[tokio::test]
    async fn a_partial_page_tells_the_total_and_a_full_or_empty_one_asks() {
        // First page, not full; a later page, not full.
        assert_eq!(total(7, 25, 0, never()).await.unwrap(), 7);
        assert_eq!(total(3, 25, 50, never()).await.unwrap(), 53);
        // Nothing at all.
        assert_eq!(total(0, 25, 0, never()).await.unwrap(), 0);
        // A full page may have more behind it; past the end knows nothing.
        assert_eq!(total(25, 25, 0, async { Ok(40) }).await.unwrap(), 40);
        assert_eq!(total(0, 25, 100, async { Ok(40) }).await.unwrap(), 40);
    }

    fn keys(k: &[&str]) -> Vec<String> {
        k.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_order_ends_with_the_id_once() {
        assert_eq!(order_by(&[]), "x.id");
        assert_eq!(
            order_by(&keys(&["status:desc", "created:asc"])),
            "x.status desc, x.created_at asc, x.id"
        );
        assert_eq!(order_by(&keys(&["id:desc"])), "x.id desc");
        assert_eq!(
            order_by(&keys(&["id:asc", "name:asc"])),
            "x.id asc, x.name asc"
        );
        // What it does not know it leaves out.
        assert_eq!(
            order_by(&keys(&["size:asc", "name:desc"])),
            "x.name desc, x.id"
        );
    }
}
