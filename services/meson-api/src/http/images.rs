//! `/v1/images`, and `POST /v1/vms/{id}/actions/create-image`.

use super::resource::{self, Deletable, Resource};
use super::responses::{
    BadBody, BadCreate, BadId, CannotDelete, CannotModify, NoSuchImage, VmBusy,
};
use super::{AppState, JsonBody, parse_id};
use crate::app::{App, ImageCreated, ListQuery, Paged};
use crate::auth::Principal;
use crate::error::ApiResult;
use crate::views;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use meson_core::action::Action;
use meson_core::image::{Image, ImageStatus};
use meson_core::parse::Warning;
use meson_core::{ImageId, Result};
use meson_types::ErrorResponse;
use meson_types::image::{self as wire, ImageImportRequest, ImageListQuery, ImageSnapshotRequest};
use meson_types::requests::NameLabelsUpdate;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, import))
        .routes(routes!(read, update, delete))
        .routes(routes!(snapshot))
}

fn created(c: &ImageCreated) -> Response {
    let res = wire::ImageCreateResponse {
        image: views::image(&c.image),
        action: views::action(&c.action),
        warnings: c.warnings.iter().map(views::warning).collect(),
    };
    (StatusCode::CREATED, Json(res)).into_response()
}

/// Imports an image from a URL.
#[utoipa::path(
    post,
    path = "/v1/images",
    tag = "images",
    operation_id = "image_import",
    summary = "Import an image from a URL",
    description = "Stores an image (`creating`) and starts its `create_image` action, which \
        places it on an AtomOS host with room for `size` GB (within `provider`, `continent` \
        and `region`); that host downloads `url` into it, refusing a file larger than `size` \
        or, given `checksum`, one whose sha256 differs (the action fails and nothing is left). \
        The image is then `available`. It counts against the `images_gb` quota until deleted.",
    request_body(content = ImageImportRequest, content_type = "application/json"),
    responses(
        (status = 201, description = "Accepted: the image (`creating`) and its action.",
            body = wire::ImageCreateResponse, links(
                ("GetImage" = (operation_id = "image_get",
                    parameters(("id" = "$response.body#/image/id")))),
                ("GetAction" = (operation_id = "action_get",
                    parameters(("id" = "$response.body#/action/id")))),
            )),
        BadCreate,
        (status = 403, description = "The token's role cannot create (`forbidden`), or the \
            image would take the tenant over its `images_gb` quota \
            (`resource_limit_exceeded`).", body = ErrorResponse),
        (status = 409, description = "The tenant has an image with this name \
            (`uniqueness_error`), or the Idempotency-Key was used with another body \
            (`conflict`).", body = ErrorResponse),
    ),
)]
async fn import(
    State(s): State<AppState>,
    p: Principal,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    Ok(created(&s.app.image_import(&p, &body).await?))
}

/// Snapshots a VM's boot volume into an image.
#[utoipa::path(
    post,
    path = "/v1/vms/{id}/actions/create-image",
    tag = "images",
    operation_id = "vm_create_image",
    summary = "Create an image from a VM",
    description = "Stores an image (`creating`) and starts its `create_image` action, which \
        copies the VM's boot volume on the VM's host; the image is then `available`. The copy \
        is crash-consistent: the VM keeps running, and what its guest had not written to disk \
        is not in it (power it off first for a clean image). The VM must be `running` or \
        `off`, and no other action can run on it until the copy is made. The image counts its \
        size against the `images_gb` quota until deleted.",
    params(("id" = uuid::Uuid, Path, description = "The VM's id.")),
    request_body(content = ImageSnapshotRequest, content_type = "application/json"),
    responses(
        (status = 201, description = "Accepted: the image (`creating`) and its action.",
            body = wire::ImageCreateResponse, links(
                ("GetImage" = (operation_id = "image_get",
                    parameters(("id" = "$response.body#/image/id")))),
                ("GetAction" = (operation_id = "action_get",
                    parameters(("id" = "$response.body#/action/id")))),
            )),
        (status = 400, description = "A bad field (`invalid_input`), malformed JSON \
            (`json_error`), the id is not a UUID, or a bad `Idempotency-Key`.",
            body = ErrorResponse),
        (status = 403, description = "The token's role cannot create (`forbidden`), or the \
            image would take the tenant over its `images_gb` quota \
            (`resource_limit_exceeded`).", body = ErrorResponse),
        (status = 404, description = "No such VM for this tenant (`not_found`).",
            body = ErrorResponse),
        (status = 409, description = "The VM is neither `running` nor `off` (`conflict`), \
            the tenant has an image with this name (`uniqueness_error`), or the \
            Idempotency-Key was used with another body (`conflict`).", body = ErrorResponse),
        VmBusy,
    ),
)]
async fn snapshot(
    State(s): State<AppState>,
    p: Principal,
    Path(id): Path<String>,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    Ok(created(
        &s.app.vm_create_image(&p, parse_id(&id)?, &body).await?,
    ))
}

resource::get_operation! {
    Images => wire::ImageResponse,
    doc: "Reads an image.",
    path: "/v1/images/{id}",
    tag: "images",
    operation_id: "image_get",
    summary: "Get an image",
    id: "The image's id.",
    found: "The image.",
    missing: NoSuchImage,
}

resource::update_operation! {
    Images => wire::ImageResponse;
    /// Renames and/or relabels an image.
    #[utoipa::path(
        patch,
        path = "/v1/images/{id}",
        tag = "images",
        operation_id = "image_update",
        summary = "Update an image",
        description = "Changes an image's name and/or replaces its labels (at any time: \
            nothing on AtomOS changes).",
        params(("id" = uuid::Uuid, Path, description = "The image's id.")),
        request_body(content = NameLabelsUpdate, content_type = "application/json"),
        responses(
            (status = 200, description = "The image as it is now.", body = wire::ImageResponse),
            BadBody,
            CannotModify,
            NoSuchImage,
            (status = 409, description = "The name is taken (`uniqueness_error`).",
                body = ErrorResponse),
        ),
    )]
}

resource::delete_operation! {
    Images;
    /// Deletes an image.
    #[utoipa::path(
        delete,
        path = "/v1/images/{id}",
        tag = "images",
        operation_id = "image_delete",
        summary = "Delete an image",
        description = "Starts its `delete_image` action, which destroys the image on its \
            AtomOS host; it stops counting against `images_gb` when done. VMs created from it \
            are copies and stay. Refused while it is being created.",
        params(("id" = uuid::Uuid, Path, description = "The image's id.")),
        responses(
            (status = 200, description = "Accepted: the delete action.",
                body = meson_types::ActionResponse),
            BadId,
            CannotDelete,
            NoSuchImage,
            (status = 423, description = "An action runs on it: its create or delete \
                (`locked`; the action id in `details.action_id`).", body = ErrorResponse),
        ),
    )]
}

resource::list_operation! {
    Images => wire::ImageList,
    doc: "The tenant's images, filtered by name, status and labels.",
    path: "/v1/images",
    tag: "images",
    operation_id: "image_list",
    summary: "List images",
    query: ImageListQuery,
    found: "A page of images.",
}

/// Images through the shared handlers.
pub struct Images;

impl Resource for Images {
    type Id = ImageId;
    type Item = Image;
    type Got = wire::ImageResponse;
    type Updated = wire::ImageResponse;
    type Listed = Paged<Image>;
    type Page = wire::ImageList;
    const PATH: &'static str = "/v1/images";

    async fn get(app: &App, p: &Principal, id: ImageId) -> Result<Image> {
        app.image_get(p, id).await
    }

    async fn update(
        app: &App,
        p: &Principal,
        id: ImageId,
        body: &serde_json::Value,
    ) -> Result<(Image, Vec<Warning>)> {
        app.image_update(p, id, body).await
    }

    async fn list(app: &App, p: &Principal, query: &[(String, String)]) -> Result<Paged<Image>> {
        let q = ListQuery::parse(query, |v| ImageStatus::parse(v).is_some())?;
        app.image_list(p, &q).await
    }

    fn got(i: &Image) -> wire::ImageResponse {
        Self::updated(i, vec![])
    }

    fn updated(i: &Image, warnings: Vec<meson_types::Warning>) -> wire::ImageResponse {
        wire::ImageResponse {
            image: views::image(i),
            warnings,
        }
    }

    fn page(listed: &Paged<Image>, meta: meson_types::Meta) -> wire::ImageList {
        wire::ImageList {
            images: listed.items.iter().map(views::image).collect(),
            meta,
        }
    }
}

impl Deletable for Images {
    async fn delete(app: &App, p: &Principal, id: ImageId) -> Result<Action> {
        app.image_delete(p, id).await
    }
}
