//! `/v1/tokens`: API tokens issued by meson.

use super::responses::BadId;
use super::{AppState, JsonBody, parse_id, query_pairs};
use crate::auth::Principal;
use crate::error::ApiResult;
use crate::views;
use axum::Json;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use meson_types::ErrorResponse;
use meson_types::token::{TokenCreateRequest, TokenCreateResponse, TokenList, TokenResponse};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(read, delete))
}

/// The tenant's tokens.
#[utoipa::path(
    get,
    path = "/v1/tokens",
    tag = "tokens",
    operation_id = "token_list",
    summary = "List API tokens",
    description = "The tenant's live tokens, newest first (never their secrets); with \
        `revoked=true` the revoked ones too. Owners only.",
    params(("revoked" = Option<bool>, Query, description = "Also the revoked tokens.")),
    responses(
        (status = 200, description = "The tokens.", body = TokenList),
        (status = 400, description = "A bad query parameter (`invalid_input`).",
            body = ErrorResponse),
        (status = 403, description = "The token's role is not owner (`forbidden`).",
            body = ErrorResponse),
    ),
)]
async fn list(
    State(s): State<AppState>,
    p: Principal,
    RawQuery(q): RawQuery,
) -> ApiResult<Json<TokenList>> {
    let mut revoked = false;
    for (k, v) in query_pairs(q.as_deref())? {
        if k == "revoked" {
            revoked = crate::app::list::query_bool("revoked", &v)?;
        }
    }
    let tokens = s.app.token_list(&p, revoked).await?;
    Ok(Json(TokenList {
        tokens: tokens.iter().map(views::token).collect(),
    }))
}

/// Issues a token.
#[utoipa::path(
    post,
    path = "/v1/tokens",
    tag = "tokens",
    operation_id = "token_create",
    summary = "Create an API token",
    description = "Issues a bearer token (`secret`, shown this once: meson keeps its SHA-256) \
        for the tenant, with `role` at most the caller's. It authenticates every REST and \
        gRPC call as `token:<id>` until it expires or is revoked; each use is checked \
        against the database, so a revoked token is refused at once by every replica. Owners \
        only.",
    request_body(content = TokenCreateRequest, content_type = "application/json",
        example = json!({"name": "ci-deploys", "role": "editor", "expires_in": 7776000})),
    responses(
        (status = 201, description = "The token and its secret.", body = TokenCreateResponse,
            links(("GetToken" = (operation_id = "token_get",
                parameters(("id" = "$response.body#/token/id")))))),
        (status = 400, description = "A bad field (`invalid_input`, every rejected field \
            named in `details.fields`: `role` above the caller's own), or malformed JSON \
            (`json_error`).", body = ErrorResponse),
        (status = 403, description = "The token's role is not owner (`forbidden`).",
            body = ErrorResponse),
        (status = 409, description = "A live token of the tenant has this name \
            (`uniqueness_error`), or the Idempotency-Key was used with another body \
            (`conflict`).", body = ErrorResponse),
    ),
)]
async fn create(
    State(s): State<AppState>,
    p: Principal,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let c = s.app.token_create(&p, &body).await?;
    let res = TokenCreateResponse {
        token: views::token(&c.token),
        secret: c.secret,
        warnings: c.warnings.iter().map(views::warning).collect(),
    };
    Ok((StatusCode::CREATED, Json(res)).into_response())
}

/// Reads a token.
#[utoipa::path(
    get,
    path = "/v1/tokens/{id}",
    tag = "tokens",
    operation_id = "token_get",
    summary = "Get an API token",
    params(("id" = uuid::Uuid, Path, description = "The token's id.")),
    responses(
        (status = 200, description = "The token (never its secret).", body = TokenResponse),
        BadId,
        (status = 403, description = "The token's role is not owner (`forbidden`).",
            body = ErrorResponse),
        (status = 404, description = "No such token for this tenant (`not_found`).",
            body = ErrorResponse),
    ),
)]
async fn read(
    State(s): State<AppState>,
    p: Principal,
    Path(id): Path<String>,
) -> ApiResult<Json<TokenResponse>> {
    let t = s.app.token_get(&p, parse_id(&id)?).await?;
    Ok(Json(TokenResponse {
        token: views::token(&t),
    }))
}

/// Revokes a token.
#[utoipa::path(
    delete,
    path = "/v1/tokens/{id}",
    tag = "tokens",
    operation_id = "token_delete",
    summary = "Revoke an API token",
    description = "From now on every request with it is refused (`401`), on every replica. \
        The record stays, with who revoked it.",
    params(("id" = uuid::Uuid, Path, description = "The token's id.")),
    responses(
        (status = 200, description = "The token, revoked.", body = TokenResponse),
        BadId,
        (status = 403, description = "The token's role is not owner (`forbidden`).",
            body = ErrorResponse),
        (status = 404, description = "No such token for this tenant (`not_found`).",
            body = ErrorResponse),
        (status = 409, description = "It is revoked already (`conflict`).",
            body = ErrorResponse),
    ),
)]
async fn delete(
    State(s): State<AppState>,
    p: Principal,
    Path(id): Path<String>,
) -> ApiResult<Json<TokenResponse>> {
    let t = s.app.token_delete(&p, parse_id(&id)?).await?;
    Ok(Json(TokenResponse {
        token: views::token(&t),
    }))
}
