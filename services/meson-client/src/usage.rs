//! Metering: usage and cost, monthly statements and the price list.

use super::*;
use meson_types::usage::{
    PriceCreateRequest, PriceEntry, PriceList, PriceResponse, Statement, StatementList,
    StatementResponse, Usage,
};

/// Which usage `GET /v1/usage` answers; every field optional.
#[derive(Clone, Debug, Default)]
pub struct UsageQuery {
    /// Default: the start of this month (UTC).
    pub from: Option<chrono::DateTime<chrono::Utc>>,
    /// Default: now.
    pub to: Option<chrono::DateTime<chrono::Utc>>,
    /// `resource` (default), `day`, `tenant` or `label:<key>`.
    pub group_by: Option<String>,
    /// Operators: whose usage (default: every tenant's).
    pub tenant: Option<String>,
}

impl UsageQuery {
    fn path(&self, csv: bool) -> Result<String> {
        let mut q: Vec<(&str, String)> = Vec::new();
        if let Some(t) = self.from {
            q.push((
                "from",
                t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true),
            ));
        }
        if let Some(t) = self.to {
            q.push(("to", t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)));
        }
        if let Some(g) = &self.group_by {
            q.push(("group_by", g.clone()));
        }
        if let Some(t) = &self.tenant {
            q.push(("tenant", t.clone()));
        }
        if csv {
            q.push(("format", "csv".into()));
        }
        with_query("/v1/usage", &q)
    }
}

fn with_query(path: &str, q: &[(&str, String)]) -> Result<String> {
    let query = serde_urlencoded::to_string(q).map_err(|e| Error::Config(e.to_string()))?;
    Ok(if query.is_empty() {
        path.to_owned()
    } else {
        format!("{path}?{query}")
    })
}

impl Client {
    /// `GET /v1/usage`: usage and cost, grouped, with totals per currency.
    pub async fn usage(&self, q: &UsageQuery) -> Result<Usage> {
        self.get(&q.path(false)?).await
    }

    /// The same usage as CSV (a header row, then a row per line).
    pub async fn usage_csv(&self, q: &UsageQuery) -> Result<String> {
        self.get_text(&q.path(true)?).await
    }

    /// The running month (`current`), then the closed statements, newest
    /// first, without their lines; an operator names the tenant or reads
    /// every tenant's closed ones.
    pub async fn statement_list(&self, tenant: Option<&str>) -> Result<Vec<Statement>> {
        let q: Vec<(&str, String)> = tenant
            .map(|t| ("tenant", t.to_owned()))
            .into_iter()
            .collect();
        let r: StatementList = self.get(&with_query("/v1/statements", &q)?).await?;
        Ok(r.statements)
    }

    /// A statement with its lines, by id or `current`.
    pub async fn statement_get(&self, id: &str, tenant: Option<&str>) -> Result<Statement> {
        let q: Vec<(&str, String)> = tenant
            .map(|t| ("tenant", t.to_owned()))
            .into_iter()
            .collect();
        let path = with_query(&format!("/v1/statements/{}", path_segment(id)), &q)?;
        let r: StatementResponse = self.get(&path).await?;
        Ok(r.statement)
    }

    /// A statement as CSV, a row per line and a last for the total.
    pub async fn statement_csv(&self, id: &str, tenant: Option<&str>) -> Result<String> {
        let mut q: Vec<(&str, String)> = tenant
            .map(|t| ("tenant", t.to_owned()))
            .into_iter()
            .collect();
        q.push(("format", "csv".into()));
        self.get_text(&with_query(
            &format!("/v1/statements/{}", path_segment(id)),
            &q,
        )?)
        .await
    }

    /// The price list.
    pub async fn price_list(&self) -> Result<Vec<PriceEntry>> {
        let r: PriceList = self.get("/v1/prices").await?;
        Ok(r.prices)
    }

    /// `POST /v1/admin/prices` (operators): a price from now or later on.
    pub async fn price_create(&self, req: &PriceCreateRequest) -> Result<PriceEntry> {
        let r: PriceResponse = self
            .call(Method::POST, "/v1/admin/prices", Some(req))
            .await?;
        Ok(r.price)
    }
}
