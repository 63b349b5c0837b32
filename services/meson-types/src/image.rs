//! Images on the wire.

use crate::action::Action;
use crate::{Meta, Warning};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use utoipa::ToSchema;
use uuid::Uuid;

/// An image: a boot disk of the tenant's, on one AtomOS host, made as a
/// snapshot of a VM's boot volume or imported from a URL. It counts its
/// `size` against the `images_gb` quota until deleted.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Image {
    pub id: Uuid,
    pub name: String,
    /// `creating`, `available`, `deleting` or `error` (see `error`).
    #[schema(value_type = ImageStatus)]
    pub status: String,
    pub source: ImageSource,
    /// GB: the snapshot's boot volume's size, or the import's `size`.
    pub size: u32,
    /// sha256 (hex) of an import's bytes, once the host has them (when the
    /// host reports it, or the request's `checksum` it verified); null for
    /// a snapshot.
    #[serde(default)]
    #[schema(required = true)]
    pub sha256: Option<String>,
    /// The AtomOS host it lives on; null until placed.
    #[serde(default)]
    #[schema(required = true)]
    pub host: Option<String>,
    #[serde(default)]
    #[schema(required = true)]
    pub provider: Option<String>,
    #[serde(default)]
    #[schema(required = true)]
    pub region: Option<String>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Why its create failed (`status` `error`); null otherwise.
    #[serde(default)]
    #[schema(required = true)]
    pub error: Option<String>,
    pub created: DateTime<Utc>,
}

/// Where an image's bytes came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ImageSource {
    /// `snapshot` (of `vm`'s boot volume) or `url` (imported from `url`).
    #[schema(example = "snapshot")]
    #[serde(rename = "type")]
    pub kind: String,
    /// The VM a snapshot was taken of (it may since have been deleted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm: Option<Uuid>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The sha256 the import was asked to match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ImageResponse {
    pub image: Image,
    /// Unknown fields that were ignored; absent when there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<Warning>,
}

/// An image (`creating`) and its `create_image` action.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ImageCreateResponse {
    pub image: Image,
    pub action: Action,
    /// Unknown fields that were ignored; absent when there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<Warning>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ImageList {
    pub images: Vec<Image>,
    pub meta: Meta,
}

crate::common::placed! {
    /// `POST /v1/images`: import an image from an HTTP(S) URL. The host
    /// the image is placed on downloads it; meson does not.
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
    pub struct ImageImportRequest {
        /// Unique among the tenant's images.
        #[schema(
            example = "ubuntu-2404-golden",
            max_length = 63,
            pattern = "^[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?$"
        )]
        pub name: String,
        /// An `http` or `https` URL of a qcow2 or raw disk image, without
        /// credentials.
        #[schema(
            example = "https://cloud-images.ubuntu.com/noble/current/noble-server-cloudimg-amd64.img",
            max_length = 2048
        )]
        pub url: String,
        /// The file's sha256 (64 hex digits, optionally prefixed `sha256:`):
        /// the import fails, and leaves nothing behind, when the download
        /// differs.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schema(pattern = "^(sha256:)?[0-9a-fA-F]{64}$")]
        pub checksum: Option<String>,
        /// GB: the disk's size (the file must fit); default 10.
        #[serde(
            default,
            deserialize_with = "crate::lenient::opt_int",
            skip_serializing_if = "Option::is_none"
        )]
        #[schema(minimum = 1, maximum = 10_240, example = 10)]
        pub size: Option<u32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schema(value_type = Option<crate::requests::LabelsRequest>)]
        pub labels: Option<BTreeMap<String, String>>,
    }
}

/// `POST /v1/vms/{id}/actions/create-image`: snapshot the VM's boot volume.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ImageSnapshotRequest {
    /// Unique among the tenant's images.
    #[schema(
        example = "web-golden",
        max_length = 63,
        pattern = "^[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?$"
    )]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<crate::requests::LabelsRequest>)]
    pub labels: Option<BTreeMap<String, String>>,
}

/// An image's status (documentation: the wire field is a string).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ImageStatus {
    /// Being copied or downloaded on its host.
    Creating,
    /// Ready.
    Available,
    Deleting,
    /// Its create failed (see `error`); delete it.
    Error,
}

/// `GET /v1/images` filters.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ImageListQuery {
    /// Only the image with this name.
    pub name: Option<String>,
    /// Only images in one of these statuses (repeat the parameter).
    pub status: Option<Vec<ImageStatus>>,
    /// Kubernetes label selector: `env=prod,tier!=db,team in (a,b),!legacy`.
    pub label_selector: Option<String>,
    /// `field[:asc|:desc]`, field among id, name, status and created; up to
    /// two keys (repeat the parameter).
    #[param(max_items = 2, value_type = Option<Vec<crate::requests::VmSort>>)]
    pub sort: Option<Vec<String>>,
}
