//! Consoles: `POST /v1/vms/{id}/actions/request-console`, `/v1/consoles`,
//! and the WebSocket a VNC client connects to, relayed by
//! [`crate::console`].

use super::responses::{BadId, BadQuery, CannotModify, NoSuchConsole, NoSuchVm};
use super::{AppState, CorrelationId, parse_id, query_pairs};
use crate::app::consoles::ConsoleQuery;
use crate::auth::Principal;
use crate::error::{ApiError, ApiResult};
use crate::views;
use axum::Json;
use axum::extract::{Path, RawQuery, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use meson_core::{ConsoleId, Error, VmId};
use meson_types::ErrorResponse;
use meson_types::console::{ConsoleList, ConsoleRequestResponse, ConsoleResponse};
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(request))
        .routes(routes!(list))
        .routes(routes!(read, delete))
        .routes(routes!(websocket))
}

/// Hands out a console on a VM's screen.
#[utoipa::path(
    post,
    path = "/v1/vms/{id}/actions/request-console",
    tag = "consoles",
    operation_id = "vm_request_console",
    summary = "Request a console on a VM's screen",
    description = "Answers a WebSocket URL on meson (`wss_url`, with a one-time token) and a VNC \
        password, both shown this once. A VNC client that connects to the URL within 60 s and \
        answers VNC authentication with the password sees the VM's screen, relayed by meson \
        from its host; the first connection uses the console up, right password or not. The \
        session closes when either side does, when the console is deleted, and after 15 \
        minutes without input (keys, pointer, clipboard). The VM must be `running`. Each \
        session is in the audit log (`console_connect`, `console_disconnect`).",
    params(("id" = uuid::Uuid, Path, description = "The VM's id.")),
    responses(
        (status = 201, description = "The console (`requested`), its URL and password.",
            body = ConsoleRequestResponse, links(
                ("GetConsole" = (operation_id = "console_get",
                    parameters(("id" = "$response.body#/console/id")))),
            )),
        BadId,
        CannotModify,
        NoSuchVm,
        (status = 409, description = "The VM is not `running` (`conflict`).",
            body = ErrorResponse),
    ),
)]
async fn request(
    State(s): State<AppState>,
    p: Principal,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let vm: VmId = parse_id(&id)?;
    let base = match &s.config.public_url {
        Some(url) => url.clone(),
        None => {
            let host = headers
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .unwrap_or("127.0.0.1");
            format!("http://{host}")
        }
    };
    let r = s.app.vm_request_console(&p, vm, &base).await?;
    let res = ConsoleRequestResponse {
        console: views::console(&r.console),
        wss_url: r.url,
        password: r.password,
    };
    Ok((StatusCode::CREATED, Json(res)).into_response())
}

/// Lists the tenant's consoles.
#[utoipa::path(
    get,
    path = "/v1/consoles",
    tag = "consoles",
    operation_id = "console_list",
    summary = "List consoles",
    description = "The tenant's newest consoles first: requests, sessions and how they ended.",
    params(
        ("vm" = Option<uuid::Uuid>, Query, description = "Only this VM's."),
        ("status" = Option<String>, Query, description = "Only these statuses \
            (`requested`, `open`, `closed`, `expired`, `revoked`; comma-separated or repeated)."),
        ("limit" = Option<u32>, Query, description = "At most this many, 1 to 100 (default 50).",
            minimum = 1, maximum = 100),
    ),
    responses(
        (status = 200, description = "The consoles.", body = ConsoleList),
        BadQuery,
    ),
)]
async fn list(
    State(s): State<AppState>,
    p: Principal,
    RawQuery(q): RawQuery,
) -> ApiResult<Json<ConsoleList>> {
    let pairs = query_pairs(q.as_deref())?;
    let first = |key: &str| {
        pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    };
    // Unknown parameters are ignored, as on every list.
    let query = ConsoleQuery::parse(
        first("vm"),
        pairs
            .iter()
            .filter(|(k, _)| k == "status")
            .map(|(_, v)| v.as_str()),
        first("limit"),
    )?;
    let consoles = s.app.console_list(&p, &query).await?;
    Ok(Json(ConsoleList {
        consoles: consoles.iter().map(views::console).collect(),
    }))
}

/// Reads a console.
#[utoipa::path(
    get,
    path = "/v1/consoles/{id}",
    tag = "consoles",
    operation_id = "console_get",
    summary = "Get a console",
    params(("id" = uuid::Uuid, Path, description = "The console's id.")),
    responses(
        (status = 200, description = "The console (never its URL or password).",
            body = ConsoleResponse),
        BadId,
        NoSuchConsole,
    ),
)]
async fn read(
    State(s): State<AppState>,
    p: Principal,
    Path(id): Path<String>,
) -> ApiResult<Json<ConsoleResponse>> {
    let c = s.app.console_get(&p, parse_id(&id)?).await?;
    Ok(Json(ConsoleResponse {
        console: views::console(&c),
    }))
}

/// Ends a console.
#[utoipa::path(
    delete,
    path = "/v1/consoles/{id}",
    tag = "consoles",
    operation_id = "console_delete",
    summary = "End a console",
    description = "A console not used yet is `revoked`: its URL no longer connects. An open \
        session is `closed` (its relay ends it within 5 s). The record stays.",
    params(("id" = uuid::Uuid, Path, description = "The console's id.")),
    responses(
        (status = 200, description = "The console, ended.", body = ConsoleResponse),
        BadId,
        CannotModify,
        NoSuchConsole,
        (status = 409, description = "It is closed, expired or revoked already (`conflict`).",
            body = ErrorResponse),
    ),
)]
async fn delete(
    State(s): State<AppState>,
    p: Principal,
    Path(id): Path<String>,
) -> ApiResult<Json<ConsoleResponse>> {
    let c = s.app.console_delete(&p, parse_id(&id)?).await?;
    Ok(Json(ConsoleResponse {
        console: views::console(&c),
    }))
}

/// The console's WebSocket.
#[utoipa::path(
    get,
    path = "/v1/consoles/{id}/websocket",
    tag = "consoles",
    operation_id = "console_connect",
    summary = "Connect to a console (WebSocket)",
    description = "A WebSocket upgrade (`Upgrade: websocket`, version 13; the subprotocol \
        `binary` if asked for) whose binary messages carry RFB: meson offers VNC \
        authentication, and relays the VM's screen once the console's password answers it. \
        The token is the credential, so a browser's WebSocket needs no bearer token; one \
        sent must be of the console's tenant. Pages of origins other than meson's own and \
        the allowed ones are refused.",
    security(()),
    params(
        ("id" = uuid::Uuid, Path, description = "The console's id."),
        ("token" = String, Query, description = "The token of the console's `wss_url`."),
    ),
    responses(
        (status = 101, description = "Switching to the WebSocket protocol."),
        (status = 400, description = "A bad id, or not a WebSocket upgrade (`invalid_input`).",
            body = ErrorResponse),
        (status = 401, description = "A bearer token sent is not valid (`unauthorized`).",
            body = ErrorResponse),
        (status = 403, description = "From a page of another origin (`forbidden`).",
            body = ErrorResponse),
        (status = 404, description = "No console has this id and token, or it is another \
            tenant's than the bearer token's (`not_found`).", body = ErrorResponse),
        (status = 409, description = "The console was used, expired or was revoked, or its VM \
            no longer runs (`conflict`).", body = ErrorResponse),
    ),
)]
async fn websocket(
    State(s): State<AppState>,
    Path(id): Path<String>,
    RawQuery(q): RawQuery,
    mut req: Request,
) -> ApiResult<Response> {
    let first_party = req
        .extensions()
        .get::<meson_edge::Provenance>()
        .is_none_or(meson_edge::Provenance::is_first_party);
    if !first_party {
        return Err(ApiError(Error::Forbidden {
            message: "a console is not opened from pages of other origins".into(),
        }));
    }
    let id: ConsoleId = parse_id(&id)?;
    if let Some(v) = req.headers().get(header::AUTHORIZATION) {
        let token = crate::gate::bearer(v.to_str().ok()).map_err(|_| Error::Unauthorized)?;
        let caller = crate::gate::authenticate(&s, token).await?;
        s.app.watched(s.app.console_of(id, &caller)).await?;
    }
    let key = upgrade_key(req.headers())?;
    let token = query_pairs(q.as_deref())?
        .into_iter()
        .find(|(k, _)| k == "token")
        .map(|(_, v)| v)
        .unwrap_or_default();
    let claimed = s.app.watched(s.app.console_claim(id, &token)).await?;
    let binary = req
        .headers()
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|p| p.trim() == "binary");
    let correlation_id = req
        .extensions()
        .get::<CorrelationId>()
        .map(|c| c.0.clone())
        .unwrap_or_default();
    let Some(upgrade) = req.extensions_mut().remove::<hyper::upgrade::OnUpgrade>() else {
        return Err(ApiError(Error::invalid(
            "(headers)",
            "this connection cannot switch to WebSocket (HTTP/2 is not supported for consoles)",
        )));
    };
    let state = s.clone();
    tokio::spawn(async move {
        let io = match upgrade.await {
            Ok(upgraded) => hyper_util::rt::TokioIo::new(upgraded),
            Err(e) => {
                tracing::info!(console = %id, error = %e, "a console's connection did not upgrade");
                let closed = meson_db::scope::system(meson_db::consoles::close(
                    &state.app.pool,
                    id,
                    "the connection did not switch to WebSocket",
                    0,
                    0,
                ));
                let _ = closed.await;
                return;
            }
        };
        let config = WebSocketConfig::default()
            .max_message_size(Some(16 << 20))
            .max_frame_size(Some(16 << 20));
        let ws =
            tokio_tungstenite::WebSocketStream::from_raw_socket(io, Role::Server, Some(config))
                .await;
        Box::pin(crate::console::serve(state, claimed, ws, correlation_id)).await;
    });
    let mut res = StatusCode::SWITCHING_PROTOCOLS.into_response();
    let h = res.headers_mut();
    h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    h.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    let accept = tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes());
    h.insert(
        header::SEC_WEBSOCKET_ACCEPT,
        HeaderValue::from_str(&accept).map_err(|_| Error::internal("an accept key"))?,
    );
    if binary {
        h.insert(
            header::SEC_WEBSOCKET_PROTOCOL,
            HeaderValue::from_static("binary"),
        );
    }
    Ok(res)
}

/// The `Sec-WebSocket-Key` of a WebSocket upgrade; anything else is a
/// `400` saying what a console expects.
fn upgrade_key(h: &HeaderMap) -> ApiResult<String> {
    let has = |name: header::HeaderName, token: &str| {
        h.get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|v| v.trim().eq_ignore_ascii_case(token))
    };
    let refuse = |why: &str| {
        ApiError(Error::invalid(
            "(headers)",
            format!("a console is a WebSocket: {why}"),
        ))
    };
    if !has(header::UPGRADE, "websocket") || !has(header::CONNECTION, "upgrade") {
        return Err(refuse(
            "connect with Connection: Upgrade and Upgrade: websocket",
        ));
    }
    if !has(header::SEC_WEBSOCKET_VERSION, "13") {
        return Err(refuse("Sec-WebSocket-Version must be 13"));
    }
    h.get(header::SEC_WEBSOCKET_KEY)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| refuse("Sec-WebSocket-Key is missing"))
}
