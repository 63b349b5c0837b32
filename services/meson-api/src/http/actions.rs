//! `/v1/actions`, `/v1/actions/stream` and `/v1/vms/{id}/actions`.

use super::{AppState, pagination, parse_id, query_pairs, stream};
use crate::app::{ActionQuery, list};
use crate::auth::Principal;
use crate::error::{ApiError, ApiResult};
use crate::views;
use axum::extract::{Path, RawQuery, State};

use super::responses::BadId;
use axum::Json;
use axum::response::Response;
use meson_core::Error;
use meson_core::action::ResourceType;
use meson_types as wire;
use meson_types::ErrorResponse;
use meson_types::requests::{ActionListQuery, PageQuery, VmActionListQuery};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list))
        // A static segment wins over `{id}`, so "stream" is never read as an id.
        .routes(routes!(stream::actions))
        .routes(routes!(read))
        .routes(routes!(list_for_vm))
        .routes(routes!(list_for_volume))
        .routes(routes!(list_for_network))
        .routes(routes!(list_for_image))
        .routes(routes!(list_for_backup))
        .routes(routes!(list_for_cluster))
}

/// Reads an action.
#[utoipa::path(
    get,
    path = "/v1/actions/{id}",
    tag = "actions",
    operation_id = "action_get",
    summary = "Get an action",
    params(("id" = uuid::Uuid, Path, description = "The action's id.")),
    responses(
        (status = 200, description = "The action.", body = wire::ActionResponse),
        BadId,
        (status = 404, description = "No such action for this tenant (`not_found`).",
            body = ErrorResponse),
    ),
)]
async fn read(
    State(s): State<AppState>,
    p: Principal,
    Path(id): Path<String>,
) -> ApiResult<Json<wire::ActionResponse>> {
    let a = s.app.action_get(&p, parse_id(&id)?).await?;
    Ok(super::action_answer(&a))
}

/// Reads several actions by id.
#[utoipa::path(
    get,
    path = "/v1/actions",
    tag = "actions",
    operation_id = "action_list",
    summary = "Get actions by id",
    params(ActionListQuery),
    responses(
        (status = 200, description = "The tenant's actions among the ids, in `sort` order \
            (then by id).", body = wire::ActionList),
        (status = 400, description = "No id, more than 25, a malformed one, or a bad \
            `status` or `sort` (`invalid_input`).", body = ErrorResponse),
    ),
)]
async fn list(
    State(s): State<AppState>,
    p: Principal,
    RawQuery(q): RawQuery,
) -> ApiResult<Json<wire::ActionList>> {
    let f = ActionQuery::parse(&query_pairs(q.as_deref())?)?;
    let actions = s.app.action_list(&p, &f.ids, &f.status, &f.sort).await?;
    Ok(Json(wire::ActionList {
        actions: actions.iter().map(views::action).collect(),
    }))
}

/// The handler of `GET /v1/{collection}/{id}/actions` for one kind of
/// resource, with its documentation: `$noun` names the resource in prose.
macro_rules! list_for {
    ($handler:ident, $kind:expr, $collection:tt, $operation:tt, $noun:tt) => {
        #[doc = concat!("Lists a ", $noun, "'s actions.")]
        #[utoipa::path(
            get,
            path = concat!("/v1/", $collection, "/{id}/actions"),
            tag = "actions",
            operation_id = $operation,
            summary = concat!("List a ", $noun, "'s actions"),
            description = concat!("Every action that touched the ", $noun,
                ", newest first by default; a deleted ", $noun, "'s history stays."),
            params(("id" = uuid::Uuid, Path, description = concat!("The ", $noun, "'s id.")),
                PageQuery, VmActionListQuery),
            responses(
                (status = 200, description = "A page of actions.",
                    body = wire::action::ActionPage,
                    headers(("Link" = String, description = "RFC 8288 links to the `prev`, \
                        `next` and `last` pages."))),
                (status = 400, description = "The id is not a UUID, or a bad query parameter \
                    (`invalid_input`; `id=` is refused here).", body = ErrorResponse),
                (status = 404, description = concat!("The tenant never had this ", $noun,
                    " (`not_found`)."), body = ErrorResponse),
            ),
        )]
        async fn $handler(
            State(s): State<AppState>,
            p: Principal,
            Path(id): Path<String>,
            RawQuery(q): RawQuery,
        ) -> ApiResult<Response> {
            list_for(&s, &p, $kind, $collection, &id, q.as_deref()).await
        }
    };
}

list_for!(list_for_vm, ResourceType::Vm, "vms", "vm_action_list", "VM");
list_for!(
    list_for_volume,
    ResourceType::Volume,
    "volumes",
    "volume_action_list",
    "volume"
);
list_for!(
    list_for_cluster,
    ResourceType::Cluster,
    "clusters",
    "cluster_action_list",
    "cluster"
);
list_for!(
    list_for_backup,
    ResourceType::Backup,
    "backups",
    "backup_action_list",
    "backup"
);
list_for!(
    list_for_image,
    ResourceType::Image,
    "images",
    "image_action_list",
    "image"
);
list_for!(
    list_for_network,
    ResourceType::Network,
    "networks",
    "network_action_list",
    "network"
);

/// `/v1/{collection}/{id}/actions`: a page of the actions on one resource.
async fn list_for(
    s: &AppState,
    p: &Principal,
    kind: ResourceType,
    collection: &str,
    id: &str,
    query: Option<&str>,
) -> ApiResult<Response> {
    let id: uuid::Uuid = parse_id(id)?;
    let pairs = query_pairs(query)?;
    let f = ActionQuery::parse(&pairs)?;
    if !f.ids.is_empty() {
        return Err(ApiError(Error::invalid(
            "id",
            format!(
                "not supported here: this lists the {}'s actions; use /v1/actions?id=",
                kind.as_str()
            ),
        )));
    }
    let page = list::parse_page(&pairs)?;
    let res = s
        .app
        .action_list_for(p, kind, id, &f.status, &f.sort, &page)
        .await?;
    let (meta, link) = pagination(
        &format!("/v1/{collection}/{id}/actions"),
        &pairs,
        page.pagination(res.total),
    );
    let body = wire::action::ActionPage {
        actions: res.actions.iter().map(views::action).collect(),
        meta,
    };
    Ok(super::paged(body, link))
}
