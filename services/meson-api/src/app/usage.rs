//! Metering: a tenant's usage and cost, its monthly statements, and the
//! price list (`meson_db::usage`). A tenant reads its own; an operator
//! reads any tenant's, or every tenant's at once.

use super::App;
use crate::auth::{Principal, Role};
use chrono::{DateTime, Utc};
use meson_core::price::PriceCreate;
use meson_core::{Error, Result};
use meson_db::usage::GroupBy;
use meson_types::usage::{PriceEntry, Statement, Usage};
use serde_json::Value;

/// The longest window a usage query covers.
pub const MAX_SPAN: chrono::TimeDelta = chrono::TimeDelta::days(366);

/// A usage query: the REST query's `from`, `to`, `group_by` and `tenant`
/// (gRPC's alike), each optional.
#[derive(Debug, Default, PartialEq)]
pub struct UsageQuery {
    pub from: Option<DateTime<Utc>>,
    pub to: Option<DateTime<Utc>>,
    pub group_by: Option<GroupBy>,
    /// An operator's choice of tenant (a tenant's own may name itself).
    pub tenant: Option<String>,
}

fn time(field: &str, v: &str) -> Result<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(v.trim())
        .map(|t| t.to_utc())
        .map_err(|_| Error::invalid(field, "must be an RFC 3339 time, like 2026-11-01T00:00:00Z"))
}

impl UsageQuery {
    /// Reads the parameters; a bad one is named.
    pub fn parse(
        from: Option<&str>,
        to: Option<&str>,
        group_by: Option<&str>,
        tenant: Option<&str>,
    ) -> Result<UsageQuery> {
        let group_by = group_by
            .map(|g| {
                GroupBy::parse(g.trim()).ok_or_else(|| {
                    Error::invalid(
                        "group_by",
                        "must be resource, day, tenant or label:<key> (a key of 1 to 63 \
                         characters)",
                    )
                })
            })
            .transpose()?;
        Ok(UsageQuery {
            from: from.map(|v| time("from", v)).transpose()?,
            to: to.map(|v| time("to", v)).transpose()?,
            group_by,
            tenant: tenant.map(str::to_owned).filter(|t| !t.is_empty()),
        })
    }
}

/// Which tenant `p` reads: its own, or for an operator the one it names
/// (`None`: every tenant).
fn tenant_of(p: &Principal, named: Option<&str>) -> Result<Option<String>> {
    let named = named
        .map(|t| super::quotas::parse_tenant(t).map(|t| t.to_string()))
        .transpose()?;
    let named = named.as_deref();
    if p.role >= Role::Admin {
        return Ok(named.map(str::to_owned));
    }
    match named {
        Some(t) if t != p.tenant.as_str() => Err(Error::Forbidden {
            message: "a tenant reads its own usage only".into(),
        }),
        _ => Ok(Some(p.tenant.to_string())),
    }
}

impl App {
    /// Usage and cost within `[from, to)` (default: this month so far),
    /// grouped by resource unless told otherwise.
    pub async fn usage(&self, p: &Principal, q: &UsageQuery) -> Result<Usage> {
        let tenant = tenant_of(p, q.tenant.as_deref())?;
        let group_by = q.group_by.clone().unwrap_or(GroupBy::Resource);
        let run = async {
            let now = meson_db::usage::clock(&self.pool).await?;
            let from = match q.from {
                Some(f) => f,
                None => meson_db::usage::month_of(&self.pool, now).await?,
            };
            let to = q.to.unwrap_or(now);
            if from >= to {
                return Err(Error::invalid("to", "must be after `from`"));
            }
            if to - from > MAX_SPAN {
                return Err(Error::invalid(
                    "to",
                    "a usage query covers at most 366 days",
                ));
            }
            let (lines, totals) =
                meson_db::usage::usage(&self.pool, tenant.as_deref(), from, to, &group_by).await?;
            Ok(Usage {
                from,
                to,
                group_by: group_by.as_string(),
                lines,
                totals,
            })
        };
        if tenant.as_deref() == Some(p.tenant.as_str()) {
            run.await
        } else {
            meson_db::scope::system(run).await
        }
    }

    /// The running month (when a tenant is in view), then the closed
    /// statements, newest first.
    pub async fn statement_list(
        &self,
        p: &Principal,
        named: Option<&str>,
    ) -> Result<Vec<Statement>> {
        let tenant = tenant_of(p, named)?;
        let run = async {
            let mut all = match &tenant {
                Some(t) => meson_db::usage::running(&self.pool, t, false).await?,
                None => Vec::new(),
            };
            all.extend(meson_db::usage::statements(&self.pool, tenant.as_deref()).await?);
            Ok(all)
        };
        if tenant.as_deref() == Some(p.tenant.as_str()) {
            run.await
        } else {
            meson_db::scope::system(run).await
        }
    }

    /// A statement with its lines: a closed one by id, or `current`, the
    /// running month's (in its first currency; an operator's names the
    /// tenant).
    pub async fn statement_get(
        &self,
        p: &Principal,
        id: &str,
        named: Option<&str>,
    ) -> Result<Statement> {
        let tenant = tenant_of(p, named)?;
        let own = tenant.as_deref() == Some(p.tenant.as_str());
        let run = async {
            if id == "current" {
                let Some(t) = &tenant else {
                    return Err(Error::invalid(
                        "tenant",
                        "name the tenant whose running month to read",
                    ));
                };
                return meson_db::usage::running(&self.pool, t, true)
                    .await?
                    .into_iter()
                    .next()
                    .ok_or_else(|| Error::internal("no running statement"));
            }
            let uuid: uuid::Uuid = super::list::id("id", id)?;
            let found = meson_db::usage::statement(&self.pool, uuid).await?;
            // Row-level security hides other tenants' from a tenant; an
            // operator naming a tenant sees that tenant's only.
            found
                .filter(|s| tenant.as_deref().is_none_or(|t| s.tenant == t))
                .ok_or_else(|| Error::not_found("statement", id))
        };
        if own {
            run.await
        } else {
            meson_db::scope::system(run).await
        }
    }

    /// The price list.
    pub async fn price_list(&self) -> Result<Vec<PriceEntry>> {
        meson_db::scope::system(meson_db::usage::prices(&self.pool)).await
    }

    /// Adds a price, from now or a later time (an operator's).
    pub async fn price_create(&self, body: &Value) -> Result<PriceEntry> {
        let new = PriceCreate::parse(body)?;
        meson_db::scope::system(meson_db::usage::price_insert(
            &self.pool,
            new.meter,
            &new.provider,
            &new.unit_price,
            &new.currency,
            new.effective_from,
        ))
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_queries_name_their_bad_parameter() {
        let q = UsageQuery::parse(Some("2026-11-01T00:00:00Z"), None, Some("label:team"), None)
            .unwrap();
        assert_eq!(q.group_by, Some(GroupBy::Label("team".into())));
        for (args, field) in [
            ((Some("yesterday"), None, None), "from"),
            ((None, Some("2026-13-01"), None), "to"),
            ((None, None, Some("label:")), "group_by"),
            ((None, None, Some("week")), "group_by"),
        ] {
            let Err(Error::InvalidInput { fields }) =
                UsageQuery::parse(args.0, args.1, args.2, None)
            else {
                panic!("{args:?} passed")
            };
            assert_eq!(fields[0].name, field);
        }
    }
}
