//! The API's baseline: a bare axum + sqlx app doing what `POST /v1/vms` and
//! `GET /v1/vms/{id}` boil down to (one insert, one select by primary key),
//! with the same pool size, runtime and JSON body, run as its own process
//! (`meson-bench baseline-server`) so it competes for the machine as
//! mesond does.
//!
//! Its SQL is written inline with `sqlx::query` on purpose: it is the
//! baseline, not meson code, and it must not borrow meson's data layer.
#![allow(clippy::disallowed_methods)]

use anyhow::Context;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::Value;
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;
use std::net::SocketAddr;

pub const SCHEMA: &str = "create table if not exists bench_vms (
    id uuid primary key default gen_random_uuid(),
    tenant text not null,
    name text not null,
    spec jsonb not null,
    created_at timestamptz not null default now(),
    unique (tenant, name)
)";

pub async fn serve(addr: SocketAddr, database_url: &str, pool_size: u32) -> anyhow::Result<()> {
    let pool = PgPoolOptions::new()
        .max_connections(pool_size)
        .connect(database_url)
        .await
        .context("connecting")?;
    sqlx::raw_sql(SCHEMA).execute(&pool).await?;
    let app = axum::Router::new()
        .route("/bench/vms", post(create))
        .route("/bench/vms/{id}", get(read))
        .route("/healthz", get(|| async { "ok" }))
        .with_state(pool);
    let listener = tokio::net::TcpListener::bind(addr).await?;
    axum::serve(listener, app)
        .with_graceful_shutdown(mesond::server::shutdown_signal())
        .await?;
    Ok(())
}

fn fail(e: impl std::fmt::Display) -> Response {
    (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response()
}

const VIEW: &str = "json_build_object('id', id, 'tenant', tenant, 'name', name, \
                    'spec', spec, 'created_at', created_at)";

async fn create(State(pool): State<PgPool>, Json(body): Json<Value>) -> Response {
    let name = body["specs"]["vm_name"].as_str().unwrap_or("vm").to_owned();
    let tenant = body["tenant"].as_str().unwrap_or("bench").to_owned();
    let row: Result<Value, _> = sqlx::query_scalar(&format!(
        "insert into bench_vms (tenant, name, spec) values ($1, $2, $3) returning {VIEW}"
    ))
    .bind(tenant)
    .bind(name)
    .bind(&body)
    .fetch_one(&pool)
    .await;
    match row {
        Ok(v) => (StatusCode::CREATED, Json(serde_json::json!({ "vm": v }))).into_response(),
        Err(e) => fail(e),
    }
}

async fn read(State(pool): State<PgPool>, Path(id): Path<uuid::Uuid>) -> Response {
    let row: Result<Option<Value>, _> =
        sqlx::query_scalar(&format!("select {VIEW} from bench_vms where id = $1"))
            .bind(id)
            .fetch_optional(&pool)
            .await;
    match row {
        Ok(Some(v)) => Json(serde_json::json!({ "vm": v })).into_response(),
        Ok(None) => StatusCode::NOT_FOUND.into_response(),
        Err(e) => fail(e),
    }
}
