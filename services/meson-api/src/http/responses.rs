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

/// The network the path names is not the tenant's.
#[derive(IntoResponses)]
#[response(
    status = 404,
    description = "No such network for this tenant (`not_found`)."
)]
pub struct NoSuchNetwork(pub ErrorResponse);

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
