//! `/v1/actions`, `/v1/actions/stream` and `/v1/vms/{id}/actions`.

use super::{AppState, page_of, pagination, parse_id, query_pairs, stream};
use crate::auth::Principal;
use crate::error::{ApiError, ApiResult};
use crate::views;
use axum::extract::{Path, RawQuery, State};

use axum::Json;
use axum::response::Response;
use meson_core::action::{ActionStatus, ResourceType};
use meson_core::{ActionId, Error};
use meson_db::actions::{ActionSort, ActionSortField};
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
        (status = 400, description = "The id is not a UUID (`invalid_input`).",
            body = ErrorResponse),
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
    Ok(Json(wire::ActionResponse {
        action: views::action(&a),
    }))
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
    let pairs = query_pairs(q.as_deref())?;
    let f = filters(&pairs)?;
    let actions = s.app.action_list(&p, &f.ids, &f.status, &f.sort).await?;
    Ok(Json(wire::ActionList {
        actions: actions.iter().map(views::action).collect(),
    }))
}

/// Lists a VM's actions.
#[utoipa::path(
    get,
    path = "/v1/vms/{id}/actions",
    tag = "actions",
    operation_id = "vm_action_list",
    summary = "List a VM's actions",
    description = "Every action that touched the VM, newest first by default; a deleted \
        VM's history stays.",
    params(("id" = uuid::Uuid, Path, description = "The VM's id."), PageQuery,
        VmActionListQuery),
    responses(
        (status = 200, description = "A page of actions.", body = wire::action::ActionPage,
            headers(("Link" = String, description = "RFC 8288 links to the `prev`, `next` \
                and `last` pages."))),
        (status = 400, description = "The id is not a UUID, or a bad query parameter \
            (`invalid_input`; `id=` is refused here).", body = ErrorResponse),
        (status = 404, description = "The tenant never had this VM (`not_found`).",
            body = ErrorResponse),
    ),
)]
async fn list_for_vm(
    State(s): State<AppState>,
    p: Principal,
    Path(id): Path<String>,
    RawQuery(q): RawQuery,
) -> ApiResult<Response> {
    list_for(&s, &p, ResourceType::Vm, "vms", &id, q.as_deref()).await
}

/// Lists a volume's actions.
#[utoipa::path(
    get,
    path = "/v1/volumes/{id}/actions",
    tag = "actions",
    operation_id = "volume_action_list",
    summary = "List a volume's actions",
    description = "Every action that touched the volume, newest first by default; a deleted \
        volume's history stays.",
    params(("id" = uuid::Uuid, Path, description = "The volume's id."), PageQuery,
        VmActionListQuery),
    responses(
        (status = 200, description = "A page of actions.", body = wire::action::ActionPage,
            headers(("Link" = String, description = "RFC 8288 links to the `prev`, `next` \
                and `last` pages."))),
        (status = 400, description = "The id is not a UUID, or a bad query parameter \
            (`invalid_input`; `id=` is refused here).", body = ErrorResponse),
        (status = 404, description = "The tenant never had this volume (`not_found`).",
            body = ErrorResponse),
    ),
)]
async fn list_for_volume(
    State(s): State<AppState>,
    p: Principal,
    Path(id): Path<String>,
    RawQuery(q): RawQuery,
) -> ApiResult<Response> {
    list_for(&s, &p, ResourceType::Volume, "volumes", &id, q.as_deref()).await
}

/// Lists a cluster's actions.
#[utoipa::path(
    get,
    path = "/v1/clusters/{id}/actions",
    tag = "actions",
    operation_id = "cluster_action_list",
    summary = "List a cluster's actions",
    description = "Every action that touched the cluster, newest first by default; a deleted \
        cluster's history stays.",
    params(("id" = uuid::Uuid, Path, description = "The cluster's id."), PageQuery,
        VmActionListQuery),
    responses(
        (status = 200, description = "A page of actions.", body = wire::action::ActionPage,
            headers(("Link" = String, description = "RFC 8288 links to the `prev`, `next` \
                and `last` pages."))),
        (status = 400, description = "The id is not a UUID, or a bad query parameter \
            (`invalid_input`; `id=` is refused here).", body = ErrorResponse),
        (status = 404, description = "The tenant never had this cluster (`not_found`).",
            body = ErrorResponse),
    ),
)]
async fn list_for_cluster(
    State(s): State<AppState>,
    p: Principal,
    Path(id): Path<String>,
    RawQuery(q): RawQuery,
) -> ApiResult<Response> {
    list_for(&s, &p, ResourceType::Cluster, "clusters", &id, q.as_deref()).await
}

/// Lists a network's actions.
#[utoipa::path(
    get,
    path = "/v1/networks/{id}/actions",
    tag = "actions",
    operation_id = "network_action_list",
    summary = "List a network's actions",
    description = "Every action that touched the network, newest first by default; a deleted \
        network's history stays.",
    params(("id" = uuid::Uuid, Path, description = "The network's id."), PageQuery,
        VmActionListQuery),
    responses(
        (status = 200, description = "A page of actions.", body = wire::action::ActionPage,
            headers(("Link" = String, description = "RFC 8288 links to the `prev`, `next` \
                and `last` pages."))),
        (status = 400, description = "The id is not a UUID, or a bad query parameter \
            (`invalid_input`; `id=` is refused here).", body = ErrorResponse),
        (status = 404, description = "The tenant never had this network (`not_found`).",
            body = ErrorResponse),
    ),
)]
async fn list_for_network(
    State(s): State<AppState>,
    p: Principal,
    Path(id): Path<String>,
    RawQuery(q): RawQuery,
) -> ApiResult<Response> {
    list_for(&s, &p, ResourceType::Network, "networks", &id, q.as_deref()).await
}

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
    let f = filters(&pairs)?;
    if !f.ids.is_empty() {
        return Err(ApiError(Error::invalid(
            "id",
            format!(
                "not supported here: this lists the {}'s actions; use /v1/actions?id=",
                kind.as_str()
            ),
        )));
    }
    let page = page_of(&pairs)?;
    let res = s
        .app
        .action_list_for(p, kind, id, &f.status, &f.sort, page)
        .await?;
    let (meta, link) = pagination(&format!("/v1/{collection}/{id}/actions"), page, res.total);
    let body = wire::action::ActionPage {
        actions: res.actions.iter().map(views::action).collect(),
        meta,
    };
    Ok(super::paged(body, link))
}

/// The filters a list of actions takes from its query.
pub struct Filters {
    pub ids: Vec<ActionId>,
    pub status: Vec<ActionStatus>,
    pub sort: Vec<ActionSort>,
}

/// `id=`, `status=` and `sort=` of an action list (gRPC's lists too).
pub fn filters(pairs: &[(String, String)]) -> ApiResult<Filters> {
    let mut f = Filters {
        ids: Vec::new(),
        status: Vec::new(),
        sort: Vec::new(),
    };
    let mut sort = Vec::new();
    for (k, v) in pairs {
        match k.as_str() {
            "id" => f.ids.push(parse_id(v)?),
            "status" => f.status.push(ActionStatus::parse(v).ok_or_else(|| {
                ApiError(Error::invalid(
                    "status",
                    "must be running, success or error",
                ))
            })?),
            "sort" => sort.push(v.as_str()),
            _ => {}
        }
    }
    f.sort = parse_sort(&sort)?;
    Ok(f)
}

/// Parses repeated `sort=field[:asc|:desc]` values, first key first. A field
/// given twice keeps its first direction: a later key on the same field could
/// never change the order anyway.
pub fn parse_sort(values: &[&str]) -> ApiResult<Vec<ActionSort>> {
    let bad = |v: &str| {
        let fields: Vec<&str> = ActionSortField::ALL.iter().map(|f| f.as_str()).collect();
        ApiError(Error::invalid(
            "sort",
            format!(
                "'{v}' is not a sort key; use field[:asc|:desc] with a field among {}",
                fields.join(", ")
            ),
        ))
    };
    let mut out: Vec<ActionSort> = Vec::with_capacity(values.len());
    for v in values {
        let (field, descending) = match v.split_once(':') {
            None => (*v, false),
            Some((field, "asc")) => (field, false),
            Some((field, "desc")) => (field, true),
            Some(_) => return Err(bad(v)),
        };
        let field = ActionSortField::parse(field).ok_or_else(|| bad(v))?;
        if !out.iter().any(|s| s.field == field) {
            out.push(ActionSort { field, descending });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(field: ActionSortField, descending: bool) -> ActionSort {
        ActionSort { field, descending }
    }

    fn rejected_field(values: &[&str]) -> String {
        match parse_sort(values) {
            Err(ApiError(Error::InvalidInput { fields })) => fields[0].name.clone(),
            other => panic!("expected invalid_input, got {other:?}"),
        }
    }

    #[test]
    fn sort_keys_parse_in_order_with_directions() {
        use ActionSortField::*;
        assert_eq!(parse_sort(&[]).expect("empty"), []);
        assert_eq!(
            parse_sort(&["status", "progress:desc", "started:asc", "id:desc"]).expect("valid"),
            [
                key(Status, false),
                key(Progress, true),
                key(Started, false),
                key(Id, true)
            ]
        );
        assert_eq!(
            parse_sort(&["command:desc", "finished"]).expect("valid"),
            [key(Command, true), key(Finished, false)]
        );
        // Repeats keep the first key; they could not change the order.
        assert_eq!(
            parse_sort(&["id:desc", "id:asc", "id"]).expect("valid"),
            [key(Id, true)]
        );
    }

    #[test]
    fn bad_sort_keys_name_the_sort_field() {
        for bad in [
            &["name"][..],
            &[""],
            &["id:"],
            &["id:up"],
            &["ID"],
            &[":desc"],
            &["id:desc:asc"],
            &["progress", "tenant_id"],
        ] {
            assert_eq!(rejected_field(bad), "sort", "{bad:?}");
        }
    }
}
