//! Images: boot disks a tenant keeps, made by a snapshot of a VM's boot
//! volume (`POST /v1/vms/{id}/actions/create-image`) or an import from a
//! URL (`POST /v1/images`), then read, listed, renamed and relabelled, and
//! deleted; `/v1/images` over REST and `meson.v1.ImageService` over gRPC,
//! both through the app calls here. Its create and delete are actions
//! (`create_image`, `delete_image`), and it counts against `images_gb`.

use crate::app::list::{ListQuery, Paged};
use crate::app::new_action;
use crate::authz::{self, Rule};
use crate::grpc::convert::json::Obj;
use crate::grpc::convert::meta::{map, timestamp};
use crate::grpc::{Svc, action_on, answer, convert, id, note_action, note_resource, principal};
use crate::http::JsonBody;
use crate::http::resource::prelude::*;
use crate::http::responses::{BadActionBody, 
    BadBody, BadCreate, BadId, CannotDelete, CannotModify, NoSuchImage, VmBusy,
};
use axum::Json;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use meson_core::action::{Command, ResourceType};
use meson_core::image::{
    Image, ImageImport, ImageSnapshot, ImageSource, ImageStatus, MAX_IMAGE_NAME_LEN,
};
use meson_core::vm::VmStatus;
use meson_core::volume::{VolumeKind, VolumePlacement};
use meson_core::{Error, ImageId, VmId};
use meson_proto::meson::v1 as pb;
use meson_types::image::{self as wire, ImageImportRequest, ImageListQuery, ImageSnapshotRequest};
use meson_types::requests::NameLabelsUpdate;
use meson_workflows::{image_create, image_delete};
use tonic::{Request, Status};

/// How its operations read a request body.
pub(super) const BODIES: &[super::Body] = &[
    super::Body {
        method: "post",
        path: "/v1/images",
        canonical: super::canonical::<ImageImportRequest>,
        read: |v| super::shown(ImageImport::parse(v, &[])),
    },
    super::Body {
        method: "post",
        path: "/v1/vms/{id}/actions/create-image",
        canonical: super::canonical::<ImageSnapshotRequest>,
        read: |v| super::shown(ImageSnapshot::parse(v)),
    },
    super::Body {
        method: "patch",
        path: "/v1/images/{id}",
        canonical: super::canonical::<NameLabelsUpdate>,
        read: |v| super::shown(meson_core::patch::NameLabels::parse(v, MAX_IMAGE_NAME_LEN)),
    },
];

/// Viewers read images; editors make, change and delete them.
pub(super) const RULES: &[Rule] = &[
    authz::read("image_list"),
    authz::read("image_get"),
    authz::write("image_import"),
    authz::write("vm_create_image"),
    authz::write("image_update"),
    authz::write("image_delete"),
    authz::read("image_action_list"),
];

pub(super) fn grpc(svc: &Svc, max: usize) -> pb::image_service_server::ImageServiceServer<Svc> {
    pb::image_service_server::ImageServiceServer::new(svc.clone()).max_decoding_message_size(max)
}

// The app layer.

pub struct ImageCreated {
    pub image: Image,
    pub action: Action,
    pub warnings: Vec<Warning>,
}

impl App {
    pub async fn image_get(&self, p: &Principal, id: ImageId) -> Result<Image> {
        meson_db::images::get(&self.pool, &p.tenant, id).await
    }

    pub async fn image_list(&self, p: &Principal, q: &ListQuery) -> Result<Paged<Image>> {
        self.page(
            &p.tenant,
            &q.page,
            q.bound("images", &p.tenant)?,
            &q.filter(),
        )
        .await
    }

    /// Imports an image from a URL: validates the request and, in one
    /// transaction, writes the image, checks the `images_gb` quota, and
    /// writes the action and its `image_create` job.
    pub async fn image_import(
        &self,
        p: &Principal,
        body: &serde_json::Value,
    ) -> Result<ImageCreated> {
        let req = ImageImport::parse(body, &meson_db::targets::list(&self.pool).await?)?;
        let image = Image::new(
            &p.tenant,
            req.name,
            req.labels,
            ImageSource::Url {
                url: req.url,
                checksum: req.checksum,
            },
            req.size_gb,
            None,
        );
        let params = image_create::Params {
            image_id: image.id,
            boot_volume: None,
            provider: req.provider,
            continent: req.continent,
            region: req.region,
        };
        let action = self.create_image(p, &image, &params, None).await?;
        Ok(ImageCreated {
            image,
            action,
            warnings: req.warnings,
        })
    }

    /// Snapshots a VM's boot volume into a new image on the VM's host. The
    /// VM must be placed and `running` or `off`; no other action may run on
    /// it (`locked`), and none can start until the copy is made.
    pub async fn vm_create_image(
        &self,
        p: &Principal,
        vm_id: VmId,
        body: &serde_json::Value,
    ) -> Result<ImageCreated> {
        let req = ImageSnapshot::parse(body)?;
        let (vm, parts) = self.vm_get(p, vm_id).await?;
        let boot = parts
            .volumes
            .iter()
            .find(|v| v.vm_id == Some(vm.id) && v.kind == VolumeKind::Boot);
        let (Some(placement), Some(boot), VmStatus::Running | VmStatus::Off) =
            (&vm.placement, boot, vm.status)
        else {
            return Err(Error::Conflict {
                message: format!(
                    "the VM is {}: only a placed VM that is running or off can be imaged",
                    vm.status.as_str()
                ),
            });
        };
        let image = Image::new(
            &p.tenant,
            req.name,
            req.labels,
            ImageSource::Snapshot { vm: vm.id },
            boot.size_gb,
            Some(VolumePlacement {
                target_id: placement.target_id,
                host: placement.host.clone(),
                provider: placement.provider.clone(),
                region: placement.region.clone(),
            }),
        );
        let params = image_create::Params {
            image_id: image.id,
            boot_volume: Some(boot.id),
            provider: None,
            continent: None,
            region: None,
        };
        let action = self.create_image(p, &image, &params, Some(vm.id)).await?;
        Ok(ImageCreated {
            image,
            action,
            warnings: req.warnings,
        })
    }

    /// Writes a new image with its `create_image` action and job, within
    /// the tenant's quotas, in one transaction; a snapshot's VM is `locked`
    /// while another action runs on it.
    async fn create_image(
        &self,
        p: &Principal,
        image: &Image,
        params: &image_create::Params,
        vm: Option<VmId>,
    ) -> Result<Action> {
        let mut resources = vec![(ResourceType::Image, image.id.0)];
        resources.extend(vm.map(|vm| (ResourceType::Vm, vm.0)));
        let action = new_action(p, Command::CreateImage, resources);
        let mut tx = meson_db::begin(&self.pool).await?;
        let held = self.hold_usage(&mut tx, &p.tenant).await?;
        meson_db::images::insert(&mut tx, image).await?;
        self.within_quotas(&mut tx, &p.tenant, &held).await?;
        meson_db::actions::insert(&mut tx, &action).await?;
        let queued = image_create::enqueue(&mut tx, image, params, action.id, &p.tenant).await?;
        match vm {
            Some(vm) => queued.or_locked("vm", vm)?,
            None => queued.of_new("image")?,
        };
        meson_db::commit(tx).await?;
        tracing::info!(image = %image.id, action = %action.id, tenant = %p.tenant, "image create accepted");
        Ok(action)
    }

    /// Renames an image and/or replaces its labels.
    pub async fn image_update(
        &self,
        p: &Principal,
        id: ImageId,
        body: &serde_json::Value,
    ) -> Result<(Image, Vec<Warning>)> {
        let renamed = meson_db::images::RENAMED;
        let warnings = self
            .rename::<Image>(&p.tenant, id.0, body, MAX_IMAGE_NAME_LEN, renamed)
            .await?;
        Ok((self.image_get(p, id).await?, warnings))
    }

    /// Starts deleting an image; `locked` while it is being created (the
    /// create's action named) or deleted.
    pub async fn image_delete(&self, p: &Principal, id: ImageId) -> Result<Action> {
        let mut tx = meson_db::begin(&self.pool).await?;
        let image = meson_db::images::lock(&mut tx, &p.tenant, id).await?;
        // Its own create, or a VM's create copying it (which names it).
        let running = meson_db::images::running_action(&mut tx, id).await?;
        if image.status == ImageStatus::Creating
            || (image.status != ImageStatus::Deleting && running.is_some())
        {
            return Err(Error::Locked {
                kind: "image",
                id: id.to_string(),
                action_id: running.map(|a| a.0).unwrap_or_default(),
            });
        }
        let action = new_action(p, Command::DeleteImage, vec![(ResourceType::Image, id.0)]);
        meson_db::actions::insert(&mut tx, &action).await?;
        image_delete::enqueue(&mut tx, id, action.id, &p.tenant)
            .await?
            .or_locked("image", id)?;
        meson_db::images::set_status(&mut *tx, id, ImageStatus::Deleting, None).await?;
        meson_db::commit(tx).await?;
        tracing::info!(image = %id, action = %action.id, "image delete accepted");
        Ok(action)
    }
}

// REST.

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, import))
        .routes(routes!(read, update, delete))
        .routes(routes!(snapshot))
}

fn rest_created(c: &ImageCreated) -> Response {
    let res = wire::ImageCreateResponse {
        image: view(&c.image),
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
    Ok(rest_created(&s.app.image_import(&p, &body).await?))
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
        BadActionBody,
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
    Ok(rest_created(
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
            image: view(i),
            warnings,
        }
    }

    fn page(listed: &Paged<Image>, meta: meson_types::Meta) -> wire::ImageList {
        wire::ImageList {
            images: listed.items.iter().map(view).collect(),
            meta,
        }
    }
}

impl Deletable for Images {
    async fn delete(app: &App, p: &Principal, id: ImageId) -> Result<Action> {
        app.image_delete(p, id).await
    }
}

/// An image as its answers show it.
fn view(i: &Image) -> wire::Image {
    use meson_core::image::ImageSource;
    let source = match &i.source {
        ImageSource::Snapshot { vm } => wire::ImageSource {
            kind: i.source.kind().to_owned(),
            vm: Some(vm.0),
            url: None,
            checksum: None,
        },
        ImageSource::Url { url, checksum } => wire::ImageSource {
            kind: i.source.kind().to_owned(),
            vm: None,
            url: Some(url.clone()),
            checksum: checksum.clone(),
        },
    };
    wire::Image {
        id: i.id.0,
        name: i.name.clone(),
        status: i.status.as_str().to_owned(),
        source,
        size: i.size_gb,
        sha256: i.sha256.clone(),
        host: i.placement.as_ref().map(|p| p.host.clone()),
        provider: i.placement.as_ref().map(|p| p.provider.clone()),
        region: i.placement.as_ref().map(|p| p.region.clone()),
        labels: i.labels.clone(),
        error: i.error_message.clone(),
        created: i.created,
    }
}

// gRPC.

fn grpc_created<T>(req: &Request<T>, c: &ImageCreated) -> pb::CreateImageResponse {
    note_resource(req, "image", c.image.id);
    note_action(req, &c.action);
    pb::CreateImageResponse {
        image: Some(grpc_image(view(&c.image))),
        action: Some(convert::action(views::action(&c.action))),
        warnings: convert::warnings(&c.warnings),
    }
}

#[tonic::async_trait]
impl pb::image_service_server::ImageService for Svc {
    async fn import_image(
        &self,
        req: Request<pb::ImportImageRequest>,
    ) -> Result<tonic::Response<pb::CreateImageResponse>, Status> {
        let p = principal(&req)?;
        let body = import_body(req.get_ref());
        answer(
            self.0
                .app
                .image_import(&p, &body)
                .await
                .map(|c| grpc_created(&req, &c)),
        )
    }

    async fn create_image_from_vm(
        &self,
        req: Request<pb::CreateImageFromVmRequest>,
    ) -> Result<tonic::Response<pb::CreateImageResponse>, Status> {
        let p = principal(&req)?;
        let r = async {
            let vm = id("vm", &req.get_ref().vm)?;
            let body = snapshot_body(req.get_ref());
            let c = self.0.app.vm_create_image(&p, vm, &body).await?;
            Ok(grpc_created(&req, &c))
        };
        answer(r.await)
    }

    async fn get_image(
        &self,
        req: Request<pb::GetImageRequest>,
    ) -> Result<tonic::Response<pb::Image>, Status> {
        let p = principal(&req)?;
        let r = async {
            let i = self
                .0
                .app
                .image_get(&p, id("id", &req.get_ref().id)?)
                .await?;
            Ok(grpc_image(view(&i)))
        };
        answer(r.await)
    }

    async fn list_images(
        &self,
        req: Request<pb::ListImagesRequest>,
    ) -> Result<tonic::Response<pb::ListImagesResponse>, Status> {
        let p = principal(&req)?;
        let r = async {
            let pairs = convert::list_query(req.get_ref().options.as_ref());
            let q = ListQuery::parse(&pairs, |v| ImageStatus::parse(v).is_some())?;
            let images = self.0.app.image_list(&p, &q).await?;
            Ok(pb::ListImagesResponse {
                images: images
                    .items
                    .iter()
                    .map(|i| grpc_image(view(i)))
                    .collect(),
                pagination: Some(convert::pagination(images.pagination())),
            })
        };
        answer(r.await)
    }

    async fn update_image(
        &self,
        req: Request<pb::UpdateImageRequest>,
    ) -> Result<tonic::Response<pb::ImageResponse>, Status> {
        let p = principal(&req)?;
        let r = async {
            let image_id = id("id", &req.get_ref().id)?;
            note_resource(&req, "image", image_id);
            let body = convert::name_labels(&req.get_ref().name, &req.get_ref().labels);
            let (i, warnings) = self.0.app.image_update(&p, image_id, &body).await?;
            Ok(pb::ImageResponse {
                image: Some(grpc_image(view(&i))),
                warnings: convert::warnings(&warnings),
            })
        };
        answer(r.await)
    }

    async fn delete_image(
        &self,
        req: Request<pb::DeleteImageRequest>,
    ) -> Result<tonic::Response<pb::Action>, Status> {
        action_on(&req, "image", &req.get_ref().id, |p, id| async move {
            self.0.app.image_delete(&p, id).await
        })
        .await
    }

    async fn list_image_actions(
        &self,
        req: Request<pb::ResourceActionsRequest>,
    ) -> Result<tonic::Response<pb::ResourceActionsResponse>, Status> {
        self.resource_actions(&req, meson_core::action::ResourceType::Image)
            .await
    }
}

fn grpc_image(i: wire::Image) -> pb::Image {
    pb::Image {
        id: i.id.to_string(),
        name: i.name,
        status: i.status,
        source_type: i.source.kind,
        source_vm: i.source.vm.map(|id| id.to_string()),
        source_url: i.source.url,
        source_checksum: i.source.checksum,
        size: i.size,
        sha256: i.sha256,
        host: i.host,
        provider: i.provider,
        region: i.region,
        labels: map(&i.labels),
        error: i.error,
        created: Some(timestamp(i.created)),
    }
}

/// An `ImportImageRequest` as the REST body of `POST /v1/images`: empty
/// fields and a zero size are absent.
fn import_body(r: &pb::ImportImageRequest) -> serde_json::Value {
    Obj::new()
        .str("name", &r.name)
        .str("url", &r.url)
        .str("checksum", &r.checksum)
        .num("size", r.size)
        .labels("labels", &r.labels)
        .str("provider", &r.provider)
        .str("continent", &r.continent)
        .str("region", &r.region)
        .value()
}

/// A `CreateImageFromVmRequest` as the REST body of
/// `POST /v1/vms/{id}/actions/create-image`.
fn snapshot_body(r: &pb::CreateImageFromVmRequest) -> serde_json::Value {
    Obj::new()
        .str("name", &r.name)
        .labels("labels", &r.labels)
        .value()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grpc::convert::shapes::{filled, unread};

    /// Every key the gRPC conversions write is one the REST reader reads.
    #[test]
    fn the_grpc_requests_are_read_as_the_rest_bodies() {
        let m: pb::ImportImageRequest = filled("meson.v1.ImportImageRequest");
        let unread_import = unread(&import_body(&m), |v| drop(ImageImport::parse(v, &[])));
        let m: pb::CreateImageFromVmRequest = filled("meson.v1.CreateImageFromVmRequest");
        let unread_snapshot = unread(&snapshot_body(&m), |v| drop(ImageSnapshot::parse(v)));
        assert!(unread_import.is_empty(), "written, never read: {unread_import:?}");
        assert!(unread_snapshot.is_empty(), "written, never read: {unread_snapshot:?}");
    }
}
