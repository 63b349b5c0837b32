//! The auth daemon's session extras: refresh, OAuth, certificates and
//! licences, over what meson has of them.
//!
//! A session is a meson API token (`POST /login`); meson's own logins go
//! through its identity provider, and the gateway configures no OAuth
//! provider of its own. So `GET /refresh` re-reads the session (as `GET
//! /status`, never minting anything: a GET changes nothing), `GET
//! /oauth/providers` lists none, and `GET /oauth/callback` opens no session
//! (a `400` saying how to log in). meson needs no licence (`GET
//! /license/list`: none) and issues no certificate to trust (`GET /cert`: a
//! `404` saying so).

use crate::catalog::Daemon;
use crate::error::Detail;
use crate::routes::{AppState, Authed};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use serde_json::json;

const GETS: [&str; 5] = [
    "/cert",
    "/oauth/callback",
    "/oauth/providers",
    "/refresh",
    "/license/list",
];

/// The routes served (the auth daemon's), `(method, path)`.
pub fn served() -> Vec<(&'static str, String)> {
    let b = Daemon::Auth.base();
    GETS.iter().map(|p| ("GET", format!("{b}{p}"))).collect()
}

pub fn routes() -> Router<AppState> {
    use axum::routing::get;
    let b = Daemon::Auth.base();
    let at = |p: &str| format!("{b}{p}");
    Router::new()
        .route(&at("/cert"), get(|| async { no_certificate() }))
        .route(&at("/oauth/callback"), get(|| async { no_oauth_login() }))
        .route(
            &at("/oauth/providers"),
            get(|| async { Json(json!({"providers": []})) }),
        )
        .route(&at("/refresh"), get(refresh))
        .route(
            &at("/license/list"),
            get(|_: Authed| async { Json(json!({"licenses": []})) }),
        )
}

/// `GET /refresh`: the session as `GET /status` shows it (meson checks its
/// token again); none is a `401`. Nothing is minted nor replaced.
async fn refresh(State(s): State<AppState>, headers: HeaderMap) -> Response {
    if s.0.sessions.find(&headers).is_none() {
        return Detail::unauthenticated().into_response();
    }
    let status = crate::routes::status(State(s), headers).await;
    match status {
        Ok(Json(v)) if v["authenticated"] == false => Detail::new(
            StatusCode::UNAUTHORIZED,
            "the session's token is no longer valid: log in again with POST /login",
        )
        .into_response(),
        Ok(v) => v.into_response(),
        Err(d) => d.into_response(),
    }
}

fn no_oauth_login() -> Detail {
    Detail::new(
        StatusCode::BAD_REQUEST,
        "no OAuth login to complete: the gateway configures no OAuth provider, and meson's \
         own logins go through its identity provider; log in with POST /login, the password \
         a meson API token",
    )
}

fn no_certificate() -> Detail {
    Detail::new(
        StatusCode::NOT_FOUND,
        "meson issues no certificate to trust: the daemons reach only meson's API, never a \
         host directly",
    )
}
