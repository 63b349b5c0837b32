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
use meson_core::{Error, TenantId};
use sqlx::postgres::PgRow;
use sqlx::{PgConnection, PgPool, Postgres, QueryBuilder, Row};

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
pub trait Filter {
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

/// A field lists sort by, and the column it reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Field {
    Id,
    Name,
    Status,
    Created,
}

impl Field {
    fn column(self) -> &'static str {
        match self {
            Field::Id => "id",
            Field::Name => "name",
            Field::Status => "status",
            Field::Created => "created_at",
        }
    }
}

/// One key of a list's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Key {
    field: Field,
    descending: bool,
}

impl Key {
    /// `field:asc|desc` (`None`: not a key lists know).
    fn parse(key: &str) -> Option<Key> {
        let (field, dir) = key.split_once(':')?;
        let field = match field {
            "id" => Field::Id,
            "name" => Field::Name,
            "status" => Field::Status,
            "created" => Field::Created,
            _ => return None,
        };
        let descending = match dir {
            "asc" => false,
            "desc" => true,
            _ => return None,
        };
        Some(Key { field, descending })
    }

    fn dir(self) -> &'static str {
        if self.descending { "desc" } else { "asc" }
    }
}

/// The order of a list: its keys, then the id (unique, so the order is
/// total and pages are stable under inserts) unless a key sorts by it
/// already; keys after the id could not change the order and are dropped.
fn order_keys(sort: &[String]) -> Vec<Key> {
    let mut keys = Vec::with_capacity(sort.len() + 1);
    for key in sort.iter().filter_map(|k| Key::parse(k)) {
        keys.push(key);
        if key.field == Field::Id {
            return keys;
        }
    }
    keys.push(Key {
        field: Field::Id,
        descending: false,
    });
    keys
}

/// The keys as an `order by` on `alias`.
fn order_by(keys: &[Key], alias: &str) -> String {
    keys.iter()
        .map(|k| format!("{alias}.{} {}", k.field.column(), k.dir()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Where a page of a list starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Start {
    /// After this many rows.
    Offset(i64),
    /// After the row whose order keys are these ([`Listed::more`] of the
    /// page before): wherever that row now is, or would be if it is gone.
    After(Vec<String>),
}

/// A page of a list.
#[derive(Clone, Debug, PartialEq)]
pub struct Listed<T> {
    pub items: Vec<T>,
    /// How many rows pass the filter in all.
    pub total: i64,
    /// When rows follow the page: the order keys of its last row (then its
    /// id), where the next page starts ([`Start::After`]).
    pub more: Option<Vec<String>>,
}

/// A key's value as bound to a query, read from its text in a [`Start`].
#[derive(Clone)]
enum Value {
    Id(uuid::Uuid),
    Text(String),
    Time(chrono::DateTime<chrono::Utc>),
}

/// A resource a tenant lists: the rows it is read from and how they are
/// filtered. [`page`] reads a page of any of them.
pub trait Listable: TryFrom<Self::Row, Error = Error> + Send {
    /// A row as the page's statement returns it.
    type Row: for<'r> sqlx::FromRow<'r, PgRow> + Send + Unpin;
    /// What narrows and orders the list.
    type Filter: Filter + Sync;
    /// Where the rows are read from.
    const SOURCE: Source;
}

/// A page of at most `limit` of a tenant's `T`s that pass `filter`, from
/// `start`, on `conn`; how many pass in all; and where the next page starts
/// (see [`Source::page`]). The order always ends with the id, so pages are
/// stable under inserts, and from a cursor a page costs what the first does
/// however deep it is.
pub async fn page<T: Listable>(
    conn: &mut PgConnection,
    tenant: &TenantId,
    filter: &T::Filter,
    start: &Start,
    limit: i64,
) -> Result<Listed<T>, Error> {
    T::SOURCE
        .page::<T::Row, T>(conn, tenant, filter, start, limit)
        .await
}

/// [`page`] from `offset`, on a connection of `pool`: the page's items and
/// the total.
pub async fn page_at<T: Listable>(
    pool: &PgPool,
    tenant: &TenantId,
    filter: &T::Filter,
    limit: i64,
    offset: i64,
) -> Result<(Vec<T>, i64), Error> {
    T::SOURCE
        .page_at::<T::Row, T>(pool, tenant, filter, limit, offset)
        .await
}

/// What a rename and/or relabel of a `T` reports.
#[derive(Clone, Copy, Debug)]
pub struct Renamed {
    /// The resource's kind, in a `not_found` or `uniqueness_error`.
    pub kind: &'static str,
    /// The unique index that holds a live name once in a tenant, if any.
    pub name_index: Option<&'static str>,
    pub context: &'static str,
    /// A condition on the row (`x`) beyond its list's, or `""`: a volume
    /// is renamed only while no VM owns it.
    pub also: &'static str,
}

/// Renames and/or relabels the tenant's live `T` `id`, a row its list
/// would show (`None` keeps a field; labels replace the labels). A name
/// taken is a `uniqueness_error` on `name`; no such row, `not_found`.
pub async fn rename<T: Listable>(
    pool: &PgPool,
    tenant: &TenantId,
    id: uuid::Uuid,
    name: Option<&str>,
    labels: Option<&meson_core::labels::Labels>,
    how: Renamed,
) -> Result<(), Error> {
    let labels = crate::labels_json(labels)?;
    let source = T::SOURCE;
    let mut qb =
        QueryBuilder::<Postgres>::new(format!("update {} x set name = coalesce(", source.table));
    qb.push_bind(name.map(str::to_owned))
        .push(", x.name), labels = coalesce(")
        .push_bind(labels)
        .push(", x.labels) where x.id = ")
        .push_bind(id)
        .push(" and x.tenant_id = ")
        .push_bind(tenant.as_str().to_owned())
        .push(" and x.deleted_at is null");
    for condition in [source.only, how.also] {
        if !condition.is_empty() {
            qb.push(" and ").push(condition);
        }
    }
    let res = qb.build().execute(pool).await;
    let res = match how.name_index {
        Some(index) => crate::unique_violation(res, index, how.kind, "name")?,
        None => res,
    };
    crate::updated(res, how.kind, id, how.context)
}

/// The error of a cursor that is not one of the list's: a list's
/// `cursor` parameter, refused by name.
pub fn bad_cursor() -> Error {
    Error::invalid(
        "cursor",
        "is not a cursor of this list: pass back a next_cursor as it was given",
    )
}

impl Value {
    fn parse(field: Field, text: &str) -> Result<Value, Error> {
        Ok(match field {
            Field::Id => Value::Id(text.parse().map_err(|_| bad_cursor())?),
            Field::Name | Field::Status => Value::Text(text.to_owned()),
            Field::Created => Value::Time(
                chrono::DateTime::parse_from_rfc3339(text)
                    .map_err(|_| bad_cursor())?
                    .with_timezone(&chrono::Utc),
            ),
        })
    }

    /// The value of `field` in a row, as a [`Start::After`] names it.
    fn read(row: &PgRow, field: Field, column: &str) -> Result<String, sqlx::Error> {
        Ok(match field {
            Field::Id => row.try_get::<uuid::Uuid, _>(column)?.to_string(),
            Field::Name | Field::Status => row.try_get::<String, _>(column)?,
            Field::Created => row
                .try_get::<chrono::DateTime<chrono::Utc>, _>(column)?
                .to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
        })
    }

    fn push(&self, qb: &mut QueryBuilder<'_, Postgres>) {
        match self.clone() {
            Value::Id(v) => qb.push_bind(v),
            Value::Text(v) => qb.push_bind(v),
            Value::Time(v) => qb.push_bind(v),
        };
    }
}

/// Appends ` and …`: the rows after the one whose keys are `after`, in the
/// order of `keys`. With one direction that is a row comparison, which an
/// index on the keys serves as its start; with mixed ones, the first key's
/// bound (which an index can use) and the comparison spelled out:
/// `k1 > v1 or (k1 = v1 and (k2 > v2 or (k2 = v2 and …)))`.
fn push_after(
    qb: &mut QueryBuilder<'_, Postgres>,
    keys: &[Key],
    after: &[String],
) -> Result<(), Error> {
    if after.len() != keys.len() {
        return Err(bad_cursor());
    }
    let values = keys
        .iter()
        .zip(after)
        .map(|(k, v)| Value::parse(k.field, v))
        .collect::<Result<Vec<_>, _>>()?;
    let op = |k: &Key| if k.descending { " < " } else { " > " };
    let col = |k: &Key| format!("x.{}", k.field.column());
    if keys.iter().all(|k| k.descending == keys[0].descending) {
        let cols: Vec<String> = keys.iter().map(col).collect();
        qb.push(format_args!(" and ({}){}(", cols.join(", "), op(&keys[0])));
        for (i, v) in values.iter().enumerate() {
            if i > 0 {
                qb.push(", ");
            }
            v.push(qb);
        }
        qb.push(")");
        return Ok(());
    }
    let first = &keys[0];
    qb.push(format_args!(
        " and {}{}",
        col(first),
        if first.descending { " <= " } else { " >= " }
    ));
    values[0].push(qb);
    qb.push(" and ");
    let n = keys.len();
    for (i, (k, v)) in keys.iter().zip(&values).enumerate() {
        qb.push(format_args!("({}{}", col(k), op(k)));
        v.push(qb);
        if i + 1 < n {
            qb.push(format_args!(" or ({} = ", col(k)));
            v.push(qb);
            qb.push(" and ");
        }
    }
    qb.push(")".repeat(2 * n - 1));
    Ok(())
}

/// A table lists draw from and how a page of it is read.
pub struct Source {
    /// The table, aliased `x` in the conditions.
    pub table: &'static str,
    /// More that a listed row must be (after a live row of the tenant),
    /// as SQL on `x`; empty for nothing more.
    pub only: &'static str,
    /// The columns of a row, read from the page (`page.id`) and whatever
    /// `joins` names.
    pub columns: &'static str,
    /// Joins from `page` to the rows (and what else `columns` reads).
    pub joins: &'static str,
    /// The column of `tenant_usage` that has the total of an unfiltered list.
    pub usage: Option<&'static str>,
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

    /// One page of at most `limit` of the tenant's rows that pass `filter`,
    /// in its order, from `start`, read as rows `R` made into `T`; how many
    /// pass in all; and where the next page starts.
    ///
    /// One statement on `conn` does it when it can: the page's ids are found
    /// first (with an index scan in the default order, from the cursor's key
    /// rather than past `offset` rows when a cursor names the start), then
    /// its rows are read, with the kept usage as the total of an unfiltered
    /// list. A count follows only for a filtered list whose page cannot tell
    /// its total.
    pub async fn page<R, T>(
        &self,
        conn: &mut PgConnection,
        tenant: &TenantId,
        filter: &impl Filter,
        start: &Start,
        limit: i64,
    ) -> Result<Listed<T>, Error>
    where
        R: for<'r> sqlx::FromRow<'r, PgRow> + Send + Unpin,
        T: TryFrom<R, Error = Error>,
    {
        let keys = order_keys(filter.sort());
        let usage = self.usage.filter(|_| filter.matches_all());
        let mut qb = QueryBuilder::new("with page as materialized (select x.id");
        for (i, k) in keys.iter().enumerate() {
            qb.push(format_args!(", x.{} as list_k{i}", k.field.column()));
        }
        self.push_matching(&mut qb, tenant, filter)?;
        if let Start::After(after) = start {
            push_after(&mut qb, &keys, after)?;
        }
        // One row more than the page tells whether another page follows.
        // The limit is written, not bound: a generic plan would guess a
        // thousand rows for a bound one and join the page by scanning the
        // whole table; a written one keeps the join to the page's rows.
        qb.push(format_args!(
            " order by {} limit {}",
            order_by(&keys, "x"),
            limit.clamp(0, i64::from(u32::MAX)) + 1
        ));
        if let Start::Offset(offset) = start {
            qb.push(" offset ").push_bind(*offset);
        }
        qb.push(format_args!(") select {}", self.columns));
        for i in 0..keys.len() {
            qb.push(format_args!(", page.list_k{i}"));
        }
        if let Some(column) = usage {
            qb.push(format_args!(
                ", (select u.{column} from tenant_usage u where u.tenant_id = "
            ))
            .push_bind(tenant.as_str().to_owned())
            .push(") as list_total");
        }
        let outer: Vec<String> = keys
            .iter()
            .enumerate()
            .map(|(i, k)| format!("page.list_k{i} {}", k.dir()))
            .collect();
        qb.push(format_args!(
            " from page {} order by {}",
            self.joins,
            outer.join(", ")
        ));
        let mut rows: Vec<PgRow> = qb.build().fetch_all(&mut *conn).await.ctx(self.listing)?;
        let more = if rows.len() as i64 > limit {
            rows.truncate(limit.max(0) as usize);
            rows.last()
                .map(|last| {
                    keys.iter()
                        .enumerate()
                        .map(|(i, k)| Value::read(last, k.field, &format!("list_k{i}")))
                        .collect::<Result<Vec<_>, _>>()
                })
                .transpose()
                .ctx(self.listing)?
        } else {
            None
        };
        let kept = match (usage, rows.first()) {
            (Some(_), Some(row)) => Some(
                row.try_get::<Option<i64>, _>("list_total")
                    .ctx(self.listing)?
                    .unwrap_or(0),
            ),
            _ => None,
        };
        let told = match start {
            Start::Offset(offset) => told(rows.len(), more.is_some(), *offset),
            Start::After(_) => None,
        };
        let total = match told.or(kept) {
            Some(total) => total,
            None => match usage {
                Some(column) => self.kept_total(conn, tenant, column).await?,
                None => self.count(conn, tenant, filter).await?,
            },
        };
        let items = rows
            .iter()
            .map(|row| R::from_row(row).ctx(self.listing).and_then(T::try_from))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Listed { items, total, more })
    }

    /// The total of an unfiltered list from the kept usage.
    async fn kept_total(
        &self,
        conn: &mut PgConnection,
        tenant: &TenantId,
        column: &str,
    ) -> Result<i64, Error> {
        let mut qb = QueryBuilder::new(format!(
            "select coalesce((select u.{column} from tenant_usage u where u.tenant_id = "
        ));
        qb.push_bind(tenant.as_str().to_owned()).push("), 0)");
        qb.build_query_scalar()
            .fetch_one(conn)
            .await
            .ctx(self.counting)
    }

    /// How many of the tenant's rows pass `filter`.
    async fn count(
        &self,
        conn: &mut PgConnection,
        tenant: &TenantId,
        filter: &impl Filter,
    ) -> Result<i64, Error> {
        let mut qb = QueryBuilder::new("select count(*)");
        self.push_matching(&mut qb, tenant, filter)?;
        qb.build_query_scalar()
            .fetch_one(conn)
            .await
            .ctx(self.counting)
    }

    /// [`Source::page`] from `offset`, on a connection of `pool`: the page's
    /// items and the total.
    pub async fn page_at<R, T>(
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
        let mut conn = crate::acquire(pool).await?;
        let page = self
            .page::<R, T>(&mut conn, tenant, filter, &Start::Offset(offset), limit)
            .await?;
        Ok((page.items, page.total))
    }
}

/// The total a page from `offset` tells by itself: with `rows` and no more
/// after them, all there is, unless it is empty past the start (then
/// nothing says how far the list reaches).
fn told(rows: usize, more: bool, offset: i64) -> Option<i64> {
    let rows = rows as i64;
    (!more && (rows > 0 || offset == 0)).then_some(offset + rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_that_ends_the_list_tells_the_total() {
        // First page, not full; a later page, not full; a full last page.
        assert_eq!(told(7, false, 0), Some(7));
        assert_eq!(told(3, false, 50), Some(53));
        assert_eq!(told(25, false, 25), Some(50));
        // Nothing at all.
        assert_eq!(told(0, false, 0), Some(0));
        // More behind the page, or past the end: it cannot tell.
        assert_eq!(told(25, true, 0), None);
        assert_eq!(told(0, false, 100), None);
    }

    fn keys(k: &[&str]) -> Vec<Key> {
        order_keys(&k.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn the_order_ends_with_the_id_once() {
        assert_eq!(order_by(&keys(&[]), "x"), "x.id asc");
        assert_eq!(
            order_by(&keys(&["status:desc", "created:asc"]), "x"),
            "x.status desc, x.created_at asc, x.id asc"
        );
        assert_eq!(order_by(&keys(&["id:desc"]), "x"), "x.id desc");
        // Nothing after the id could change the order.
        assert_eq!(order_by(&keys(&["id:asc", "name:asc"]), "x"), "x.id asc");
        // What it does not know it leaves out.
        assert_eq!(
            order_by(&keys(&["size:asc", "name:desc"]), "page"),
            "page.name desc, page.id asc"
        );
    }

    fn after(k: &[&str], values: &[&str]) -> Result<String, Error> {
        let mut qb = QueryBuilder::new("");
        let values: Vec<String> = values.iter().map(|v| v.to_string()).collect();
        push_after(&mut qb, &keys(k), &values)?;
        Ok(qb.sql().to_owned())
    }

    const ID: &str = "0196b5c4-54a1-7c3e-8a2b-1f2e3d4c5b6a";

    #[test]
    fn the_rows_after_a_cursor() {
        assert_eq!(after(&[], &[ID]).unwrap(), " and (x.id) > ($1)");
        assert_eq!(
            after(&["name:asc"], &["web", ID]).unwrap(),
            " and (x.name, x.id) > ($1, $2)"
        );
        assert_eq!(after(&["id:desc"], &[ID]).unwrap(), " and (x.id) < ($1)");
        // Mixed directions (the id that ends the order ascends): spelled
        // out, behind the first key's bound.
        assert_eq!(
            after(&["name:desc"], &["web", ID]).unwrap(),
            " and x.name <= $1 and (x.name < $2 or (x.name = $3 and (x.id > $4)))"
        );
        assert_eq!(
            after(
                &["status:desc", "created:asc"],
                &["running", "2026-11-25T21:00:00.123456Z", ID]
            )
            .unwrap(),
            " and x.status <= $1 and (x.status < $2 or (x.status = $3 and \
             (x.created_at > $4 or (x.created_at = $5 and (x.id > $6)))))"
        );
    }

    #[test]
    fn a_cursor_that_does_not_fit_the_order_is_refused_by_name() {
        let field = |r: Result<String, Error>| match r {
            Err(Error::InvalidInput { fields }) => fields[0].name.clone(),
            other => panic!("expected invalid_input, got {other:?}"),
        };
        // Too few or too many keys, or keys of the wrong type.
        assert_eq!(field(after(&["name:asc"], &[ID])), "cursor");
        assert_eq!(field(after(&[], &[ID, ID])), "cursor");
        assert_eq!(field(after(&[], &["not-an-id"])), "cursor");
        assert_eq!(field(after(&["created:asc"], &["yesterday", ID])), "cursor");
    }
}
