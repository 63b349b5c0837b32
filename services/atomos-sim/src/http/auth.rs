//! Auth routes: login (POST, and the GUI's GET re-validation), logout, status.

use super::{ApiError, ApiResult, ok, parse};
use crate::host::SimHost;
use atomos_driver::schema::auth::{AuthStatusResponse, LoginBody, LoginResponse};
use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use serde_json::json;

pub(super) fn routes() -> Router<SimHost> {
    Router::new()
        .route("/login", post(login).get(login_query))
        .route("/logout", post(logout))
        .route("/status", get(status))
}

/// The simulator accepts any non-empty credentials.
fn log_in(host: &SimHost, creds: LoginBody) -> ApiResult {
    if creds.username.is_empty() || creds.password.is_empty() {
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "Invalid credentials",
        ));
    }
    host.state().user = Some(creds.username);
    ok(LoginResponse {
        authenticated: true,
    })
}

async fn login(State(host): State<SimHost>, body: Bytes) -> ApiResult {
    log_in(&host, parse(&body)?)
}

async fn login_query(
    State(host): State<SimHost>,
    query: Result<Query<LoginBody>, QueryRejection>,
) -> ApiResult {
    let Query(creds) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let answer = log_in(&host, creds)?;
    // A GET that changes the state: the gate writes through only the others.
    host.save()
        .await
        .map_err(|e| super::saving_failed(&host, &e))?;
    Ok(answer)
}

async fn logout(State(host): State<SimHost>) -> ApiResult {
    host.state().user = None;
    ok(json!({}))
}

async fn status(State(host): State<SimHost>) -> ApiResult {
    let user = host.state().user.clone();
    ok(AuthStatusResponse {
        authenticated: user.is_some(),
        username: user,
    })
}
