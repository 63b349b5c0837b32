//! The simulator's own HTTP endpoint: the fleet's inventory and runtime fault control.
//!
//! - `GET /inventory`: `{"seed": n, "hosts": [HostInventory, ...]}`
//! - `GET /inventory/{host}`: one [`crate::HostInventory`]
//! - `GET /faults/{host}`: `{"host": name, "faults": FaultSpec}` (what is in force)
//! - `POST /faults/{host}` with a [`crate::FaultSpec`] body: applies it, waits
//!   for `down`/`up` to take effect, answers like `GET`
//! - `DELETE /faults/{host}`: clears every fault and brings the host up
//! - `GET /seed`, `POST /seed` with `{"seed": n}`: every host's fault seed
//! - `POST /inventory/{host}/vms/{vm}/ports` with `{"port": 22, "upstream":
//!   "127.0.0.1:5000"}`: the real address `upstream` stands in for port
//!   `port` of the guest of VM `vm` (its name or `uniqueID`), so that the
//!   host's port forwards to that port reach it while the VM runs
//!   ([`crate::SimHost::serve_guest_port`]); answers
//!   `{"host", "vm", "port", "upstream"}`
//! - `DELETE /inventory/{host}/vms/{vm}/ports/{port}`: nothing stands in for
//!   it any more; connections forwarded to it are closed
//! - `POST /inventory/{host}/volumes/{volume}/write` with `{"data": "..."}`:
//!   writes `data` over volume `volume` (its id or name), as a guest would
//!   ([`crate::SimHost::write_volume`]): its `content` becomes the sha256 of
//!   `data`'s UTF-8 bytes; answers `{"host", "volume", "content"}`
//!
//! Errors are `{"detail": ...}`: 400 for a bad body (or a write to a
//! cloud-init ISO), 404 for an unknown host, VM or volume (or a guest port
//! not served).

use crate::faults::{FaultError, FaultSpec};
use crate::host::WriteRefused;
use crate::http::{ApiError, ApiResult, ok, parse};
use crate::{SimHost, SimInner, Simulator, host_inventory};
use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::PathRejection;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::StatusCode;
use axum::routing::{delete, get, post};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::net::SocketAddr;
use std::sync::Weak;

/// Fault bodies are small.
const BODY_LIMIT: usize = 1024 * 1024;

type Fleet = Weak<SimInner>;

pub(crate) fn router(fleet: Fleet) -> Router {
    Router::new()
        .route("/", get(index))
        .route("/inventory", get(inventory))
        .route("/inventory/{host}", get(one_inventory))
        .route(
            "/faults/{host}",
            get(get_faults).post(set_faults).delete(clear_faults),
        )
        .route("/seed", get(get_seed).post(set_seed))
        .route("/inventory/{host}/vms/{vm}/ports", post(serve_port))
        .route("/inventory/{host}/vms/{vm}/ports/{port}", delete(stop_port))
        .route(
            "/inventory/{host}/volumes/{volume}/write",
            post(write_volume),
        )
        .fallback(|| async { ApiError::not_found("Not Found") })
        .method_not_allowed_fallback(|| async {
            ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed")
        })
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .with_state(fleet)
}

fn simulator(fleet: &Fleet) -> Result<Simulator, ApiError> {
    fleet
        .upgrade()
        .map(|inner| Simulator { inner })
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "the simulator is shutting down",
            )
        })
}

fn host(fleet: &Fleet, name: Result<Path<String>, PathRejection>) -> Result<SimHost, ApiError> {
    let Path(name) = name.map_err(bad_path)?;
    host_named(fleet, &name)
}

fn host_named(fleet: &Fleet, name: &str) -> Result<SimHost, ApiError> {
    simulator(fleet)?
        .host(name)
        .ok_or_else(|| ApiError::not_found(format!("no host named {name:?}")))
}

fn bad_path(e: PathRejection) -> ApiError {
    ApiError::bad_request(format!("bad path: {e}"))
}

async fn index() -> ApiResult {
    ok(json!({
        "routes": [
            "GET /inventory", "GET /inventory/{host}",
            "GET /faults/{host}", "POST /faults/{host}", "DELETE /faults/{host}",
            "GET /seed", "POST /seed",
            "POST /inventory/{host}/vms/{vm}/ports",
            "DELETE /inventory/{host}/vms/{vm}/ports/{port}",
            "POST /inventory/{host}/volumes/{volume}/write"
        ]
    }))
}

async fn inventory(State(fleet): State<Fleet>) -> ApiResult {
    let sim = simulator(&fleet)?;
    ok(json!({ "seed": sim.seed(), "hosts": sim.inventory() }))
}

async fn one_inventory(
    State(fleet): State<Fleet>,
    name: Result<Path<String>, PathRejection>,
) -> ApiResult {
    ok(host_inventory(&host(&fleet, name)?))
}

fn faults_answer(host: &SimHost) -> ApiResult {
    ok(json!({ "host": host.name(), "faults": host.faults().snapshot() }))
}

async fn get_faults(
    State(fleet): State<Fleet>,
    name: Result<Path<String>, PathRejection>,
) -> ApiResult {
    faults_answer(&host(&fleet, name)?)
}

async fn set_faults(
    State(fleet): State<Fleet>,
    name: Result<Path<String>, PathRejection>,
    body: Bytes,
) -> ApiResult {
    let host = host(&fleet, name)?;
    let spec: FaultSpec = parse(&body)?;
    let was_down = host.faults().is_down();
    host.faults().apply(&spec).map_err(|e| match e {
        FaultError::Invalid(why) => ApiError::bad_request(why),
        e @ FaultError::NoSuchVm(_) => ApiError::not_found(e.to_string()),
    })?;
    // Crashed and lost VMs are on disk before the answer.
    host.save()
        .await
        .map_err(|e| crate::http::saving_failed(&host, &e))?;
    tracing::info!(
        host = host.name(),
        ?spec,
        "faults set over the control endpoint"
    );
    match (was_down, host.faults().is_down()) {
        (false, true) => host.take_down().await,
        (true, false) => bring_up(&host).await?,
        _ => {}
    }
    faults_answer(&host)
}

async fn bring_up(host: &SimHost) -> Result<(), ApiError> {
    host.bring_up()
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))
}

async fn clear_faults(
    State(fleet): State<Fleet>,
    name: Result<Path<String>, PathRejection>,
) -> ApiResult {
    let host = host(&fleet, name)?;
    let was_down = host.faults().is_down();
    host.faults().clear();
    if was_down {
        bring_up(&host).await?;
    }
    faults_answer(&host)
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SeedBody {
    seed: u64,
}

async fn get_seed(State(fleet): State<Fleet>) -> ApiResult {
    ok(SeedBody {
        seed: simulator(&fleet)?.seed(),
    })
}

async fn set_seed(State(fleet): State<Fleet>, body: Bytes) -> ApiResult {
    let sim = simulator(&fleet)?;
    let SeedBody { seed } = parse(&body)?;
    sim.set_seed(seed);
    ok(SeedBody { seed })
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct GuestPortBody {
    port: u16,
    /// `127.0.0.1:5000`.
    upstream: SocketAddr,
}

async fn serve_port(
    State(fleet): State<Fleet>,
    path: Result<Path<(String, String)>, PathRejection>,
    body: Bytes,
) -> ApiResult {
    let Path((name, vm)) = path.map_err(bad_path)?;
    let host = host_named(&fleet, &name)?;
    let GuestPortBody { port, upstream } = parse(&body)?;
    if port == 0 {
        return Err(ApiError::bad_request("port must be between 1 and 65535"));
    }
    host.serve_guest_port(&vm, port, upstream)
        .map_err(ApiError::not_found)?;
    ok(json!({ "host": host.name(), "vm": vm, "port": port, "upstream": upstream }))
}

async fn stop_port(
    State(fleet): State<Fleet>,
    path: Result<Path<(String, String, u16)>, PathRejection>,
) -> ApiResult {
    let Path((name, vm, port)) = path.map_err(bad_path)?;
    let host = host_named(&fleet, &name)?;
    host.stop_serving_guest_port(&vm, port)
        .map_err(ApiError::not_found)?;
    ok(json!({ "host": host.name(), "vm": vm, "port": port }))
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WriteBody {
    /// Written as its UTF-8 bytes.
    data: String,
}

async fn write_volume(
    State(fleet): State<Fleet>,
    path: Result<Path<(String, String)>, PathRejection>,
    body: Bytes,
) -> ApiResult {
    let Path((name, volume)) = path.map_err(bad_path)?;
    let host = host_named(&fleet, &name)?;
    let WriteBody { data } = parse(&body)?;
    let content = host
        .write_volume_unsaved(&volume, data.as_bytes())
        .map_err(|e| match e {
            WriteRefused::NoVolume(_) => ApiError::not_found(e.to_string()),
            WriteRefused::ReadOnly(_) => ApiError::bad_request(e.to_string()),
        })?;
    // On disk before the answer, like a daemon's change.
    host.save()
        .await
        .map_err(|e| crate::http::saving_failed(&host, &e))?;
    ok(json!({ "host": host.name(), "volume": volume, "content": content }))
}
