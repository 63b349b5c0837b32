//! `/v1/actions`, `/v1/actions/stream` and `/v1/vms/{id}/actions`.

use super::{AppState, page_of, pagination, parse_id, query_pairs, stream};
use crate::auth::Principal;
use crate::error::{ApiError, ApiResult};
use crate::views;
use axum::extract::{Path, RawQuery, State};

use axum::response::Response;
use axum::routing::get;
use axum::{Json, Router};
use meson_core::action::ActionStatus;
use meson_core::{ActionId, Error, VmId};
use meson_db::actions::{ActionSort, ActionSortField};
use meson_types as wire;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/actions", get(list))
        // A static segment wins over `{id}`, so "stream" is never read as an id.
        .route("/v1/actions/stream", get(stream::actions))
        .route("/v1/actions/{id}", get(read))
        .route("/v1/vms/{id}/actions", get(list_for_vm))
}

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

async fn list_for_vm(
    State(s): State<AppState>,
    p: Principal,
    Path(id): Path<String>,
    RawQuery(q): RawQuery,
) -> ApiResult<Response> {
    let vm: VmId = parse_id(&id)?;
    let pairs = query_pairs(q.as_deref())?;
    let f = filters(&pairs)?;
    if !f.ids.is_empty() {
        return Err(ApiError(Error::invalid(
            "id",
            "not supported here: this lists the VM's actions; use /v1/actions?id=",
        )));
    }
    let page = page_of(&pairs)?;
    let res = s
        .app
        .action_list_for_vm(&p, vm, &f.status, &f.sort, page)
        .await?;
    let (meta, link) = pagination(&format!("/v1/vms/{vm}/actions"), page, res.total);
    let body = wire::action::ActionPage {
        actions: res.actions.iter().map(views::action).collect(),
        meta,
    };
    Ok(super::paged(body, link))
}

/// The filters a list of actions takes from its query.
struct Filters {
    ids: Vec<ActionId>,
    status: Vec<ActionStatus>,
    sort: Vec<ActionSort>,
}

fn filters(pairs: &[(String, String)]) -> ApiResult<Filters> {
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
