//! Metering: usage, cost, statements and the price list. The intervals are
//! written by triggers as resources change, and every figure here comes
//! from the database's one definition of cost, `meson_usage_pieces` (the
//! metering migration), so usage, statements and gauges always agree.

use crate::DbResult;
use chrono::{DateTime, Utc};
use meson_core::Error;
use meson_types::usage::{
    Meter, Money, PriceEntry, Statement, StatementLine, StatementStatus, UsageLine,
};
use sqlx::PgPool;
use uuid::Uuid;

/// How a usage query groups its lines (always by tenant and meter too).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GroupBy {
    Resource,
    Day,
    Tenant,
    /// A label's value.
    Label(String),
}

impl GroupBy {
    /// `resource`, `day`, `tenant` or `label:<key>`; `None` otherwise.
    pub fn parse(s: &str) -> Option<GroupBy> {
        match s {
            "resource" => Some(GroupBy::Resource),
            "day" => Some(GroupBy::Day),
            "tenant" => Some(GroupBy::Tenant),
            _ => s
                .strip_prefix("label:")
                .filter(|k| !k.is_empty() && k.len() <= 63 && !k.chars().any(char::is_control))
                .map(|k| GroupBy::Label(k.to_owned())),
        }
    }

    pub fn as_string(&self) -> String {
        match self {
            GroupBy::Resource => "resource".into(),
            GroupBy::Day => "day".into(),
            GroupBy::Tenant => "tenant".into(),
            GroupBy::Label(k) => format!("label:{k}"),
        }
    }

    fn mode(&self) -> &'static str {
        match self {
            GroupBy::Resource => "resource",
            GroupBy::Day => "day",
            GroupBy::Tenant => "tenant",
            GroupBy::Label(_) => "label",
        }
    }
}

fn meter(s: &str) -> Result<Meter, Error> {
    Meter::parse(s).ok_or_else(|| crate::corrupt("meter", s))
}

/// The metering clock (the database's, unless a test froze it).
pub async fn clock(pool: &PgPool) -> Result<DateTime<Utc>, Error> {
    sqlx::query_scalar!(r#"select meson_clock() as "now!""#)
        .fetch_one(pool)
        .await
        .ctx("reading the metering clock")
}

/// The start of the month (UTC) that holds `t`.
pub async fn month_of(pool: &PgPool, t: DateTime<Utc>) -> Result<DateTime<Utc>, Error> {
    sqlx::query_scalar!(r#"select meson_month_of($1) as "m!""#, t)
        .fetch_one(pool)
        .await
        .ctx("finding a month")
}

/// Tenant `tenant`'s usage (every tenant's for `None`) within `[from, to)`,
/// grouped, with the totals per currency.
pub async fn usage(
    pool: &PgPool,
    tenant: Option<&str>,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    group_by: &GroupBy,
) -> Result<(Vec<UsageLine>, Vec<Money>), Error> {
    let label = match group_by {
        GroupBy::Label(k) => Some(k.as_str()),
        _ => None,
    };
    let rows = sqlx::query!(
        r#"with buckets as (
               select greatest(d, $2::timestamptz) as a,
                      least(d + interval '1 day', $3::timestamptz) as b
               from generate_series(date_trunc('day', $2::timestamptz at time zone 'UTC')
                                        at time zone 'UTC',
                                    $3::timestamptz - interval '1 microsecond',
                                    interval '1 day') d
               where $4::text = 'day'
               union all
               select $2::timestamptz, $3::timestamptz where $4::text <> 'day'
           ), pieces as (
               select p.*, to_char(k.a at time zone 'UTC', 'YYYY-MM-DD') as day
               from buckets k, meson_usage_pieces($1, k.a, k.b) p
           )
           select p.tenant_id as "tenant!", p.resource_type as "meter!", p.currency as "currency!",
                  case $4 when 'resource' then p.resource_id::text
                          when 'day' then p.day
                          when 'tenant' then p.tenant_id
                          else p.labels->>$5 end as "group",
                  (array_agg(p.resource_name order by p.ended desc))[1] as "name!",
                  (array_agg(p.cluster_id order by p.ended desc))[1] as "cluster_id",
                  round(sum(p.quantity * extract(epoch from p.ended - p.started) / 3600), 6)::text
                      as "quantity!",
                  round(sum(p.cost), 6)::text as "cost!",
                  round(sum(sum(p.cost)) over (partition by p.currency), 2)::text as "total!"
           from pieces p
           group by 1, 2, 3, 4
           order by 4 nulls last, 1, 2, 3"#,
        tenant,
        from,
        to,
        group_by.mode(),
        label,
    )
    .fetch_all(pool)
    .await
    .ctx("reading usage")?;
    let mut totals: Vec<Money> = Vec::new();
    let mut lines = Vec::with_capacity(rows.len());
    for r in rows {
        if !totals.iter().any(|m| m.currency == r.currency) {
            totals.push(Money {
                currency: r.currency.clone(),
                amount: r.total,
            });
        }
        let m = meter(&r.meter)?;
        let by_resource = *group_by == GroupBy::Resource;
        lines.push(UsageLine {
            tenant: r.tenant,
            meter: m,
            unit: m.unit().to_owned(),
            group: r.group,
            name: by_resource.then_some(r.name),
            cluster_id: r.cluster_id.filter(|_| by_resource),
            quantity: r.quantity,
            cost: r.cost,
            currency: r.currency,
        });
    }
    totals.sort_by(|a, b| a.currency.cmp(&b.currency));
    Ok((lines, totals))
}

/// Writes the statements of every month over for at least `grace`;
/// returns how many months it closed.
pub async fn close_statements(pool: &PgPool, grace: std::time::Duration) -> Result<i32, Error> {
    let grace = sqlx::postgres::types::PgInterval::try_from(grace)
        .map_err(|e| Error::internal(format!("a grace of {grace:?}: {e}")))?;
    sqlx::query_scalar!(r#"select meson_close_statements($1) as "n!""#, grace)
        .fetch_one(pool)
        .await
        .ctx("closing statements")
}

/// The closed statements of `tenant` (every tenant's for `None`), newest
/// first, without their lines.
pub async fn statements(pool: &PgPool, tenant: Option<&str>) -> Result<Vec<Statement>, Error> {
    let rows = sqlx::query_as!(
        StatementRow,
        r#"select id, tenant_id, period_start, period_end, currency, total::text as "total!",
                  closed_at
           from statements where $1::text is null or tenant_id = $1
           order by period_start desc, tenant_id, currency"#,
        tenant
    )
    .fetch_all(pool)
    .await
    .ctx("listing statements")?;
    Ok(rows.into_iter().map(Statement::from).collect())
}

/// A closed statement's row.
struct StatementRow {
    id: Uuid,
    tenant_id: String,
    period_start: DateTime<Utc>,
    period_end: DateTime<Utc>,
    currency: String,
    total: String,
    closed_at: DateTime<Utc>,
}

impl From<StatementRow> for Statement {
    /// Without its lines.
    fn from(r: StatementRow) -> Statement {
        Statement {
            id: r.id.to_string(),
            tenant: r.tenant_id,
            status: StatementStatus::Closed,
            period_start: r.period_start,
            period_end: r.period_end,
            currency: r.currency,
            total: r.total,
            closed: Some(r.closed_at),
            lines: None,
        }
    }
}

/// A closed statement with its lines.
pub async fn statement(pool: &PgPool, id: Uuid) -> Result<Option<Statement>, Error> {
    let Some(r) = sqlx::query_as!(
        StatementRow,
        r#"select id, tenant_id, period_start, period_end, currency, total::text as "total!",
                  closed_at
           from statements where id = $1"#,
        id
    )
    .fetch_optional(pool)
    .await
    .ctx("reading a statement")?
    else {
        return Ok(None);
    };
    let lines = sqlx::query!(
        r#"select resource_type, resource_id, resource_name, cluster_id,
                  round(quantity, 6)::text as "quantity!", round(cost, 6)::text as "cost!"
           from statement_lines where statement_id = $1
           order by resource_type, resource_name, resource_id"#,
        id
    )
    .fetch_all(pool)
    .await
    .ctx("reading a statement's lines")?;
    let lines = lines
        .into_iter()
        .map(|l| {
            let m = meter(&l.resource_type)?;
            Ok(StatementLine {
                meter: m,
                resource_id: l.resource_id,
                resource_name: l.resource_name,
                cluster_id: l.cluster_id,
                unit: m.unit().to_owned(),
                quantity: l.quantity,
                cost: l.cost,
            })
        })
        .collect::<Result<Vec<_>, Error>>()?;
    Ok(Some(Statement {
        lines: Some(lines),
        ..Statement::from(r)
    }))
}

/// The running month of `tenant` so far, as statements (one per currency;
/// one in the price list's currency at 0 when nothing was used yet), with
/// their lines when `with_lines`.
pub async fn running(
    pool: &PgPool,
    tenant: &str,
    with_lines: bool,
) -> Result<Vec<Statement>, Error> {
    let now = clock(pool).await?;
    let start = month_of(pool, now).await?;
    let end = sqlx::query_scalar!(r#"select meson_month_of($1, 1) as "m!""#, now)
        .fetch_one(pool)
        .await
        .ctx("finding a month")?;
    let (lines, totals) = usage(pool, Some(tenant), start, end, &GroupBy::Resource).await?;
    let mut totals = totals;
    if totals.is_empty() {
        let currency = sqlx::query_scalar!(
            r#"select currency as "c!" from prices order by effective_from limit 1"#
        )
        .fetch_optional(pool)
        .await
        .ctx("reading the price list's currency")?
        .unwrap_or_else(|| "EUR".to_owned());
        totals.push(Money {
            currency,
            amount: "0.00".into(),
        });
    }
    Ok(totals
        .into_iter()
        .map(|t| Statement {
            id: "current".into(),
            tenant: tenant.to_owned(),
            status: StatementStatus::Open,
            period_start: start,
            period_end: end,
            lines: with_lines.then(|| {
                lines
                    .iter()
                    .filter(|l| l.currency == t.currency)
                    .filter_map(|l| {
                        Some(StatementLine {
                            meter: l.meter,
                            resource_id: l.group.as_deref()?.parse().ok()?,
                            resource_name: l.name.clone().unwrap_or_default(),
                            cluster_id: l.cluster_id,
                            unit: l.unit.clone(),
                            quantity: l.quantity.clone(),
                            cost: l.cost.clone(),
                        })
                    })
                    .collect()
            }),
            currency: t.currency,
            total: t.amount,
            closed: None,
        })
        .collect())
}

/// Every tenant's cost so far this month, per currency (for the gauges).
pub async fn month_costs(pool: &PgPool) -> Result<Vec<(String, String, f64)>, Error> {
    let rows = sqlx::query!(
        r#"select tenant_id as "tenant!", currency as "currency!",
                  round(sum(cost), 2)::float8 as "cost!"
           from meson_usage_pieces(null, meson_month_of(meson_clock()), meson_clock())
           group by 1, 2"#
    )
    .fetch_all(pool)
    .await
    .ctx("reading this month's costs")?;
    Ok(rows
        .into_iter()
        .map(|r| (r.tenant, r.currency, r.cost))
        .collect())
}

/// The price list: every price, with when it stopped being in force.
pub async fn prices(pool: &PgPool) -> Result<Vec<PriceEntry>, Error> {
    let rows = sqlx::query!(
        r#"select meter as "meter!", provider as "provider!", unit_price::text as "unit_price!",
                  currency as "currency!", effective_from as "effective_from!",
                  nullif(until, 'infinity') as until
           from price_periods order by meter, provider, effective_from"#
    )
    .fetch_all(pool)
    .await
    .ctx("reading the price list")?;
    rows.into_iter()
        .map(|r| {
            let m = meter(&r.meter)?;
            Ok(PriceEntry {
                meter: m,
                provider: r.provider,
                unit: m.unit().to_owned(),
                unit_price: r.unit_price,
                currency: r.currency,
                effective_from: r.effective_from,
                until: r.until,
            })
        })
        .collect()
}

/// Adds a price from `effective_from` on, which must not be before the
/// metering clock (the past keeps its prices). `unit_price` is a decimal.
pub async fn price_insert(
    pool: &PgPool,
    meter: Meter,
    provider: &str,
    unit_price: &str,
    currency: &str,
    effective_from: Option<DateTime<Utc>>,
) -> Result<PriceEntry, Error> {
    let row = sqlx::query!(
        r#"with at as (select coalesce($5, meson_clock()) as t, meson_clock() as now)
           insert into prices (meter, provider, unit_price, currency, effective_from)
           select $1, $2, $3::text::numeric, $4, at.t from at where at.t >= at.now
           on conflict (meter, provider, effective_from) do nothing
           returning effective_from"#,
        meter.as_str(),
        provider,
        unit_price,
        currency,
        effective_from,
    )
    .fetch_optional(pool)
    .await
    .ctx("adding a price")?;
    let Some(row) = row else {
        return Err(Error::Conflict {
            message: "a price takes effect now or later, once per meter, provider and time: \
                      the past keeps its prices"
                .into(),
        });
    };
    prices(pool)
        .await?
        .into_iter()
        .find(|p| {
            p.meter == meter && p.provider == provider && p.effective_from == row.effective_from
        })
        .ok_or_else(|| Error::internal("a price just added is missing"))
}
