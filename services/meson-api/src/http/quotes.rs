//! `POST /v1/quotes`.

use super::{AppState, JsonBody};
use crate::auth::Principal;
use crate::error::{ApiError, ApiResult};
use crate::views;
use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use meson_core::Error;
use meson_types::quote as wire;
use meson_workflows::placement::Offer;

pub fn routes() -> Router<AppState> {
    Router::new().route("/v1/quotes", post(quote))
}

async fn quote(
    State(s): State<AppState>,
    p: Principal,
    JsonBody(body): JsonBody,
) -> ApiResult<Json<wire::QuoteResponse>> {
    let q = s.app.vm_quote(&p, &body).await?;
    let quotes: Vec<wire::Quote> = q.offers.iter().map(view).collect();
    let cheapest = quotes
        .first()
        .cloned()
        .ok_or_else(|| ApiError(Error::internal("a survey returned no offers")))?;
    Ok(Json(wire::QuoteResponse {
        quotes,
        cheapest,
        warnings: q.warnings.iter().map(views::warning).collect(),
    }))
}

fn view(o: &Offer) -> wire::Quote {
    let p = &o.placement;
    wire::Quote {
        provider: p.provider.clone(),
        region: p.region.clone(),
        continent: o.continent.clone(),
        host: p.host.clone(),
        price: meson_types::Price {
            hourly: p.price_hourly,
            monthly: p.price_monthly,
            currency: p.currency.clone(),
        },
    }
}
