//! meson's gRPC API (`meson.v1`): the REST API's operations over tonic,
//! served by the same app layer, guarded by the same gate (token, rate
//! limit, `authz::rules()`, tenant scope, audit log), with errors as
//! `tonic::Status` carrying the REST error code. Server reflection and the
//! standard health service come with it.

mod actions;
pub mod autoscaler;
mod backups;
mod catalog;
mod clusters;
mod consoles;
pub(crate) mod convert;
mod gate;
mod idempotency;
mod members;
mod organizations;
mod plans;
mod quotas;
pub mod status;
mod usage;
mod vms;
mod volumes;

pub use gate::{GrpcGateLayer, OPERATIONS};
pub use meson_proto::SERVICES;

use crate::auth::Principal;
use crate::state::AppState;
use meson_core::Error;
use meson_proto::meson::v1 as pb;
use std::future::Future;
use std::sync::{Arc, Mutex};
use tonic::Status;

/// The services of `meson.v1`, reflection and health, ready to serve behind
/// [`GrpcGateLayer`].
pub fn routes(state: &AppState) -> tonic::service::Routes {
    let max = state.config.limits.body_bytes;
    let svc = Svc(state.clone());
    let (reporter, health) = tonic_health::server::health_reporter();
    // Every service is served as long as the process runs; readiness of
    // the database is `/readyz`'s business.
    tokio::spawn(async move {
        reporter
            .set_serving::<pb::vm_service_server::VmServiceServer<Svc>>()
            .await;
        for name in SERVICES {
            reporter
                .set_service_status(*name, tonic_health::ServingStatus::Serving)
                .await;
        }
    });
    let routes = tonic::service::Routes::new(health)
        .add_service(
            pb::vm_service_server::VmServiceServer::new(svc.clone()).max_decoding_message_size(max),
        )
        .add_service(
            pb::volume_service_server::VolumeServiceServer::new(svc.clone())
                .max_decoding_message_size(max),
        )
        .add_service(
            pb::backup_service_server::BackupServiceServer::new(svc.clone())
                .max_decoding_message_size(max),
        )
        .add_service(
            pb::console_service_server::ConsoleServiceServer::new(svc.clone())
                .max_decoding_message_size(max),
        )
        .add_service(
            pb::member_service_server::MemberServiceServer::new(svc.clone())
                .max_decoding_message_size(max),
        )
        .add_service(
            pb::invitation_service_server::InvitationServiceServer::new(svc.clone())
                .max_decoding_message_size(max),
        )
        .add_service(
            pb::organization_service_server::OrganizationServiceServer::new(svc.clone())
                .max_decoding_message_size(max),
        )
        .add_service(
            pb::usage_service_server::UsageServiceServer::new(svc.clone())
                .max_decoding_message_size(max),
        )
        .add_service(
            pb::quota_service_server::QuotaServiceServer::new(svc.clone())
                .max_decoding_message_size(max),
        )
        .add_service(
            pb::plan_service_server::PlanServiceServer::new(svc.clone())
                .max_decoding_message_size(max),
        )
        .add_service(
            pb::cluster_service_server::ClusterServiceServer::new(svc.clone())
                .max_decoding_message_size(max),
        )
        .add_service(
            pb::catalog_service_server::CatalogServiceServer::new(svc.clone())
                .max_decoding_message_size(max),
        )
        .add_service(
            pb::action_service_server::ActionServiceServer::new(svc.clone())
                .max_decoding_message_size(max),
        );
    let routes = crate::resources::grpc(routes, &svc, max);
    with_reflection(routes, meson_proto::FILE_DESCRIPTOR_SET)
}

/// `routes` with server reflection (v1, and v1alpha which grpcurl and older
/// tools ask) over `descriptors` and the health service's.
pub(crate) fn with_reflection(
    mut routes: tonic::service::Routes,
    descriptors: &'static [u8],
) -> tonic::service::Routes {
    let builder = || {
        tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(descriptors)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
    };
    match builder().build_v1() {
        Ok(v1) => routes = routes.add_service(v1),
        Err(e) => tracing::error!(error = %e, "gRPC reflection (v1) unavailable"),
    }
    match builder().build_v1alpha() {
        Ok(v1alpha) => routes = routes.add_service(v1alpha),
        Err(e) => tracing::error!(error = %e, "gRPC reflection (v1alpha) unavailable"),
    }
    routes
}

/// Implements every `meson.v1` service over the app layer.
#[derive(Clone)]
pub(crate) struct Svc(pub AppState);

/// What a call's audit entry learns from its handler: the resource it
/// named or made, and the action it started.
#[derive(Clone, Default)]
pub(crate) struct AuditSlot(Arc<Mutex<AuditNote>>);

#[derive(Clone, Debug, Default)]
pub(crate) struct AuditNote {
    pub resource: Option<(String, String)>,
    pub action: Option<uuid::Uuid>,
}

impl AuditSlot {
    fn take(&self) -> AuditNote {
        self.0.lock().map(|n| n.clone()).unwrap_or_default()
    }
}

/// The caller the gate admitted (absent only if a service were served
/// without the gate: then nobody is).
pub(crate) fn principal<T>(req: &tonic::Request<T>) -> Result<Principal, Status> {
    req.extensions().get::<Principal>().cloned().ok_or_else(|| {
        tracing::error!("refused: a gRPC method that needs a caller was reached without the gate");
        status::status_of(&Error::Unauthorized)
    })
}

/// Notes the resource a call is about, for its audit entry.
pub(crate) fn note_resource<T>(req: &tonic::Request<T>, kind: &str, id: impl ToString) {
    if let Some(slot) = req.extensions().get::<AuditSlot>()
        && let Ok(mut n) = slot.0.lock()
    {
        n.resource = Some((kind.to_owned(), id.to_string()));
    }
}

/// Notes the action a call started, for its audit entry.
pub(crate) fn note_action<T>(req: &tonic::Request<T>, action: &meson_core::action::Action) {
    if let Some(slot) = req.extensions().get::<AuditSlot>()
        && let Ok(mut n) = slot.0.lock()
    {
        n.action = Some(action.id.0);
    }
}

/// Answers a call that starts an action (noted for the audit log with the
/// resource `f` notes): `f` runs as the admitted caller.
pub(crate) async fn action_call<'a, T, F, Fut>(
    req: &'a tonic::Request<T>,
    f: F,
) -> Result<tonic::Response<pb::Action>, Status>
where
    F: FnOnce(Principal, &'a tonic::Request<T>) -> Fut,
    Fut: Future<Output = Result<meson_core::action::Action, Error>>,
{
    let p = principal(req)?;
    answer(f(p, req).await.map(|a| {
        note_action(req, &a);
        convert::action(crate::views::action(&a))
    }))
}

/// Answers a call that starts an action on the resource its `id` field
/// (`raw`) names, noted for the audit log as a `kind`: `f` runs as the
/// admitted caller, on the parsed id.
pub(crate) async fn action_on<T, I, F, Fut>(
    req: &tonic::Request<T>,
    kind: &str,
    raw: &str,
    f: F,
) -> Result<tonic::Response<pb::Action>, Status>
where
    I: std::str::FromStr + std::fmt::Display,
    F: FnOnce(Principal, I) -> Fut,
    Fut: Future<Output = Result<meson_core::action::Action, Error>>,
{
    action_call(req, |p, req| async move {
        let resource: I = id("id", raw)?;
        note_resource(req, kind, &resource);
        f(p, resource).await
    })
    .await
}

/// A domain result as a gRPC answer.
pub(crate) fn answer<T>(r: Result<T, Error>) -> Result<tonic::Response<T>, Status> {
    r.map(tonic::Response::new)
        .map_err(|e| status::status_of(&e))
}

/// Parses an id from a request field; a malformed one names the field.
pub(crate) use crate::app::list::id;
