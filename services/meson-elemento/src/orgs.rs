//! Organisations, their members and invitations over meson's
//! (`/v1/members`, `/v1/membership`, `/v1/invitations`): what Electros'
//! account and organisation pages read, on the auth daemon.
//!
//! An organisation is a meson tenant, under the same id. The caller may
//! read any it is a member of (meson checks, the gateway asks with
//! `Meson-Organization`); another is meson's `403`. Users are named by
//! their email where meson knows it, else by their subject. Roles map
//! onto Electros' words: owner → `ORGOWNER`, manager → `ORGADMIN`, editor
//! and viewer → `ORGMEMBER`; an operator's token is its organisation's
//! owner, as `/status` says.
//!
//! A sub-organisation (`/v1/organizations`) is named by its id
//! (`acme.platform`) or by its own name under the organisation
//! (`platform`); its limits are the quotas carved for it. A member's limits
//! are its organisation's, but for the limits of its own (VMs, vCPUs, RAM). Nor account details (fiscal
//! data): `404`, as the daemon answers an account without any. Invitations
//! are accepted with meson's `POST /v1/invitations/accept`: the daemon's
//! `GET /invite/accept/{token}` changes nothing and says so.

use crate::error::{DResult, Detail};
use crate::routes::{AppState, Authed};
use crate::wire;
use axum::extract::Path;
use axum::http::StatusCode;
use axum::{Json, Router};
use meson_types::member::{Invitation, Member, Membership};
use meson_types::organization::Organization;
use serde_json::{Value, json};

const ORG: &str = "/api/v1.0/orgs/{org_id}";

/// The routes served (all on the auth daemon, all `GET`).
pub fn served() -> Vec<(&'static str, String)> {
    [
        "/api/v1/authenticate/scopes".to_owned(),
        "/api/v1/authenticate/account/details".to_owned(),
        "/api/v1.0/account/managedmembers".to_owned(),
        "/api/v1.0/invite/accept/{token}".to_owned(),
        format!("{ORG}/owner"),
        format!("{ORG}/admins"),
        format!("{ORG}/members"),
        format!("{ORG}/invite"),
        format!("{ORG}/membership/tree"),
        format!("{ORG}/members/{{user}}/limits"),
        format!("{ORG}/suborgs"),
        format!("{ORG}/suborgs/{{suborg}}/admins"),
        format!("{ORG}/suborgs/{{suborg}}/children"),
        format!("{ORG}/suborgs/{{suborg}}/limits"),
        format!("{ORG}/suborgs/{{suborg}}/members"),
        format!("{ORG}/suborgs/{{suborg}}/members/{{user}}/limits"),
        format!("{ORG}/suborgs/{{suborg}}/membership/tree"),
    ]
    .into_iter()
    .map(|p| ("GET", p))
    .collect()
}

pub fn routes() -> Router<AppState> {
    use axum::routing::get;
    let r = Router::new()
        .route("/api/v1/authenticate/scopes", get(scopes))
        .route("/api/v1/authenticate/account/details", get(account_details))
        .route("/api/v1.0/account/managedmembers", get(managed_members))
        .route("/api/v1.0/invite/accept/{token}", get(accept_by_get))
        .route(&format!("{ORG}/owner"), get(owner))
        .route(&format!("{ORG}/admins"), get(admins))
        .route(&format!("{ORG}/members"), get(members))
        .route(&format!("{ORG}/invite"), get(invites))
        .route(&format!("{ORG}/membership/tree"), get(tree))
        .route(
            &format!("{ORG}/members/{{user}}/limits"),
            get(member_limits),
        )
        .route(&format!("{ORG}/suborgs"), get(suborgs));
    let sub = format!("{ORG}/suborgs/{{suborg}}");
    r.route(&format!("{sub}/admins"), get(sub_admins))
        .route(&format!("{sub}/children"), get(sub_children))
        .route(&format!("{sub}/limits"), get(sub_limits))
        .route(&format!("{sub}/members"), get(sub_members))
        .route(
            &format!("{sub}/members/{{user}}/limits"),
            get(sub_member_limits),
        )
        .route(&format!("{sub}/membership/tree"), get(sub_tree))
}

/// Electros' word for a meson role.
pub fn org_role(role: &str) -> &'static str {
    match role {
        "owner" | "admin" => "ORGOWNER",
        "manager" => "ORGADMIN",
        _ => "ORGMEMBER",
    }
}

/// How Electros names a user: its email where meson knows it.
fn user(m: &Member) -> String {
    m.email.clone().unwrap_or_else(|| m.subject.clone())
}

/// The members of `org`, read as the caller acting in it.
async fn org_members(a: &Authed, org: &str) -> DResult<Vec<Member>> {
    a.meson
        .organization(org)
        .member_list()
        .await
        .map_err(Detail::meson)
}

fn users<'a>(members: impl Iterator<Item = &'a Member>) -> Vec<String> {
    members.map(user).collect()
}

fn admins_of(members: &[Member]) -> Vec<String> {
    users(
        members
            .iter()
            .filter(|m| m.role == "owner" || m.role == "manager"),
    )
}

/// `GET /api/v1/authenticate/scopes`: every organisation the caller may
/// act in, its token's first and preferred; under each, the
/// sub-organisations it acts in as the organisation's owner or manager.
async fn scopes(a: Authed) -> DResult<Json<Value>> {
    let list = a.meson.memberships().await.map_err(Detail::meson)?;
    let mut scopes = Vec::new();
    for (i, m) in list
        .memberships
        .iter()
        .filter(|m: &&Membership| m.via != "inherited")
        .enumerate()
    {
        let manages = matches!(m.role.as_str(), "owner" | "manager" | "admin");
        let subs = if manages {
            children(&a, &m.organization).await?
        } else {
            Vec::new()
        };
        let suborgs: Vec<Value> = subs
            .iter()
            .map(|s| {
                json!({"org_id": m.organization, "org_name": m.organization,
                       "suborg_id": s.id, "suborg_name": s.name,
                       "role": "SUBORGADMIN", "selectable": true})
            })
            .collect();
        scopes.push(json!({
            "org_id": m.organization,
            "org_name": m.organization,
            "suborg": null,
            "member": true,
            "selectable": true,
            "reason": null,
            "preferred": i == 0,
            "role": org_role(&m.role),
            "is_trial": false,
            "suborgs": suborgs,
        }));
    }
    Ok(Json(
        json!({"username": a.session.username, "scopes": scopes}),
    ))
}

/// `GET /api/v1/authenticate/account/details`: meson keeps no fiscal
/// details of an account.
async fn account_details(_: Authed) -> Detail {
    Detail::new(
        StatusCode::NOT_FOUND,
        "No account details: meson keeps none (an account is its identity provider's)",
    )
}

/// `GET /api/v1.0/account/managedmembers`: the members of the caller's
/// organisation.
async fn managed_members(a: Authed) -> DResult<Json<Value>> {
    let members = a.meson.member_list().await.map_err(Detail::meson)?;
    Ok(Json(json!({"users": users(members.iter())})))
}

/// `GET /api/v1.0/invite/accept/{token}`: a GET changes nothing; the
/// invitee accepts with meson's API.
async fn accept_by_get(_: Authed, Path(_token): Path<String>) -> Detail {
    Detail::new(
        StatusCode::BAD_REQUEST,
        "meson accepts an invitation with POST /v1/invitations/accept {\"token\": ...}, \
         signed in with the invited email (mesonctl invitation accept): a GET changes nothing",
    )
}

/// `GET /orgs/{org_id}/owner`: its first owner member, or the caller when
/// its own token makes it the owner of an organisation with no owner
/// member.
async fn owner(a: Authed, Path(org): Path<String>) -> DResult<Json<Value>> {
    let members = org_members(&a, &org).await?;
    if let Some(o) = members.iter().find(|m| m.role == "owner") {
        return Ok(Json(json!({"username": user(o)})));
    }
    let me = a.meson.memberships().await.map_err(Detail::meson)?;
    let own = me
        .memberships
        .iter()
        .any(|m| m.organization == org && matches!(m.role.as_str(), "owner" | "admin"));
    if own {
        return Ok(Json(json!({"username": a.session.username})));
    }
    Err(Detail::new(
        StatusCode::NOT_FOUND,
        "this organisation has no owner among its members (its owners are its identity \
         provider's)",
    ))
}

/// `GET /orgs/{org_id}/admins`: its owners and managers.
async fn admins(a: Authed, Path(org): Path<String>) -> DResult<Json<Value>> {
    let members = org_members(&a, &org).await?;
    Ok(Json(json!({"users": admins_of(&members)})))
}

/// `GET /orgs/{org_id}/members`.
async fn members(a: Authed, Path(org): Path<String>) -> DResult<Json<Value>> {
    let members = org_members(&a, &org).await?;
    Ok(Json(json!({"users": users(members.iter())})))
}

fn invite(i: &Invitation) -> Value {
    json!({
        "id": i.id,
        "invited_email": i.email,
        "org_id": i.organization,
        "org_name": i.organization,
        "suborg_name": null,
        "status": i.status,
        "role": i.role,
        "created_at": i.created,
        "expires_at": i.expires,
        "invited_by_email": i.invited_by,
        // Shown once, to whoever made it: meson keeps its hash only.
        "token": null,
    })
}

/// `GET /orgs/{org_id}/invite`: its invitations (a manager's read).
async fn invites(a: Authed, Path(org): Path<String>) -> DResult<Json<Value>> {
    let list = a
        .meson
        .organization(&org)
        .invitation_list()
        .await
        .map_err(Detail::meson)?;
    Ok(Json(Value::Array(list.iter().map(invite).collect())))
}

/// `GET /orgs/{org_id}/membership/tree`.
async fn tree(a: Authed, Path(org): Path<String>) -> DResult<Json<Value>> {
    let (members, subs) = tokio::try_join!(org_members(&a, &org), children(&a, &org))?;
    let mut suborgs = Vec::new();
    for s in &subs {
        suborgs.push(subtree(&a, s).await?);
    }
    Ok(Json(json!({
        "org_id": org,
        "org_name": org,
        "admins": admins_of(&members),
        "members": users(members.iter()),
        "suborgs": suborgs,
    })))
}

/// `GET /orgs/{org_id}/members/{user}/limits`: the organisation's limits,
/// each of the member's own limits (VMs, vCPUs, RAM) in place of the
/// organisation's; a user who is no member is `404`.
async fn member_limits(
    a: Authed,
    Path((org, who)): Path<(String, String)>,
) -> DResult<Json<Value>> {
    let scoped = a.meson.organization(&org);
    let (members, quota) = tokio::try_join!(
        async { scoped.member_list().await.map_err(Detail::meson) },
        async { scoped.quotas().await.map_err(Detail::meson) },
    )?;
    let Some(member) = members
        .iter()
        .find(|m| m.subject == who || m.email.as_deref() == Some(who.as_str()))
    else {
        return Err(Detail::new(
            StatusCode::NOT_FOUND,
            "no such member of this organisation",
        ));
    };
    let mut limits = wire::org_limits(&quota);
    for (key, own) in [
        ("max_vms", member.limits.vms),
        ("max_slots", member.limits.vcpus),
        ("max_ram_mib", member.limits.ram_mib),
    ] {
        if let Some(n) = own {
            limits[key] = json!(n);
        }
    }
    Ok(Json(limits))
}

/// The sub-organisations of `org` one level down, as Electros lists them.
async fn children(a: &Authed, org: &str) -> DResult<Vec<Organization>> {
    let all = a
        .meson
        .organization(org)
        .organization_list()
        .await
        .map_err(Detail::meson)?;
    Ok(all.into_iter().filter(|o| o.depth == 1).collect())
}

fn suborg_entry(o: &Organization) -> Value {
    json!({"suborg_id": o.id, "suborg_name": o.name})
}

/// `GET /orgs/{org_id}/suborgs`: its sub-organisations.
async fn suborgs(a: Authed, Path(org): Path<String>) -> DResult<Json<Value>> {
    let list = children(&a, &org).await?;
    Ok(Json(
        json!({"suborgs": list.iter().map(suborg_entry).collect::<Vec<_>>()}),
    ))
}

/// The id of `org`'s sub-organisation `suborg`, named by id or by its own
/// name; one that is not below `org` is `404`.
fn suborg_id(org: &str, suborg: &str) -> DResult<String> {
    let id = if suborg.starts_with(&format!("{org}.")) {
        suborg.to_owned()
    } else {
        format!("{org}.{suborg}")
    };
    if suborg.is_empty() || id.len() > 128 {
        return Err(Detail::new(
            StatusCode::NOT_FOUND,
            "Sub-organisation not found",
        ));
    }
    Ok(id)
}

/// The sub-organisation, read from its parent (a `404` when it is not
/// there, whoever asks).
async fn suborg(a: &Authed, org: &str, suborg: &str) -> DResult<Organization> {
    let id = suborg_id(org, suborg)?;
    match a.meson.organization(org).organization_get(&id).await {
        Ok(o) => Ok(o),
        Err(meson_client::Error::Api { status: 404, .. }) => Err(Detail::new(
            StatusCode::NOT_FOUND,
            "Sub-organisation not found",
        )),
        Err(e) => Err(Detail::meson(e)),
    }
}

async fn sub_admins(a: Authed, Path((org, sub)): Path<(String, String)>) -> DResult<Json<Value>> {
    let s = suborg(&a, &org, &sub).await?;
    let members = org_members(&a, &s.id).await?;
    Ok(Json(json!({"users": admins_of(&members)})))
}

async fn sub_members(a: Authed, Path((org, sub)): Path<(String, String)>) -> DResult<Json<Value>> {
    let s = suborg(&a, &org, &sub).await?;
    let members = org_members(&a, &s.id).await?;
    Ok(Json(json!({"users": users(members.iter())})))
}

async fn sub_children(a: Authed, Path((org, sub)): Path<(String, String)>) -> DResult<Json<Value>> {
    let s = suborg(&a, &org, &sub).await?;
    let list = children(&a, &s.id).await?;
    Ok(Json(
        json!({"suborgs": list.iter().map(suborg_entry).collect::<Vec<_>>()}),
    ))
}

async fn sub_limits(a: Authed, Path((org, sub)): Path<(String, String)>) -> DResult<Json<Value>> {
    let s = suborg(&a, &org, &sub).await?;
    let quota = a
        .meson
        .organization(&s.id)
        .quotas()
        .await
        .map_err(Detail::meson)?;
    Ok(Json(wire::org_limits(&quota)))
}

async fn sub_member_limits(
    a: Authed,
    Path((org, sub, who)): Path<(String, String, String)>,
) -> DResult<Json<Value>> {
    let s = suborg(&a, &org, &sub).await?;
    member_limits(a, Path((s.id, who))).await
}

/// A sub-organisation's tree, as Electros reads one.
async fn subtree(a: &Authed, s: &Organization) -> DResult<Value> {
    let (members, inner) = tokio::try_join!(org_members(a, &s.id), children(a, &s.id))?;
    Ok(json!({
        "suborg_id": s.id,
        "suborg_name": s.name,
        "admins": admins_of(&members),
        "members": users(members.iter()),
        "inner_suborgs": inner.iter().map(suborg_entry).collect::<Vec<_>>(),
    }))
}

async fn sub_tree(a: Authed, Path((org, sub)): Path<(String, String)>) -> DResult<Json<Value>> {
    let s = suborg(&a, &org, &sub).await?;
    subtree(&a, &s).await.map(Json)
}
