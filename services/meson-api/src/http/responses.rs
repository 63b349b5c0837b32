//! The answers many routes document alike, each once: a route lists them by
//! name in `responses(...)` next to its own. (Every route's 401, 429, 5xx...
//! come from [`super::openapi::finish`].)

use meson_types::ErrorResponse;
use utoipa::IntoResponses;

/// A path's id is not a UUID.
#[derive(IntoResponses)]
#[response(status = 400, description = "The id is not a UUID (`invalid_input`).")]
pub struct BadId(pub ErrorResponse);

/// One of a path's ids is not a UUID.
#[derive(IntoResponses)]
#[response(status = 400, description = "An id is not a UUID (`invalid_input`).")]
pub struct BadIds(pub ErrorResponse);

/// The backup the path names is not the tenant's.
#[derive(IntoResponses)]
#[response(
    status = 404,
    description = "No such backup for this tenant (`not_found`)."
)]
pub struct NoSuchBackup(pub ErrorResponse);

/// The VM the path names is not the tenant's.
#[derive(IntoResponses)]
#[response(
    status = 404,
    description = "No such VM for this tenant (`not_found`)."
)]
pub struct NoSuchVm(pub ErrorResponse);

/// The volume the path names is not the tenant's.
#[derive(IntoResponses)]
#[response(
    status = 404,
    description = "No such volume for this tenant (`not_found`)."
)]
pub struct NoSuchVolume(pub ErrorResponse);

/// The image the path names is not the tenant's.
#[derive(IntoResponses)]
#[response(
    status = 404,
    description = "No such image for this tenant (`not_found`)."
)]
pub struct NoSuchImage(pub ErrorResponse);

/// The network the path names is not the tenant's.
#[derive(IntoResponses)]
#[response(
    status = 404,
    description = "No such network for this tenant (`not_found`)."
)]
pub struct NoSuchNetwork(pub ErrorResponse);

/// The network or the port forward the path names is not the tenant's.
#[derive(IntoResponses)]
#[response(
    status = 404,
    description = "No such network for this tenant, or no such port forward on it \
        (`not_found`)."
)]
pub struct NoSuchForward(pub ErrorResponse);

/// The cluster the path names is not the tenant's.
#[derive(IntoResponses)]
#[response(
    status = 404,
    description = "No such cluster for this tenant (`not_found`)."
)]
pub struct NoSuchCluster(pub ErrorResponse);

/// An editor's change, asked by a viewer.
#[derive(IntoResponses)]
#[response(
    status = 403,
    description = "The token's role cannot modify (`forbidden`)."
)]
pub struct CannotModify(pub ErrorResponse);

/// An editor's delete, asked by a viewer.
#[derive(IntoResponses)]
#[response(
    status = 403,
    description = "The token's role cannot delete (`forbidden`)."
)]
pub struct CannotDelete(pub ErrorResponse);

/// A list's query parameter is refused.
#[derive(IntoResponses)]
#[response(
    status = 400,
    description = "A bad query parameter (`invalid_input`, named in `details.fields`)."
)]
pub struct BadQuery(pub ErrorResponse);

/// Another action holds the cluster's lock.
#[derive(IntoResponses)]
#[response(
    status = 423,
    description = "Another action runs on the cluster (`locked`; its id in \
        `details.action_id`)."
)]
pub struct ClusterBusy(pub ErrorResponse);

/// Another action holds the VM's lock.
#[derive(IntoResponses)]
#[response(
    status = 423,
    description = "Another action runs on the VM (`locked`; its id in \
        `details.action_id`)."
)]
pub struct VmBusy(pub ErrorResponse);

/// The cluster or the pool the path names is not the tenant's.
#[derive(IntoResponses)]
#[response(
    status = 404,
    description = "No such cluster for this tenant, or no such pool in it (`not_found`)."
)]
pub struct NoSuchPool(pub ErrorResponse);

/// The cluster or the node the path names is not the tenant's.
#[derive(IntoResponses)]
#[response(
    status = 404,
    description = "No such cluster for this tenant, or no such node in it (`not_found`)."
)]
pub struct NoSuchNode(pub ErrorResponse);

/// The AtomOS target the path names does not exist.
#[derive(IntoResponses)]
#[response(status = 404, description = "No such target (`not_found`).")]
pub struct NoSuchTarget(pub ErrorResponse);

/// A body refused as a whole or in a field.
#[derive(IntoResponses)]
#[response(
    status = 400,
    description = "A bad field (`invalid_input`) or malformed JSON (`json_error`)."
)]
pub struct BadBody(pub ErrorResponse);

/// A body refused as a whole or in a named field.
#[derive(IntoResponses)]
#[response(
    status = 400,
    description = "A bad field (`invalid_input`, named in `details.fields`) or malformed \
        JSON (`json_error`)."
)]
pub struct BadBodyField(pub ErrorResponse);

/// A create's body refused as a whole or in a named field, or its
/// `Idempotency-Key`.
#[derive(IntoResponses)]
#[response(
    status = 400,
    description = "A bad field (`invalid_input`, every rejected field named in \
        `details.fields`), malformed JSON (`json_error`) or a bad `Idempotency-Key`."
)]
pub struct BadCreate(pub ErrorResponse);

/// An action's body refused, its path id not a UUID, or its
/// `Idempotency-Key` bad.
#[derive(IntoResponses)]
#[response(
    status = 400,
    description = "A bad field (`invalid_input`), malformed JSON (`json_error`), the id is \
        not a UUID, or a bad `Idempotency-Key`."
)]
pub struct BadActionBody(pub ErrorResponse);

/// A bad path id or body.
#[derive(IntoResponses)]
#[response(
    status = 400,
    description = "The id is not a UUID, invalid input (`invalid_input`) or malformed \
        JSON (`json_error`)."
)]
pub struct BadIdOrBody(pub ErrorResponse);

/// A bad path id or `Idempotency-Key`.
#[derive(IntoResponses)]
#[response(
    status = 400,
    description = "An id is not a UUID (`invalid_input`) or a bad `Idempotency-Key`."
)]
pub struct BadIdsOrKey(pub ErrorResponse);

/// A create whose name is taken, or whose key served another request.
#[derive(IntoResponses)]
#[response(
    status = 409,
    description = "The name is taken (`uniqueness_error`), or the Idempotency-Key was \
        used with another body (`conflict`)."
)]
pub struct NameTakenOrKeyReused(pub ErrorResponse);

/// A change a cluster takes only while `running`.
#[derive(IntoResponses)]
#[response(
    status = 409,
    description = "The cluster is not `running` (`conflict`)."
)]
pub struct ClusterNotRunning(pub ErrorResponse);

/// A cluster change asked by a viewer.
#[derive(IntoResponses)]
#[response(
    status = 403,
    description = "The token's role cannot modify clusters (`forbidden`)."
)]
pub struct CannotModifyClusters(pub ErrorResponse);

/// A cluster refused to a viewer, or over the tenant's quota.
#[derive(IntoResponses)]
#[response(
    status = 403,
    description = "The token's role cannot create (`forbidden`), or the cluster would \
        take the tenant over a quota (`resource_limit_exceeded`, each one in \
        `details.limits`)."
)]
pub struct ClusterOverQuota(pub ErrorResponse);

/// The console the path names is not the tenant's.
#[derive(IntoResponses)]
#[response(
    status = 404,
    description = "No such console for this tenant (`not_found`)."
)]
pub struct NoSuchConsole(pub ErrorResponse);
