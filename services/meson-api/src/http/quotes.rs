//! `POST /v1/quotes`: a VM or a KaaS payload priced per candidate placement.

use super::{AppState, JsonBody};
use crate::app::Quotes;
use crate::auth::Principal;
use crate::error::{ApiError, ApiResult};
use crate::views;
use axum::Json;
use axum::extract::State;
use meson_core::Error;
use meson_types::ErrorResponse;
use meson_types::quote as wire;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(quote))
}

/// Prices a VM payload on every host that can fit it, or a KaaS payload in
/// every region that can host the whole cluster.
#[utoipa::path(
    post,
    path = "/v1/quotes",
    tag = "catalog",
    operation_id = "quote_create",
    summary = "Price a VM or a cluster before creating it",
    description = "Takes a VM payload (with `specs`, validated exactly as `POST /v1/vms` \
        does) or a KaaS payload (with `req`); a body with neither is `invalid_input` naming \
        `(body)`. A VM is priced on every enabled host that meets its `provider`, \
        `continent` and `region` (`QuoteResponse`). A cluster is priced per region, since \
        its nodes share one private network: the control plane and each pool on the \
        cheapest host of their node size in that region, with totals at every pool's \
        `desired_nodes` and `max_nodes` (`KaasQuoteResponse`). Creates nothing.",
    request_body(content = wire::QuoteRequest, content_type = "application/json",
        example = json!(meson_types::kaas::kaas_create_example())),
    responses(
        (status = 200, description = "A VM payload: every host that can fit the VM, \
            cheapest first. A KaaS payload: every region that can host the cluster, \
            cheapest first.", body = wire::QuoteAnswer),
        (status = 400, description = "Invalid input (`invalid_input`, every rejected field \
            named in `details.fields`), malformed JSON (`json_error`) or a bad \
            `Idempotency-Key`.", body = ErrorResponse),
        (status = 503, description = "No host can fit the VM, or some pool of the cluster \
            fits nowhere, or no single region fits every pool (`resource_unavailable`, the \
            message says why), or no host answered in time (`service_error`).",
            body = ErrorResponse),
    ),
)]
async fn quote(
    State(s): State<AppState>,
    p: Principal,
    JsonBody(body): JsonBody,
) -> ApiResult<Json<wire::QuoteAnswer>> {
    match s.app.quote(&p, &body).await? {
        Quotes::Vm(q) => {
            let quotes: Vec<wire::Quote> = q.offers.iter().map(views::quote).collect();
            let cheapest = quotes
                .first()
                .cloned()
                .ok_or_else(|| ApiError(Error::internal("a survey returned no offers")))?;
            Ok(Json(wire::QuoteAnswer::Vm(wire::QuoteResponse {
                quotes,
                cheapest,
                warnings: q.warnings.iter().map(views::warning).collect(),
            })))
        }
        Quotes::Kaas(q) => {
            let placements: Vec<wire::ClusterQuote> =
                q.offers.iter().map(views::cluster_quote).collect();
            let cheapest = placements
                .first()
                .cloned()
                .ok_or_else(|| ApiError(Error::internal("a cluster survey returned no offers")))?;
            Ok(Json(wire::QuoteAnswer::Kaas(wire::KaasQuoteResponse {
                placements,
                cheapest,
                warnings: q.warnings.iter().map(views::warning).collect(),
            })))
        }
    }
}
