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
//! `grpc(&Svc, max_message_bytes)` (its tonic server) and `RULES`.
//! `ssh_keys` is the example to follow; `tokens` moved here from the
//! layers. The older resources are split by layer (`app/`, `http/`,
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
    };
}

resources! {
    ssh_keys,
    tokens,
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
