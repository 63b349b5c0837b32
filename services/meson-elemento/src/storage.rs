//! The storage daemon over meson's standalone volumes, and the volumes a
//! VM register attaches.

use crate::error::{DResult, Detail};
use crate::routes::{AppState, Authed};
use axum::Router;
use serde_json::Value;

/// The storage routes served, `(method, path)`.
pub fn served() -> Vec<(&'static str, String)> {
    Vec::new()
}

pub fn routes() -> Router<AppState> {
    Router::new()
}

/// A register's `volumes[{vid}]` (or plain ids) as the VM request's
/// `volumes`: existing standalone volumes to attach.
pub async fn attach_volumes(_a: &Authed, body: &Value, req: &mut Value) -> DResult<()> {
    let Some(list) = body.get("volumes").filter(|v| !v.is_null()) else {
        return Ok(());
    };
    let list = list
        .as_array()
        .ok_or_else(|| Detail::field("volumes", "must be a list of {\"vid\": <volume id>}"))?;
    let mut ids = Vec::new();
    for (i, v) in list.iter().enumerate() {
        let id = v
            .get("vid")
            .or_else(|| v.get("volumeID"))
            .unwrap_or(v)
            .as_str()
            .ok_or_else(|| Detail::field(&format!("volumes[{i}].vid"), "is required"))?;
        ids.push(Value::String(id.to_owned()));
    }
    if !ids.is_empty() {
        req["volumes"] = Value::Array(ids);
    }
    Ok(())
}
