//! Resources whose whole API is one module: its app calls, REST
//! operations (with their OpenAPI description and tag), gRPC service and
//! conversions, and authorization rules, each kept next to the others.
//! A resource is registered by one line in [`resources!`]; its rules join
//! the others (`authz::rules()`), its routes `http::api_routes`, its service the gRPC
//! server, and the tests that hold every interface to every operation
//! (`every_route_has_a_rule_and_every_rule_a_route`,
//! `every_operation_is_carried_by_grpc_or_said_not_to_be`) see it there.
//!
//! A module provides `routes()` (an `OpenApiRouter`, its tag described),
//! `grpc(&Svc, max_message_bytes)` (its tonic server), `RULES` and
//! `BODIES` (each request body's type and reader, which
//! `tests/openapi_examples.rs` holds to each other).
//! `ssh_keys` is the example to follow; `images` (made and deleted by
//! actions, one on a VM's path), `networks` (a delete that is an action),
//! `port_forwards` (under a network's path) and `tokens` moved here from
//! the layers. The older resources are split by layer (`app/`, `http/`,
//! `grpc/`), and move here as they are reworked.

use crate::authz::Rule;
use crate::grpc::Svc;
use crate::state::AppState;
use utoipa_axum::router::OpenApiRouter;

macro_rules! resources {
    ($($name:ident),* $(,)?) => {
        $(mod $name;)*

        /// Their REST operations.
        pub(crate) fn routes() -> OpenApiRouter<AppState> {
            OpenApiRouter::new()$(.merge($name::routes()))*
        }

        /// `routes` with their gRPC services.
        pub(crate) fn grpc(
            routes: tonic::service::Routes,
            svc: &Svc,
            max_message_bytes: usize,
        ) -> tonic::service::Routes {
            routes$(.add_service($name::grpc(svc, max_message_bytes)))*
        }

        /// Their operations' rules.
        pub(crate) const RULES: &[&[Rule]] = &[$($name::RULES),*];

        /// How their operations read a request body.
        pub fn bodies() -> impl Iterator<Item = &'static Body> {
            [$($name::BODIES),*].into_iter().flatten()
        }
    };
}

resources! {
    images,
    networks,
    port_forwards,
    ssh_keys,
    tokens,
}

/// How one operation's request body is read: through its meson-types
/// request (the SDK's) and through meson-core's reader (the server's).
/// `tests/openapi_examples.rs` requires the two to agree on every body.
pub struct Body {
    /// `post`, `patch` or `put`, as the OpenAPI document writes it.
    pub method: &'static str,
    /// The operation's path template.
    pub path: &'static str,
    /// A body through the typed request: its canonical JSON.
    pub canonical: fn(&serde_json::Value) -> Result<serde_json::Value, String>,
    /// A body through the reader: what it read, or the error it named.
    pub read: fn(&serde_json::Value) -> Read,
}

/// A reader's verdict on a body, comparable across bodies: what it read
/// (or the error it named), as `Debug` shows it.
pub type Read = Result<String, String>;

/// A reader's verdict as [`Read`] compares it.
pub fn shown<R: std::fmt::Debug, E: std::fmt::Debug>(r: Result<R, E>) -> Read {
    r.map(|r| format!("{r:?}")).map_err(|e| format!("{e:?}"))
}

/// `body` through `T`: its canonical JSON, checked to read back as the
/// same `T`.
pub fn canonical<T>(body: &serde_json::Value) -> Result<serde_json::Value, String>
where
    T: serde::de::DeserializeOwned + serde::Serialize + PartialEq + std::fmt::Debug,
{
    let typed: T = meson_types::lenient::from_value(body.clone())
        .map_err(|e| format!("does not deserialize: {e}"))?;
    let json = serde_json::to_value(&typed).map_err(|e| format!("does not serialize: {e}"))?;
    let again: T = serde_json::from_value(json.clone())
        .map_err(|e| format!("its canonical form {json} does not deserialize: {e}"))?;
    if again != typed {
        return Err(format!("{typed:?} came back as {again:?}"));
    }
    Ok(json)
}

/// An OpenAPI tag with its description, for a resource's `routes()`.
pub(crate) fn described(
    router: OpenApiRouter<AppState>,
    name: &str,
    description: &str,
) -> OpenApiRouter<AppState> {
    let mut router = router;
    let mut tag = utoipa::openapi::Tag::new(name);
    tag.description = Some(description.to_owned());
    router
        .get_openapi_mut()
        .tags
        .get_or_insert_with(Vec::new)
        .push(tag);
    router
}
