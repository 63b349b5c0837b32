//! `/v1/quotas`, and the operators' `/v1/tenants/{tenant}/quotas`,
//! `/v1/targets` and `/v1/audit`.

use super::responses::{BadId, BadIdOrBody, BadQuery, NoSuchTarget};
use super::{AppState, JsonBody, pagination, parse_id, query_pairs};
use crate::app::QuotaView;
use crate::auth::Principal;
use crate::error::{ApiError, ApiResult};
use crate::views;
use axum::Json;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use meson_core::Error;
use meson_core::audit::AuditFilter;
use meson_types::ErrorResponse;
use meson_types::admin as wire;
use meson_types::requests::PageQuery;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(quota_get))
        .routes(routes!(tenant_quota_get, tenant_quota_update))
        .routes(routes!(plan_list))
        .routes(routes!(plan_get))
        .routes(routes!(plan_put, plan_delete))
        .routes(routes!(target_list, target_create))
        .routes(routes!(target_get, target_update))
        .routes(routes!(target_drain))
        .routes(routes!(target_undrain))
        .routes(routes!(audit_list))
        .routes(routes!(orphan_list))
        .routes(routes!(orphan_get))
        .routes(routes!(orphan_adopt))
        .routes(routes!(orphan_delete))
}

fn orphan(
    o: &meson_core::orphan::Orphan,
    warnings: &[meson_core::parse::Warning],
) -> Json<wire::OrphanResponse> {
    Json(wire::OrphanResponse {
        orphan: views::orphan(o),
        warnings: warnings.iter().map(views::warning).collect(),
    })
}

fn quota(v: QuotaView) -> Json<wire::QuotaResponse> {
    Json(wire::QuotaResponse {
        quota: views::quota(&v),
    })
}

fn target(
    t: &meson_core::target::Target,
    warnings: &[meson_core::parse::Warning],
) -> Json<wire::TargetResponse> {
    Json(wire::TargetResponse {
        target: views::target(t),
        warnings: warnings.iter().map(views::warning).collect(),
    })
}

/// The caller's tenant's quotas and usage.
#[utoipa::path(
    get,
    path = "/v1/quotas",
    tag = "quotas",
    operation_id = "quota_get",
    summary = "Get your quotas",
    description = "What the tenant may hold of each resource, and what it holds now. A \
        request that would take a resource above its quota answers 403 \
        `resource_limit_exceeded` naming each such quota in `details.limits`.",
    responses((status = 200, description = "The quotas.", body = wire::QuotaResponse)),
)]
async fn quota_get(
    State(s): State<AppState>,
    p: Principal,
) -> ApiResult<Json<wire::QuotaResponse>> {
    Ok(quota(s.app.quota_get(&p).await?))
}

/// Any tenant's quotas and usage (operators).
#[utoipa::path(
    get,
    path = "/v1/tenants/{tenant}/quotas",
    tag = "quotas",
    operation_id = "tenant_quota_get",
    summary = "Get a tenant's quotas (admin)",
    params(("tenant" = String, Path, description = "The tenant's id, as its tokens carry it.")),
    responses(
        (status = 200, description = "The quotas.", body = wire::QuotaResponse),
        (status = 400, description = "Not a tenant id (`invalid_input`).", body = ErrorResponse),
    ),
)]
async fn tenant_quota_get(
    State(s): State<AppState>,
    p: Principal,
    Path(tenant): Path<String>,
) -> ApiResult<Json<wire::QuotaResponse>> {
    Ok(quota(s.app.tenant_quota_get(&p, &tenant).await?))
}

/// Sets a tenant's quotas (operators).
#[utoipa::path(
    patch,
    path = "/v1/tenants/{tenant}/quotas",
    tag = "quotas",
    operation_id = "tenant_quota_update",
    summary = "Set a tenant's quotas (admin)",
    description = "A number sets a quota, `null` returns it to the tenant's plan's (or the \
        deployment's default), an absent name leaves it. `plan` puts the tenant on a plan \
        (`null` or `default`: on none). A quota below what the tenant holds refuses what \
        would add to it; nothing the tenant holds is taken away.",
    params(("tenant" = String, Path, description = "The tenant's id, as its tokens carry it.")),
    request_body(content = wire::QuotaUpdateRequest, content_type = "application/json",
        example = json!({"vms": 20, "nodes": null, "plan": "pro"})),
    responses(
        (status = 200, description = "The quotas as they are now.", body = wire::QuotaResponse),
        (status = 400, description = "Not a tenant id, an unknown quota or plan or a bad \
            amount (`invalid_input`), or malformed JSON (`json_error`).", body = ErrorResponse),
    ),
)]
async fn tenant_quota_update(
    State(s): State<AppState>,
    p: Principal,
    Path(tenant): Path<String>,
    JsonBody(body): JsonBody,
) -> ApiResult<Json<wire::QuotaResponse>> {
    Ok(quota(s.app.tenant_quota_update(&p, &tenant, &body).await?))
}

fn plan((p, q): (meson_core::quota::Plan, meson_core::quota::Resources)) -> wire::Plan {
    views::plan(&p, &q)
}

/// Lists plans.
#[utoipa::path(
    get,
    path = "/v1/plans",
    tag = "quotas",
    operation_id = "plan_list",
    summary = "List plans",
    description = "The quota sets tenants are put on: `default` (the deployment's defaults, \
        a tenant on no plan's) first, then the operators' plans by name, each with every \
        resource's quota on it. A tenant's quota is its own if set, else its plan's, else \
        the default (`GET /v1/quotas` shows the tenant's plan).",
    responses((status = 200, description = "The plans.", body = wire::PlanList)),
)]
async fn plan_list(State(s): State<AppState>) -> ApiResult<Json<wire::PlanList>> {
    Ok(Json(wire::PlanList {
        plans: s.app.plan_list().await?.into_iter().map(plan).collect(),
    }))
}

/// Reads a plan.
#[utoipa::path(
    get,
    path = "/v1/plans/{name}",
    tag = "quotas",
    operation_id = "plan_get",
    summary = "Get a plan",
    params(("name" = String, Path, description = "The plan's name (`default`: the \
        deployment's defaults).")),
    responses(
        (status = 200, description = "The plan.", body = wire::PlanResponse),
        (status = 404, description = "No such plan (`not_found`).", body = ErrorResponse),
    ),
)]
async fn plan_get(
    State(s): State<AppState>,
    Path(name): Path<String>,
) -> ApiResult<Json<wire::PlanResponse>> {
    Ok(Json(wire::PlanResponse {
        plan: plan(s.app.plan_get(&name).await?),
    }))
}

/// Creates or replaces a plan (operators).
#[utoipa::path(
    put,
    path = "/v1/admin/plans/{name}",
    tag = "quotas",
    operation_id = "plan_put",
    summary = "Create or replace a plan (admin)",
    description = "The whole plan: `quotas` by resource name (a number, or absent or null \
        for the deployment's default). The quotas of the tenants on it follow at once; a \
        quota below what a tenant holds refuses what would add to it.",
    params(("name" = String, Path, description = "1 to 63 lowercase letters, digits or \
        '-' (not `default`).")),
    request_body(content = wire::PlanPutRequest, content_type = "application/json",
        example = json!({"description": "For production workloads",
            "quotas": {"vms": 500, "vcpus": 2048, "clusters": 50}})),
    responses(
        (status = 200, description = "The plan, replaced.", body = wire::PlanResponse),
        (status = 201, description = "The plan, created.", body = wire::PlanResponse),
        (status = 400, description = "A bad name or field (`invalid_input`, every rejected \
            field named: `quotas.vms`, …), or malformed JSON (`json_error`).",
            body = ErrorResponse),
        (status = 403, description = "Not an operator (`forbidden`).", body = ErrorResponse),
    ),
)]
async fn plan_put(
    State(s): State<AppState>,
    p: Principal,
    Path(name): Path<String>,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let (v, created) = s.app.plan_put(&p, &name, &body).await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(wire::PlanResponse { plan: plan(v) })).into_response())
}

/// Deletes a plan (operators).
#[utoipa::path(
    delete,
    path = "/v1/admin/plans/{name}",
    tag = "quotas",
    operation_id = "plan_delete",
    summary = "Delete a plan (admin)",
    params(("name" = String, Path, description = "The plan's name.")),
    responses(
        (status = 204, description = "Deleted."),
        (status = 403, description = "Not an operator (`forbidden`).", body = ErrorResponse),
        (status = 404, description = "No such plan (`not_found`).", body = ErrorResponse),
        (status = 409, description = "Tenants are on it, or it is `default` (`conflict`).",
            body = ErrorResponse),
    ),
)]
async fn plan_delete(State(s): State<AppState>, Path(name): Path<String>) -> ApiResult<StatusCode> {
    s.app.plan_delete(&name).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Lists AtomOS targets (operators).
#[utoipa::path(
    get,
    path = "/v1/targets",
    tag = "targets",
    operation_id = "target_list",
    summary = "List AtomOS targets (admin)",
    responses((status = 200, description = "Every target, by name.", body = wire::TargetList)),
)]
async fn target_list(State(s): State<AppState>, p: Principal) -> ApiResult<Json<wire::TargetList>> {
    let targets = s.app.target_list(&p).await?;
    Ok(Json(wire::TargetList {
        targets: targets.iter().map(views::target).collect(),
    }))
}

/// Reads an AtomOS target (operators).
#[utoipa::path(
    get,
    path = "/v1/targets/{id}",
    tag = "targets",
    operation_id = "target_get",
    summary = "Get an AtomOS target (admin)",
    params(("id" = uuid::Uuid, Path, description = "The target's id.")),
    responses(
        (status = 200, description = "The target.", body = wire::TargetResponse),
        BadId,
        NoSuchTarget,
    ),
)]
async fn target_get(
    State(s): State<AppState>,
    p: Principal,
    Path(id): Path<String>,
) -> ApiResult<Json<wire::TargetResponse>> {
    let t = s.app.target_get(&p, parse_id(&id)?).await?;
    Ok(target(&t, &[]))
}

/// Registers an AtomOS target (operators).
#[utoipa::path(
    post,
    path = "/v1/targets",
    tag = "targets",
    operation_id = "target_create",
    summary = "Register an AtomOS target (admin)",
    description = "New VMs and cluster nodes may be placed on it at once, unless it is \
        registered with `enabled: false`.",
    request_body(content = wire::TargetCreateRequest, content_type = "application/json",
        example = json!({"name": "ovh-gra-1", "host": "10.0.0.5", "provider": "ovh",
            "region": "gra", "continent": "europe"})),
    responses(
        (status = 201, description = "The target.", body = wire::TargetResponse),
        (status = 409, description = "A target has this name (`uniqueness_error`).",
            body = ErrorResponse),
    ),
)]
async fn target_create(
    State(s): State<AppState>,
    p: Principal,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let (t, warnings) = s.app.target_create(&p, &body).await?;
    Ok((StatusCode::CREATED, target(&t, &warnings)).into_response())
}

/// Changes an AtomOS target (operators).
#[utoipa::path(
    patch,
    path = "/v1/targets/{id}",
    tag = "targets",
    operation_id = "target_update",
    summary = "Change an AtomOS target (admin)",
    description = "Its endpoint (host, ports), or whether it takes new VMs (`enabled`). \
        Targets are never deleted: VMs placed there refer to them; disable one instead.",
    params(("id" = uuid::Uuid, Path, description = "The target's id.")),
    request_body(content = wire::TargetUpdateRequest, content_type = "application/json",
        example = json!({"enabled": false})),
    responses(
        (status = 200, description = "The target as it is now.", body = wire::TargetResponse),
        BadIdOrBody,
        NoSuchTarget,
    ),
)]
async fn target_update(
    State(s): State<AppState>,
    p: Principal,
    Path(id): Path<String>,
    JsonBody(body): JsonBody,
) -> ApiResult<Json<wire::TargetResponse>> {
    let (t, warnings) = s.app.target_update(&p, parse_id(&id)?, &body).await?;
    Ok(target(&t, &warnings))
}

/// Drains an AtomOS target: no new VMs, and its VMs migrate off it.
#[utoipa::path(
    post,
    path = "/v1/targets/{id}/actions/drain",
    tag = "targets",
    operation_id = "target_drain",
    summary = "Drain an AtomOS target (admin)",
    description = "Marks the target unschedulable (`enabled: false`: placement puts nothing \
        new there) and starts a `migrate_vm` action for every tenant's VM on it, each to the \
        cheapest other host of its provider with room (in its own tenant, with the admin as \
        its subject). VMs that cannot move are listed in `left` with why: a cluster's nodes \
        (replace them through their pool), VMs on private networks, VMs busy with another \
        action. Draining again retries those.",
    params(("id" = uuid::Uuid, Path, description = "The target's id.")),
    responses(
        (status = 200, description = "The target, the migrations started, the VMs left.",
            body = wire::TargetDrainResponse),
        BadId,
        NoSuchTarget,
    ),
)]
async fn target_drain(
    State(s): State<AppState>,
    p: Principal,
    Path(id): Path<String>,
) -> ApiResult<Json<wire::TargetDrainResponse>> {
    let d = s.app.target_drain(&p, parse_id(&id)?).await?;
    Ok(Json(wire::TargetDrainResponse {
        target: views::target(&d.target),
        actions: d.actions.iter().map(views::action).collect(),
        left: d
            .left
            .into_iter()
            .map(|(vm, reason)| wire::DrainLeft { vm: vm.0, reason })
            .collect(),
    }))
}

/// Undrains an AtomOS target: it takes new VMs again.
#[utoipa::path(
    post,
    path = "/v1/targets/{id}/actions/undrain",
    tag = "targets",
    operation_id = "target_undrain",
    summary = "Undrain an AtomOS target (admin)",
    description = "Marks the target schedulable again (`enabled: true`). VMs a drain moved \
        off stay where they went.",
    params(("id" = uuid::Uuid, Path, description = "The target's id.")),
    responses(
        (status = 200, description = "The target as it is now.", body = wire::TargetResponse),
        BadId,
        NoSuchTarget,
    ),
)]
async fn target_undrain(
    State(s): State<AppState>,
    p: Principal,
    Path(id): Path<String>,
) -> ApiResult<Json<wire::TargetResponse>> {
    let t = s.app.target_undrain(&p, parse_id(&id)?).await?;
    Ok(target(&t, &[]))
}

/// Reads the audit log (operators: every tenant's; owners: their own).
#[utoipa::path(
    get,
    path = "/v1/audit",
    tag = "audit",
    operation_id = "audit_list",
    summary = "List the audit log (owner: its tenant's; admin: every tenant's)",
    description = "Every request that could change something (refused ones included) and \
        every kubeconfig handed out, newest first: who (tenant, subject, role), what \
        (operation, method, path, status), on which resource, which action it started, \
        and the request's correlation id. A tenant's owner reads its own tenant's entries \
        only (`tenant` naming another answers 403).",
    params(PageQuery, wire::AuditListQuery),
    responses(
        (status = 200, description = "A page of entries.", body = wire::AuditList,
            headers(("Link" = String, description = "RFC 8288 links to the `prev`, `next` \
                and `last` pages."))),
        BadQuery,
    ),
)]
async fn audit_list(
    State(s): State<AppState>,
    p: Principal,
    RawQuery(q): RawQuery,
) -> ApiResult<Response> {
    let pairs = query_pairs(q.as_deref())?;
    let page = crate::app::list::parse_page(&pairs)?;
    let mut f = AuditFilter::default();
    for (k, v) in pairs.iter().cloned() {
        let time = |v: &str| {
            chrono::DateTime::parse_from_rfc3339(v)
                .map(|t| t.to_utc())
                .map_err(|_| ApiError(Error::invalid(k.clone(), "must be an RFC 3339 time")))
        };
        match k.as_str() {
            "since" => f.since = Some(time(&v)?),
            "until" => f.until = Some(time(&v)?),
            _ if v.contains('\0') => {
                return Err(ApiError(Error::invalid(
                    k,
                    "must not contain NUL characters",
                )));
            }
            "tenant" => f.tenant = Some(v),
            "subject" => f.subject = Some(v),
            "operation" => f.operation = Some(v),
            "resource_id" => f.resource_id = Some(v),
            _ => {}
        }
    }
    let (entries, total) = s.app.audit_list(&p, &page, &f).await?;
    let (meta, link) = pagination("/v1/audit", &pairs, page.pagination(total));
    let body = wire::AuditList {
        audit_entries: entries.iter().map(views::audit_entry).collect(),
        meta,
    };
    Ok(super::paged(body, link))
}

/// Lists orphans: VMs hosts hold that meson has no record of (operators).
#[utoipa::path(
    get,
    path = "/v1/admin/orphans",
    tag = "targets",
    operation_id = "orphan_list",
    summary = "List orphaned VMs (admin)",
    description = "VMs a host holds that no meson VM names: made after the backup meson's \
        database was restored from, or made outside meson. The reconciler compares every \
        host's inventory with meson's records on each pass: a VM whose name carries its id \
        and the tag of a tenant meson knows is adopted back into that tenant by itself; the \
        rest are listed here, with `reason`, until an operator adopts or deletes them. An \
        orphan its host no longer holds leaves the list.",
    responses((status = 200, description = "Every orphan, the longest known first.",
        body = wire::OrphanList)),
)]
async fn orphan_list(State(s): State<AppState>, p: Principal) -> ApiResult<Json<wire::OrphanList>> {
    let orphans = s.app.orphan_list(&p).await?;
    Ok(Json(wire::OrphanList {
        orphans: orphans.iter().map(views::orphan).collect(),
    }))
}

/// Reads an orphan (operators).
#[utoipa::path(
    get,
    path = "/v1/admin/orphans/{id}",
    tag = "targets",
    operation_id = "orphan_get",
    summary = "Get an orphaned VM (admin)",
    params(("id" = uuid::Uuid, Path, description = "The orphan's id.")),
    responses(
        (status = 200, description = "The orphan.", body = wire::OrphanResponse),
        BadId,
        (status = 404, description = "No such orphan (`not_found`): adopted, deleted, or gone \
            from its host.", body = ErrorResponse),
    ),
)]
async fn orphan_get(
    State(s): State<AppState>,
    p: Principal,
    Path(id): Path<String>,
) -> ApiResult<Json<wire::OrphanResponse>> {
    Ok(orphan(&s.app.orphan_get(&p, parse_id(&id)?).await?, &[]))
}

/// Adopts an orphan into a tenant (operators).
#[utoipa::path(
    post,
    path = "/v1/admin/orphans/{id}/actions/adopt",
    tag = "targets",
    operation_id = "orphan_adopt",
    summary = "Adopt an orphaned VM into a tenant (admin)",
    description = "Records the decision; the reconciler's next pass writes the VM into the \
        tenant (its size, state, address and volumes as its host reports them; its image and \
        SSH keys are unknown) and the orphan leaves the list. When the VM's name carries a \
        tenant tag, only the tenant it names is accepted. The VM counts against the tenant's \
        usage from then on, whatever its quotas.",
    params(("id" = uuid::Uuid, Path, description = "The orphan's id.")),
    request_body(content = wire::OrphanAdoptRequest, content_type = "application/json",
        example = json!({"tenant": "acme", "name": "web-1"})),
    responses(
        (status = 202, description = "The orphan, with its decision.", body = wire::OrphanResponse),
        BadIdOrBody,
        (status = 404, description = "No such orphan (`not_found`).", body = ErrorResponse),
        (status = 409, description = "Already decided (`conflict`).", body = ErrorResponse),
    ),
)]
async fn orphan_adopt(
    State(s): State<AppState>,
    p: Principal,
    Path(id): Path<String>,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let (o, warnings) = s.app.orphan_adopt(&p, parse_id(&id)?, &body).await?;
    Ok((StatusCode::ACCEPTED, orphan(&o, &warnings)).into_response())
}

/// Deletes an orphan from its host (operators).
#[utoipa::path(
    post,
    path = "/v1/admin/orphans/{id}/actions/delete",
    tag = "targets",
    operation_id = "orphan_delete",
    summary = "Delete an orphaned VM from its host (admin)",
    description = "Records the decision; the reconciler's next pass unregisters the VM from \
        its host and destroys the volumes listed with it (none that a meson volume names), \
        then forgets the orphan. Nothing else deletes an orphan.",
    params(("id" = uuid::Uuid, Path, description = "The orphan's id.")),
    responses(
        (status = 202, description = "The orphan, with its decision.", body = wire::OrphanResponse),
        BadId,
        (status = 404, description = "No such orphan (`not_found`).", body = ErrorResponse),
        (status = 409, description = "Already decided (`conflict`).", body = ErrorResponse),
    ),
)]
async fn orphan_delete(
    State(s): State<AppState>,
    p: Principal,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    let o = s.app.orphan_delete(&p, parse_id(&id)?).await?;
    Ok((StatusCode::ACCEPTED, orphan(&o, &[])).into_response())
}
