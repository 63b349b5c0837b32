//! The daemons' routes over meson. Each handler translates: the request to
//! meson's `/v1` call through the SDK, meson's answer (or error) back to the
//! daemon's shape. Validation, quotas, audit and workflows stay meson's.

use crate::catalog::{Daemon, ROUTES};
use crate::error::{DResult, Detail};
use crate::session::{self, COOKIE_NAME, Session, Sessions};
use crate::wire;
use axum::body::Bytes;
use axum::extract::{FromRequestParts, Path, Query, State};
use axum::http::header::{CONTENT_TYPE, SET_COOKIE};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodFilter, MethodRouter, on};
use axum::{Json, Router};
use meson_types::kaas::KaasCreateRequest;
use meson_types::network::NetworkCreateRequest;
use meson_types::requests::VmCreateRequest;
use meson_types::vm::PowerCommand;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use uuid::Uuid;

/// What every handler shares.
#[derive(Clone)]
pub struct AppState(pub Arc<Shared>);

pub struct Shared {
    /// meson, with no token of its own: each call uses its session's.
    pub meson: meson_client::Client,
    pub sessions: Sessions,
    /// Mark the session cookie `Secure` (served over TLS).
    pub secure_cookie: bool,
}

/// A caller with a session, and meson as that caller.
pub struct Authed {
    pub meson: meson_client::Client,
    pub session: Session,
}

impl FromRequestParts<AppState> for Authed {
    type Rejection = Detail;

    async fn from_request_parts(parts: &mut Parts, s: &AppState) -> Result<Authed, Detail> {
        let session = s.0.sessions.require(&parts.headers)?;
        let meson =
            s.0.meson
                .with_token(&session.token)
                .map_err(|_| Detail::unauthenticated())?;
        Ok(Authed { meson, session })
    }
}

/// A JSON body; empty is `null`. A body must say it is JSON
/// (`application/json` or `+json`, else `415`): a page of another site can
/// send `text/plain` without a preflight, and elemento-cli and Electros
/// always say JSON.
pub struct Body(pub Value);

impl<S: Send + Sync> axum::extract::FromRequest<S> for Body {
    type Rejection = Detail;

    async fn from_request(req: axum::extract::Request, s: &S) -> Result<Body, Detail> {
        let content_type = req
            .headers()
            .get(CONTENT_TYPE)
            .map(|v| v.to_str().unwrap_or("(not text)").to_owned());
        let bytes = Bytes::from_request(req, s).await.map_err(|e| {
            Detail::new(
                e.status(),
                format!("body: cannot be read: {}", e.body_text()),
            )
        })?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(Body(Value::Null));
        }
        match content_type {
            Some(ct) if meson_edge::is_json(&ct) => {}
            Some(ct) => {
                return Err(Detail::new(
                    StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    format!("expected Content-Type application/json, got {ct}"),
                ));
            }
            None => {
                return Err(Detail::new(
                    StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    "the body has no Content-Type: send it as application/json",
                ));
            }
        }
        serde_json::from_slice(&bytes)
            .map(Body)
            .map_err(|e| Detail::field("body", format!("is not JSON: {e}")))
    }
}

/// A required string field of the body.
fn string_field<'a>(body: &'a Value, names: &[&str]) -> DResult<&'a str> {
    names
        .iter()
        .find_map(|n| body.get(*n).and_then(Value::as_str))
        .ok_or_else(|| Detail::field(names[0], "is required"))
}

/// A required id field of the body.
pub(crate) fn id_field(body: &Value, names: &[&str]) -> DResult<Uuid> {
    let s = string_field(body, names)?;
    Uuid::parse_str(s.trim()).map_err(|_| Detail::field(names[0], format!("{s:?} is not an id")))
}

fn not_supported() -> Detail {
    Detail::not_supported()
}

// --- auth daemon

#[derive(serde::Deserialize)]
struct Credentials {
    username: Option<String>,
    password: Option<String>,
}

/// A refused login: `{"authenticated": false, "detail"}`.
struct Refused(StatusCode, String);

impl IntoResponse for Refused {
    fn into_response(self) -> Response {
        (
            self.0,
            Json(json!({"authenticated": false, "detail": self.1})),
        )
            .into_response()
    }
}

fn refused(status: StatusCode, detail: &str) -> Refused {
    Refused(status, detail.to_owned())
}

/// The credentials, trimmed; `Err` answers a login that lacks one.
fn credentials(c: Credentials) -> Result<(String, String), Refused> {
    match (c.username, c.password) {
        (Some(u), Some(p)) => Ok((u.trim().to_owned(), p.trim().to_owned())),
        _ => Err(refused(
            StatusCode::BAD_REQUEST,
            "username and password are required (the password is a meson API token)",
        )),
    }
}

/// Checks a login's token with meson: `Ok` with its subject when meson
/// takes it and the username is that subject.
async fn check_login(s: &AppState, username: &str, token: &str) -> Result<String, Refused> {
    let Some(claims) = session::claims(token) else {
        return Err(refused(
            StatusCode::UNAUTHORIZED,
            "password: not a meson API token (a JWT)",
        ));
    };
    let sub = claims
        .get("sub")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    if sub != username {
        return Err(refused(
            StatusCode::UNAUTHORIZED,
            "username: does not match the token's subject (sub)",
        ));
    }
    // meson checks the token (signature, expiry, tenant) on this call.
    let Ok(meson) = s.0.meson.with_token(token) else {
        return Err(refused(StatusCode::UNAUTHORIZED, "password: empty token"));
    };
    if let Err(e) = meson.quotas().await {
        let d = Detail::meson(e);
        return Err(refused(d.status, &d.detail));
    }
    Ok(sub)
}

/// `POST /login`: opens a session (the cookie's, and on loopback the
/// process's), replacing the one before. Only a first party reaches it: the
/// edge refuses pages of other origins.
async fn login_post(State(s): State<AppState>, Body(b): Body) -> Response {
    let c = serde_json::from_value(b).unwrap_or(Credentials {
        username: None,
        password: None,
    });
    let (username, token) = match credentials(c) {
        Ok(c) => c,
        Err(r) => return r.into_response(),
    };
    let sub = match check_login(&s, &username, &token).await {
        Ok(sub) => sub,
        Err(r) => return r.into_response(),
    };
    let id = s.0.sessions.login(Session {
        token,
        username: sub.clone(),
    });
    let mut res = Json(json!({"authenticated": true, "username": sub})).into_response();
    let cookie = format!(
        "{COOKIE_NAME}={id}; Path=/; HttpOnly; SameSite=Lax{}",
        if s.0.secure_cookie { "; Secure" } else { "" }
    );
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        res.headers_mut().insert(SET_COOKIE, v);
    }
    res
}

/// `GET /login?username=&password=`: re-validates the caller's current
/// session (Electros asks it at start with what it stored) and never opens
/// or replaces one: a GET is what an `<img>` of any page can send, and a
/// session swapped by one would put the user's next resources in another
/// tenant.
async fn login_get(
    State(s): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<BTreeMap<String, String>>,
) -> Response {
    let (username, token) = match credentials(Credentials {
        username: q.get("username").cloned(),
        password: q.get("password").cloned(),
    }) {
        Ok(c) => c,
        Err(r) => return r.into_response(),
    };
    let Some(current) = s.0.sessions.find(&headers) else {
        return refused(
            StatusCode::UNAUTHORIZED,
            "no session to re-validate: log in with POST /login",
        )
        .into_response();
    };
    let same_token: bool =
        subtle::ConstantTimeEq::ct_eq(token.as_bytes(), current.token.as_bytes()).into();
    if current.username != username || !same_token {
        return refused(
            StatusCode::UNAUTHORIZED,
            "these credentials are not the current session's (a GET never changes the \
             session: log in with POST /login)",
        )
        .into_response();
    }
    match check_login(&s, &username, &token).await {
        Ok(sub) => Json(json!({"authenticated": true, "username": sub})).into_response(),
        Err(r) => r.into_response(),
    }
}

async fn logout(State(s): State<AppState>, headers: HeaderMap) -> Response {
    s.0.sessions.logout(&headers);
    let mut res = Json(json!({})).into_response();
    res.headers_mut().insert(
        SET_COOKIE,
        HeaderValue::from_static("meson_session=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0"),
    );
    res
}

/// `GET /status`: from the token and meson's `/v1/quotas`; the token
/// itself is never echoed.
pub(crate) async fn status(State(s): State<AppState>, headers: HeaderMap) -> DResult<Json<Value>> {
    let Some(session) = s.0.sessions.find(&headers) else {
        return Ok(Json(json!({"authenticated": false, "username": null})));
    };
    let meson =
        s.0.meson
            .with_token(&session.token)
            .map_err(|_| Detail::unauthenticated())?;
    let quota = match meson.quotas().await {
        Ok(q) => q,
        Err(meson_client::Error::Api { status: 401, .. }) => {
            return Ok(Json(json!({"authenticated": false, "username": null})));
        }
        Err(e) => return Err(Detail::meson(e)),
    };
    let claims = session::claims(&session.token).unwrap_or_default();
    let roles = session::roles(&claims);
    // The highest of the token's roles, in Electros' words.
    let role = ["admin", "owner", "manager", "editor", "viewer"]
        .into_iter()
        .find(|w| roles.iter().any(|r| r == w))
        .map_or("", crate::orgs::org_role);
    let (limits, used) = wire::quota_limits(&quota);
    Ok(Json(json!({
        "authenticated": true,
        "username": session.username,
        "client_uid": session.username,
        "org_id": quota.tenant,
        "org_name": quota.tenant,
        "suborg_id": null,
        "suborg_name": null,
        "role": role,
        "roles": roles,
        "limits": limits,
        "usage": used,
        "active_subscriber": true,
        "email_verified": true,
    })))
}

async fn status_authenticated(State(s): State<AppState>, headers: HeaderMap) -> Json<Value> {
    Json(json!({"authenticated": s.0.sessions.find(&headers).is_some()}))
}

/// Electros asks which version it needs; meson asks for none.
async fn min_version() -> Json<Value> {
    Json(json!({"min_version": "0.0.0", "recommended": "0.0.0"}))
}

fn auth_routes() -> Router<AppState> {
    let b = Daemon::Auth.base();
    Router::new()
        .route(
            &format!("{b}/login"),
            axum::routing::post(login_post).get(login_get),
        )
        .route(&format!("{b}/logout"), axum::routing::post(logout))
        .route(&format!("{b}/status"), axum::routing::get(status))
        .route(
            &format!("{b}/status/authenticated"),
            axum::routing::get(status_authenticated),
        )
        .route(
            &format!("{b}/status/authenticated/me"),
            axum::routing::get(status),
        )
        .route(
            "/api/v1.0/min-ver/electros",
            axum::routing::get(min_version),
        )
        .route("/api/v1.0/min-ver/clients", axum::routing::get(min_version))
        .merge(crate::billing::routes(Daemon::Auth))
        .merge(crate::subscription::routes())
        .merge(crate::orgs::routes())
        .merge(crate::access::routes())
}

// --- compute daemon

async fn templates(a: Authed) -> DResult<Json<Value>> {
    let flavors = a.meson.flavors().await.map_err(Detail::meson)?;
    Ok(Json(flavors.iter().map(wire::template).collect()))
}

/// The VM name of a register: `info.vm_name` or `vm_name`; a template as
/// elemento-cli sends it (`info.name`) gets its name and a short suffix
/// (meson's VM names are unique per tenant; the daemons' were not).
fn vm_name(body: &Value) -> String {
    if let Some(n) = body
        .pointer("/info/vm_name")
        .or_else(|| body.get("vm_name"))
        .and_then(Value::as_str)
    {
        return n.to_owned();
    }
    let base: String = body
        .pointer("/info/name")
        .and_then(Value::as_str)
        .unwrap_or("vm")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let base = base.trim_matches('-');
    let base = if base.is_empty() { "vm" } else { base };
    let suffix = &Uuid::new_v4().simple().to_string()[..6];
    format!("{}-{suffix}", &base[..base.len().min(40)])
}

async fn canallocate_one(a: &Authed, body: &Value) -> DResult<Value> {
    let req: VmCreateRequest =
        Detail::typed(wire::specfile_to_vm(body, "quote")?, &wire::specfile_field)?;
    match a.meson.quote(&req.into()).await {
        Ok(meson_types::quote::QuoteAnswer::Vm(q)) => Ok(wire::canallocate(&q)),
        Ok(_) => Err(Detail::new(
            StatusCode::BAD_GATEWAY,
            "meson quoted a cluster for a VM",
        )),
        Err(e) => Err(Detail::from_meson(e, &wire::specfile_field)),
    }
}

async fn canallocate(a: Authed, Body(b): Body) -> DResult<Json<Value>> {
    canallocate_one(&a, &b).await.map(Json)
}

/// `canallocate/multiple`: a list of specfiles (or `{"specs": [...]}`),
/// one answer each, in order. The daemons' body is not public; this keeps
/// a client that sends either form working.
async fn canallocate_multiple(a: Authed, Body(b): Body) -> DResult<Json<Value>> {
    let list = match &b {
        Value::Array(l) => l.clone(),
        v => v
            .get("specs")
            .and_then(Value::as_array)
            .cloned()
            .ok_or_else(|| Detail::field("specs", "must be a list of specfiles"))?,
    };
    let mut out = Vec::new();
    for spec in &list {
        out.push(canallocate_one(&a, spec).await?);
    }
    Ok(Json(Value::Array(out)))
}

/// `register`: creates the VM and answers at once with its row; its state
/// shows in `/status` as meson's workflow progresses.
async fn register(a: Authed, Body(b): Body) -> DResult<Response> {
    let mut req: VmCreateRequest = Detail::typed(
        wire::specfile_to_vm(&b, &vm_name(&b))?,
        &wire::specfile_field,
    )?;
    let volumes = crate::storage::register_volumes(&b)?;
    if !volumes.is_empty() {
        req = req.attach_volumes(&volumes);
    }
    let created = a
        .meson
        .vm_create(&req)
        .await
        .map_err(|e| Detail::from_meson(e, &wire::specfile_field))?;
    Ok(warned(wire::vm_row(&created.vm), &created.warnings))
}

/// A created resource's row, with what meson said the user should know (a
/// Kubernetes version past its end of life, ...): as a `warnings` list in
/// the body, which Elemento's clients ignore, and as `Warning` headers
/// (RFC 9111 §5.5, code 299, as Kubernetes sends deprecations), which
/// scripts and proxies log.
pub(crate) fn warned(mut row: Value, warnings: &[meson_types::Warning]) -> Response {
    let mut headers = HeaderMap::new();
    for w in warnings {
        tracing::info!(field = %w.field, "meson warned: {}", w.message);
        let text = w.message.replace('\\', "\\\\").replace('"', "\\\"");
        if let Ok(v) = HeaderValue::from_str(&format!("299 meson \"{text}\"")) {
            headers.append(axum::http::header::WARNING, v);
        }
    }
    if !warnings.is_empty() {
        row["warnings"] = json!(warnings);
    }
    (headers, Json(row)).into_response()
}

async fn vm_status(a: Authed) -> DResult<Json<Value>> {
    let vms = a.meson.vm_list_all().await.map_err(Detail::meson)?;
    Ok(Json(vms.iter().map(wire::vm_row).collect()))
}

async fn unregister(a: Authed, Body(b): Body) -> DResult<Json<Value>> {
    let id = id_field(&b, &["local_index", "vm_uid"])?;
    let action = a.meson.vm_delete(id).await.map_err(Detail::meson)?;
    Ok(Json(json!({"uniqueID": id, "action_id": action.id})))
}

async fn power(a: Authed, b: Value, command: PowerCommand) -> DResult<Json<Value>> {
    let id = id_field(&b, &["local_index", "vm_uid"])?;
    let action = a.meson.vm_power(id, command).await.map_err(Detail::meson)?;
    Ok(Json(json!({"uniqueID": id, "action_id": action.id})))
}

/// `POST /update` `{local_index, slots?, ramsize?}` (vCPUs, MiB as in
/// `register`): meson's `resize_vm`. Like the daemon, it resizes a VM that
/// is off; a running one is a `409`.
async fn vm_update(a: Authed, Body(b): Body) -> DResult<Json<Value>> {
    let vm = id_field(&b, &["local_index", "vm_uid"])?;
    let whole = |key: &str| -> DResult<Option<u64>> {
        match b.get(key).filter(|v| !v.is_null()) {
            None => Ok(None),
            Some(v) => v
                .as_u64()
                .or_else(|| {
                    v.as_f64()
                        .filter(|f| f.fract() == 0.0 && *f >= 0.0)
                        .map(|f| f as u64)
                })
                .map(Some)
                .ok_or_else(|| Detail::field(key, format!("must be a whole number, not {v}"))),
        }
    };
    let req = meson_types::vm::VmResizeRequest {
        cores: whole("slots")?
            .map(|s| u32::try_from(s).map_err(|_| Detail::field("slots", "is too large")))
            .transpose()?,
        memory_mib: whole("ramsize")?,
        stop: None,
    };
    let action = a
        .meson
        .vm_resize(vm, &req)
        .await
        .map_err(|e| Detail::from_meson(e, &wire::resize_field))?;
    Ok(Json(json!({"uniqueID": vm, "action_id": action.id})))
}

/// `POST /migrate` `{local_index, host?}`: meson's `migrate_vm`, to `host`
/// (an AtomOS host of the VM's provider, also read as `target`) or the
/// cheapest other one with room; answered once accepted.
async fn vm_migrate(a: Authed, Body(b): Body) -> DResult<Json<Value>> {
    let vm = id_field(&b, &["local_index", "vm_uid"])?;
    let host = match b.get("host").or_else(|| b.get("target")) {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if !s.trim().is_empty() => Some(s.trim().to_owned()),
        Some(other) => {
            return Err(Detail::field(
                "host",
                format!("must name a host, not {other}"),
            ));
        }
    };
    let action = a.meson.vm_migrate(vm, host).await.map_err(Detail::meson)?;
    Ok(Json(json!({"uniqueID": vm, "action_id": action.id})))
}

/// `POST /volume/attach` `{local_index, volume_id}`: attaches a standalone
/// volume to the VM (meson's `attach_volume`, answered once accepted, as
/// the power routes).
async fn volume_attach(a: Authed, Body(b): Body) -> DResult<Json<Value>> {
    let vm = id_field(&b, &["local_index", "vm_uid"])?;
    let volume = id_field(&b, &["volume_id", "vid", "volumeID"])?;
    let action = a
        .meson
        .volume_attach(volume, vm)
        .await
        .map_err(Detail::meson)?;
    Ok(Json(
        json!({"uniqueID": vm, "volume_id": volume, "action_id": action.id}),
    ))
}

/// `POST /volume/detach` `{local_index, volume_id}`: detaches the volume
/// from that VM; one attached elsewhere (or nowhere) is a `409`.
async fn volume_detach(a: Authed, Body(b): Body) -> DResult<Json<Value>> {
    let vm = id_field(&b, &["local_index", "vm_uid"])?;
    let volume = id_field(&b, &["volume_id", "vid", "volumeID"])?;
    let v = a.meson.volume_get(volume).await.map_err(Detail::meson)?;
    if v.attached_to != Some(vm) {
        return Err(Detail::new(
            StatusCode::CONFLICT,
            format!("volume {volume} is not attached to VM {vm}"),
        ));
    }
    let action = a.meson.volume_detach(volume).await.map_err(Detail::meson)?;
    Ok(Json(
        json!({"uniqueID": vm, "volume_id": volume, "action_id": action.id}),
    ))
}

/// `POST /network/attach` `{local_index, network_uid}`: meson's
/// `attach_network` (a new NIC on the tenant's private network), answered
/// once accepted; the VM's `netdevs` list it at once.
async fn network_attach(a: Authed, Body(b): Body) -> DResult<Json<Value>> {
    let (vm, network) = vm_network(&b)?;
    let action = a
        .meson
        .vm_attach_network(vm, network)
        .await
        .map_err(Detail::meson)?;
    Ok(Json(
        json!({"uniqueID": vm, "network_uid": network, "action_id": action.id}),
    ))
}

/// `POST /network/detach` `{local_index, network_uid}`: meson's
/// `detach_network`.
async fn network_detach(a: Authed, Body(b): Body) -> DResult<Json<Value>> {
    let (vm, network) = vm_network(&b)?;
    let action = a
        .meson
        .vm_detach_network(vm, network)
        .await
        .map_err(Detail::meson)?;
    Ok(Json(
        json!({"uniqueID": vm, "network_uid": network, "action_id": action.id}),
    ))
}

/// The VM and the network a network attach or detach names.
fn vm_network(b: &Value) -> DResult<(Uuid, Uuid)> {
    Ok((
        id_field(b, &["local_index", "vm_uid"])?,
        id_field(b, &["network_uid"])?,
    ))
}

fn compute_routes() -> Router<AppState> {
    use axum::routing::{get, post};
    let b = Daemon::Compute.base();
    Router::new()
        .route(&format!("{b}/templates"), get(templates))
        .route(&format!("{b}/canallocate"), post(canallocate))
        .route(
            &format!("{b}/canallocate/multiple"),
            post(canallocate_multiple),
        )
        .route(&format!("{b}/register"), post(register))
        .route(&format!("{b}/status"), get(vm_status))
        .route(&format!("{b}/unregister"), post(unregister))
        .route(
            &format!("{b}/start"),
            post(|a: Authed, Body(b): Body| power(a, b, PowerCommand::Poweron)),
        )
        .route(
            &format!("{b}/stop"),
            post(|a: Authed, Body(b): Body| power(a, b, PowerCommand::Poweroff)),
        )
        .route(
            &format!("{b}/reboot"),
            post(|a: Authed, Body(b): Body| power(a, b, PowerCommand::Reboot)),
        )
        .route(&format!("{b}/update"), post(vm_update))
        .route(&format!("{b}/migrate"), post(vm_migrate))
        .route(&format!("{b}/volume/attach"), post(volume_attach))
        .route(&format!("{b}/volume/detach"), post(volume_detach))
        .route(&format!("{b}/network/attach"), post(network_attach))
        .route(&format!("{b}/network/detach"), post(network_detach))
        .merge(crate::backups::routes())
        .merge(crate::consoles::routes())
        .merge(crate::billing::routes(Daemon::Compute))
        .merge(crate::hosts::routes())
        .merge(crate::tunnels::routes())
}

// --- network daemon

async fn network_list(a: Authed) -> DResult<Json<Value>> {
    let nets = a.meson.network_list_all().await.map_err(Detail::meson)?;
    Ok(Json(nets.iter().map(wire::network_object).collect()))
}

async fn network_create(a: Authed, Body(b): Body) -> DResult<Json<Value>> {
    let req: NetworkCreateRequest = Detail::typed(wire::network_create(&b)?, &wire::network_field)?;
    let n = a
        .meson
        .network_create(&req)
        .await
        .map_err(|e| Detail::from_meson(e, &wire::network_field))?;
    Ok(Json(wire::network_object(&n)))
}

async fn network_delete(a: Authed, Body(b): Body) -> DResult<Json<Value>> {
    let id = id_field(&b, &["network_uid"])?;
    let action = a.meson.network_delete(id).await.map_err(Detail::meson)?;
    Ok(Json(json!({"network_uid": id, "action_id": action.id})))
}

/// `info`: `{network_uid}` in the body (POST) or the query (GET).
async fn network_info(
    a: Authed,
    Query(q): Query<BTreeMap<String, String>>,
    Body(b): Body,
) -> DResult<Json<Value>> {
    let b = match q.get("network_uid") {
        Some(id) => json!({"network_uid": id}),
        None => b,
    };
    let id = id_field(&b, &["network_uid"])?;
    let n = a.meson.network_get(id).await.map_err(Detail::meson)?;
    Ok(Json(json!({"network": wire::network_object(&n)})))
}

fn network_routes() -> Router<AppState> {
    use axum::routing::{get, post};
    let b = Daemon::Network.base();
    Router::new()
        .route(&format!("{b}/list"), get(network_list))
        .route(&format!("{b}/create"), post(network_create))
        // Production mounts DELETE; elemento-cli's generation used POST.
        .route(&format!("{b}/delete"), post(network_delete).delete(network_delete))
        .route(&format!("{b}/info"), post(network_info).get(network_info))
        .merge(crate::port_forwards::routes())
}

// --- service daemon

fn only_kaas(service: &str) -> DResult<()> {
    if service == "kaas" {
        Ok(())
    } else {
        Err(Detail::new(
            StatusCode::NOT_IMPLEMENTED,
            format!("the {service} service is not supported by meson (only kaas)"),
        ))
    }
}

async fn kaas_cancreate(
    a: Authed,
    Path(service): Path<String>,
    Body(b): Body,
) -> DResult<Json<Value>> {
    only_kaas(&service)?;
    let req: KaasCreateRequest = Detail::typed(wire::kaas_form(&b)?, &wire::kaas_field)?;
    match a.meson.quote(&req.into()).await {
        Ok(meson_types::quote::QuoteAnswer::Kaas(q)) => Ok(Json(wire::kaas_cancreate(&q))),
        Ok(_) => Err(Detail::new(
            StatusCode::BAD_GATEWAY,
            "meson quoted a VM for a cluster",
        )),
        Err(e) => Err(Detail::from_meson(e, &wire::kaas_field)),
    }
}

async fn kaas_create(a: Authed, Path(service): Path<String>, Body(b): Body) -> DResult<Response> {
    only_kaas(&service)?;
    let req: KaasCreateRequest = Detail::typed(wire::kaas_form(&b)?, &wire::kaas_field)?;
    let created = a
        .meson
        .cluster_create(&req)
        .await
        .map_err(|e| Detail::from_meson(e, &wire::kaas_field))?;
    let mut row = wire::kaas_row(&created.cluster);
    row["payment_url"] = Value::Null;
    Ok(warned(row, &created.warnings))
}

/// `running`: NDJSON, one row per line, each line ended by `\n`.
async fn kaas_running(a: Authed, Path(service): Path<String>) -> DResult<Response> {
    only_kaas(&service)?;
    let clusters = a.meson.cluster_list_all().await.map_err(Detail::meson)?;
    let mut body = String::new();
    for c in &clusters {
        body.push_str(&wire::kaas_row(c).to_string());
        body.push('\n');
    }
    Ok(([(CONTENT_TYPE, "application/x-ndjson")], body).into_response())
}

fn service_id(s: &str) -> DResult<Uuid> {
    Uuid::parse_str(s.trim())
        .map_err(|_| Detail::field("service_uuid", format!("{s:?} is not an id")))
}

async fn kaas_running_one(
    a: Authed,
    Path((service, id)): Path<(String, String)>,
) -> DResult<Json<Value>> {
    only_kaas(&service)?;
    let c = a
        .meson
        .cluster_get(service_id(&id)?)
        .await
        .map_err(Detail::meson)?;
    Ok(Json(wire::kaas_detail(&c)))
}

async fn kaas_credentials(
    a: Authed,
    Path((service, id)): Path<(String, String)>,
) -> DResult<Response> {
    only_kaas(&service)?;
    let yaml = a
        .meson
        .kubeconfig(service_id(&id)?, None)
        .await
        .map_err(Detail::meson)?;
    Ok(([(CONTENT_TYPE, "text/plain; charset=utf-8")], yaml).into_response())
}

async fn kaas_delete(a: Authed, Path(service): Path<String>, Body(b): Body) -> DResult<Response> {
    only_kaas(&service)?;
    let id = id_field(&b, &["service_uuid"])?;
    a.meson.cluster_delete(id).await.map_err(Detail::meson)?;
    Ok(StatusCode::OK.into_response())
}

/// The service daemon's routes, relative to its base (mounted under
/// `/api/v1.0/client/service` and, on the single-origin listener, also
/// under Electros' web prefix `/api/v1.0/service`).
fn service_routes() -> Router<AppState> {
    use axum::routing::{delete, get, post};
    Router::new()
        .route("/{service}/cancreate", post(kaas_cancreate))
        .route("/{service}/create", post(kaas_create))
        .route("/{service}/running", get(kaas_running))
        .route("/{service}/running/{service_uuid}", get(kaas_running_one))
        .route(
            "/{service}/credentials/{service_uuid}",
            get(kaas_credentials),
        )
        .route("/{service}/delete", delete(kaas_delete))
        .route("/experimental", get(experimental))
}

/// `GET /experimental`: the experimental services, a bare list: meson's
/// one service, KaaS, is not one.
async fn experimental() -> Json<Value> {
    Json(json!([]))
}

// --- target daemon

/// meson's providers as Elemento's provider catalogue: every one fully
/// supports VMs, block storage and managed Kubernetes.
async fn supported_providers(a: &Authed) -> DResult<Value> {
    let providers = a.meson.providers().await.map_err(Detail::meson)?;
    let mut out = serde_json::Map::new();
    for p in &providers {
        let regions: serde_json::Map<String, Value> = p
            .regions
            .iter()
            .map(|r| {
                (
                    r.name.clone(),
                    json!({"country": "", "location": r.name, "continent": r.continent,
                           "plus_code": "", "certifications": []}),
                )
            })
            .collect();
        let service = |name: &str, display: &str, kind: &str, sub: &str| {
            json!({"name": name, "display_name": display, "type": kind, "sub_type": sub,
                   "regions": regions, "support_level": "full"})
        };
        out.insert(
            p.name.clone(),
            json!({
                "display_name": p.name,
                "status": "production",
                "server_ips": [],
                "services": [
                    service("vmManagement", "VM Management", "compute", "vm"),
                    service("blockStorage", "Block Storage", "storage", "blockstorage"),
                    service("k8s", "Kubernetes", "service", "kaas"),
                ],
            }),
        );
    }
    Ok(Value::Object(out))
}

async fn target_config(a: Authed, Path(file): Path<String>) -> DResult<Json<Value>> {
    match file.trim_end_matches(".json") {
        "supported_providers" => supported_providers(&a).await.map(Json),
        _ => Err(not_supported()),
    }
}

/// meson's providers as targets the caller is granted and connected to
/// ([`crate::targets::org_target`]).
async fn targets(a: &Authed) -> DResult<Vec<Value>> {
    crate::targets::org_targets(a).await
}

async fn grants_me(a: Authed) -> DResult<Json<Value>> {
    let targets = targets(&a).await?;
    let grants: Vec<Value> = targets
        .iter()
        .map(|t| json!({"target_id": t["target_id"], "granted": true}))
        .collect();
    Ok(Json(
        json!({"targets": targets, "scenarios": [], "target_grants": grants}),
    ))
}

async fn connections_me(a: Authed) -> DResult<Json<Value>> {
    let targets = targets(&a).await?;
    let ids: Vec<Value> = targets.iter().map(|t| t["target_id"].clone()).collect();
    Ok(Json(json!({
        "active_targets": targets,
        "active_target_ids": ids,
        "active_connections": ids.len(),
        "active_scenario_id": null,
        // Electros hides the PaaS pages unless this is positive.
        "max_connections": ids.len().max(1),
    })))
}

/// Every target is reachable: meson itself answered. The counts are
/// `connections/me`'s.
async fn connections_status(a: Authed) -> DResult<Json<Value>> {
    let targets = targets(&a).await?;
    let status: Vec<Value> = targets
        .iter()
        .map(|t| json!({"target_id": t["target_id"], "connected": true, "reachable": true, "status": "connected"}))
        .collect();
    Ok(Json(json!({
        "connections": status,
        "active_connections": status.len(),
        "max_connections": status.len().max(1),
    })))
}

fn target_routes() -> Router<AppState> {
    use axum::routing::get;
    let b = Daemon::Target.base();
    Router::new()
        .route(&format!("{b}/configs/{{file}}"), get(target_config))
        .route(&format!("{b}/grants/me"), get(grants_me))
        .route(&format!("{b}/connections/me"), get(connections_me))
        .route(
            &format!("{b}/connections/me/connections-status"),
            get(connections_status),
        )
        .route(
            &format!("{b}/refresh"),
            get(|_: Authed| async { Json(json!({})) }),
        )
        .merge(crate::targets::routes())
}

// --- assembly

fn method_filter(m: &str) -> MethodFilter {
    match m {
        "GET" => MethodFilter::GET,
        "POST" => MethodFilter::POST,
        "PUT" => MethodFilter::PUT,
        "PATCH" => MethodFilter::PATCH,
        "DELETE" => MethodFilter::DELETE,
        other => unreachable_method(other),
    }
}

#[allow(clippy::panic)] // a typo in the constant route table, caught by every test
fn unreachable_method(m: &str) -> MethodFilter {
    panic!("unknown method {m} in the route table")
}

/// The routes served, `(method, path)`, per daemon (absolute paths).
fn served(d: Daemon) -> Vec<(&'static str, String)> {
    let b = d.base();
    let rel = |m: &'static str, p: &str| (m, format!("{b}{p}"));
    match d {
        Daemon::Auth => {
            let mut routes = vec![
                rel("GET", "/login"),
                rel("POST", "/login"),
                rel("POST", "/logout"),
                rel("GET", "/status"),
                rel("GET", "/status/authenticated"),
                rel("GET", "/status/authenticated/me"),
                ("GET", "/api/v1.0/min-ver/electros".into()),
                ("GET", "/api/v1.0/min-ver/clients".into()),
            ];
            routes.extend(crate::billing::served(d));
            routes.extend(crate::subscription::served());
            routes.extend(crate::orgs::served());
            routes.extend(crate::access::served());
            routes
        }
        Daemon::Compute => {
            let mut routes = vec![
                rel("GET", "/templates"),
                rel("POST", "/canallocate"),
                rel("POST", "/canallocate/multiple"),
                rel("POST", "/register"),
                rel("GET", "/status"),
                rel("POST", "/unregister"),
                rel("POST", "/start"),
                rel("POST", "/stop"),
                rel("POST", "/reboot"),
                rel("POST", "/update"),
                rel("POST", "/migrate"),
                rel("POST", "/volume/attach"),
                rel("POST", "/volume/detach"),
                rel("POST", "/network/attach"),
                rel("POST", "/network/detach"),
            ];
            routes.extend(crate::backups::served());
            routes.extend(crate::consoles::served());
            routes.extend(crate::billing::served(d));
            routes.extend(crate::hosts::served());
            routes.extend(crate::tunnels::served());
            routes
        }
        Daemon::Storage => crate::storage::served(),
        Daemon::Network => {
            let mut routes = vec![
                rel("GET", "/list"),
                rel("POST", "/create"),
                rel("POST", "/delete"),
                rel("DELETE", "/delete"),
                rel("POST", "/info"),
                rel("GET", "/info"),
            ];
            routes.extend(crate::port_forwards::served());
            routes
        }
        Daemon::Target => {
            let mut routes = vec![
                rel("GET", "/configs/{file}"),
                rel("GET", "/grants/me"),
                rel("GET", "/connections/me"),
                rel("GET", "/connections/me/connections-status"),
                rel("GET", "/refresh"),
            ];
            routes.extend(crate::targets::served());
            routes
        }
        // Served by the nested service router.
        Daemon::Service => vec![
            rel("POST", "/{service}/cancreate"),
            rel("POST", "/{service}/create"),
            rel("GET", "/{service}/running"),
            rel("GET", "/{service}/running/{service_uuid}"),
            rel("GET", "/{service}/credentials/{service_uuid}"),
            rel("DELETE", "/{service}/delete"),
            rel("GET", "/experimental"),
        ],
    }
}

/// A daemon's routes: those served, and `501` for the rest of its
/// catalogue (`GET /` and `/version` are the listener's).
fn daemon_routes(d: Daemon) -> Router<AppState> {
    let served_set: HashSet<(&str, String)> = served(d).into_iter().collect();
    let mut r = match d {
        Daemon::Auth => auth_routes(),
        Daemon::Compute => compute_routes(),
        Daemon::Storage => crate::storage::routes(),
        Daemon::Network => network_routes(),
        Daemon::Target => target_routes(),
        // Production's `GET /experimental` at the daemon's root (the
        // catalogue lists it under the base, where the nested service
        // router serves it too).
        Daemon::Service => Router::new().route("/experimental", axum::routing::get(experimental)),
    };
    let mut todo: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (rd, m, p) in ROUTES {
        if *rd != d || *p == "/" || *p == "/version" || served_set.contains(&(*m, (*p).to_owned()))
        {
            continue;
        }
        todo.entry(p).or_default().push(m);
    }
    for (path, methods) in todo {
        let mut mr: MethodRouter<AppState> = MethodRouter::new();
        for m in methods {
            mr = mr.on(method_filter(m), || async { not_supported() });
        }
        r = r.route(path, mr);
    }
    r
}

async fn fallback() -> Detail {
    Detail::new(StatusCode::NOT_FOUND, "Not Found")
}

async fn method_not_allowed() -> Detail {
    Detail::new(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed")
}

fn version() -> MethodRouter<AppState> {
    on(MethodFilter::GET, || async {
        Json(json!({"version": env!("CARGO_PKG_VERSION"), "backend": "meson"}))
    })
}

/// A listener's app: the daemons `daemons`, plus `GET /` (health) and
/// `GET /version`; `single_origin` adds Electros' web prefix for services.
pub fn app(state: AppState, daemons: &[Daemon], single_origin: bool) -> Router {
    let names: Vec<&str> = daemons.iter().map(|d| d.name()).collect();
    let health = json!({"status": "ok", "backend": "meson", "daemons": names});
    let mut r: Router<AppState> = Router::new()
        .route(
            "/",
            axum::routing::get(move || {
                let h = health.clone();
                async move { Json(h) }
            }),
        )
        .route("/version", version());
    for d in daemons {
        r = r.merge(daemon_routes(*d));
        if *d == Daemon::Service {
            r = r.nest(Daemon::Service.base(), service_routes());
            if single_origin {
                r = r.nest("/api/v1.0/service", service_routes());
            }
        }
    }
    r.fallback(fallback)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(state)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn served_routes_are_catalogued() {
        // A served route outside the catalogue is a typo (or a deliberate
        // extra, listed here).
        let extras: &[(&str, &str)] = &[
            ("POST", "/api/v1.0/client/network/delete"),
            ("GET", "/api/v1.0/client/network/info"),
            ("GET", "/api/v1.0/client/volume/info"),
            // FastAPI's own path of `GET /api/v1.0/subscription` (the
            // catalogue drops the trailing slash).
            ("GET", "/api/v1.0/subscription/"),
        ];
        for d in Daemon::ALL {
            for (m, p) in served(d) {
                let known = ROUTES
                    .iter()
                    .any(|(rd, rm, rp)| *rd == d && *rm == m && *rp == p)
                    || extras.iter().any(|(em, ep)| *em == m && *ep == p);
                assert!(known, "{} {m} {p} is not in the catalogue", d.name());
            }
        }
    }
}
