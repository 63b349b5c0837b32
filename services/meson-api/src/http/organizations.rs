//! `/v1/organizations`: the organisation a call acts in and its
//! sub-organisations.

use super::{AppState, JsonBody};
use crate::auth::Principal;
use crate::error::ApiResult;
use crate::views;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use meson_types::ErrorResponse;
use meson_types::organization::{
    OrganizationCreateRequest, OrganizationList, OrganizationResponse, OrganizationUpdateRequest,
};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(read, update, delete))
}

fn one(n: &meson_db::organizations::Node) -> OrganizationResponse {
    OrganizationResponse {
        organization: views::organization(n),
    }
}

#[utoipa::path(
    get,
    path = "/v1/organizations",
    tag = "members",
    operation_id = "organization_list",
    summary = "List the organisation and its sub-organisations",
    description = "The organisation the call acts in, then every sub-organisation below it, \
        at any depth, with the quotas each was given. Its owners and managers act in any of \
        them with `Meson-Organization: <id>`.",
    responses((status = 200, description = "The organisations.", body = OrganizationList)),
)]
async fn list(State(s): State<AppState>, p: Principal) -> ApiResult<Json<OrganizationList>> {
    let tree = s.app.org_list(&p).await?;
    Ok(Json(OrganizationList {
        organizations: tree.iter().map(views::organization).collect(),
    }))
}

#[utoipa::path(
    post,
    path = "/v1/organizations",
    tag = "members",
    operation_id = "organization_create",
    summary = "Create a sub-organisation",
    description = "A sub-organisation of the organisation the call acts in, `<parent>.<name>`, \
        with quotas carved out of the parent's: what it may hold counts as held by the parent \
        (in `GET /v1/quotas`), so they must fit in the parent's quotas beside its own \
        resources and its other sub-organisations'. Owners.",
    request_body(content = OrganizationCreateRequest, content_type = "application/json",
        example = json!({"name": "platform", "quotas": {"vms": 10, "vcpus": 32, "ram_mib": 65536}})),
    responses(
        (status = 201, description = "The sub-organisation.", body = OrganizationResponse),
        (status = 400, description = "A bad field (`invalid_input`: `name`, `quotas.vms`, \
            ...).", body = ErrorResponse),
        (status = 409, description = "The id is in use (`uniqueness_error`).",
            body = ErrorResponse),
        (status = 403, description = "Its quotas do not fit in the parent's \
            (`resource_limit_exceeded`, each named).", body = ErrorResponse),
    ),
)]
async fn create(
    State(s): State<AppState>,
    p: Principal,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let n = s.app.org_create(&p, &body).await?;
    Ok((StatusCode::CREATED, Json(one(&n))).into_response())
}

#[utoipa::path(
    get,
    path = "/v1/organizations/{id}",
    tag = "members",
    operation_id = "organization_get",
    summary = "Get an organisation",
    params(("id" = String, Path, description = "The organisation the call acts in, or one below it.")),
    responses(
        (status = 200, description = "The organisation.", body = OrganizationResponse),
        (status = 404, description = "None such at or below the organisation the call acts in \
            (`not_found`).", body = ErrorResponse),
    ),
)]
async fn read(
    State(s): State<AppState>,
    p: Principal,
    Path(id): Path<String>,
) -> ApiResult<Json<OrganizationResponse>> {
    Ok(Json(one(&s.app.org_get(&p, &id).await?)))
}

#[utoipa::path(
    patch,
    path = "/v1/organizations/{id}",
    tag = "members",
    operation_id = "organization_update",
    summary = "Change a sub-organisation's quotas",
    description = "The quotas named change. A rise must fit in the parent's, as a creation's; \
        a cut always passes (the sub-organisation may then hold more than it may add to). \
        Owners of an organisation above it.",
    params(("id" = String, Path, description = "A sub-organisation below the one the call acts in.")),
    request_body(content = OrganizationUpdateRequest, content_type = "application/json",
        example = json!({"quotas": {"vms": 20}})),
    responses(
        (status = 200, description = "The sub-organisation.", body = OrganizationResponse),
        (status = 400, description = "A bad field (`invalid_input`).", body = ErrorResponse),
        (status = 403, description = "It is the organisation the call acts in (`forbidden`), \
            or the rise does not fit in the parent's quotas (`resource_limit_exceeded`).",
            body = ErrorResponse),
        (status = 404, description = "None such below (`not_found`).", body = ErrorResponse),
    ),
)]
async fn update(
    State(s): State<AppState>,
    p: Principal,
    Path(id): Path<String>,
    JsonBody(body): JsonBody,
) -> ApiResult<Json<OrganizationResponse>> {
    Ok(Json(one(&s.app.org_update(&p, &id, &body).await?)))
}

#[utoipa::path(
    delete,
    path = "/v1/organizations/{id}",
    tag = "members",
    operation_id = "organization_delete",
    summary = "End a sub-organisation",
    description = "Once it holds nothing and has no sub-organisations: its quotas return to \
        its parent; its members, open invitations and live tokens end with it. Owners of an \
        organisation above it.",
    params(("id" = String, Path, description = "A sub-organisation below the one the call acts in.")),
    responses(
        (status = 200, description = "The sub-organisation, ended.", body = OrganizationResponse),
        (status = 403, description = "It is the organisation the call acts in (`forbidden`).",
            body = ErrorResponse),
        (status = 404, description = "None such below (`not_found`).", body = ErrorResponse),
        (status = 409, description = "It still holds resources or sub-organisations \
            (`conflict`).", body = ErrorResponse),
    ),
)]
async fn delete(
    State(s): State<AppState>,
    p: Principal,
    Path(id): Path<String>,
) -> ApiResult<Json<OrganizationResponse>> {
    Ok(Json(one(&s.app.org_delete(&p, &id).await?)))
}
