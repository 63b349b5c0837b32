//! SSH keys: public keys a tenant keeps at meson (`meson_core::ssh`), as
//! Hetzner's `ssh_keys`. `/v1/ssh-keys` over REST, `meson.v1.SshKeyService`
//! over gRPC, both through the app calls here. A key's name and its
//! fingerprint are each the tenant's only one; nothing on AtomOS changes,
//! so every call answers at once, with no action.

use crate::app::list::{ListQuery, Paged, SortField};
use crate::authz::{self, Rule};
use crate::grpc::convert::json::Obj;
use crate::grpc::convert::meta::{map, timestamp};
use crate::grpc::convert::{list_query, name_labels, pagination, warnings};
use crate::grpc::{Svc, answer, id, note_resource, principal};
use crate::http::resource::prelude::*;
use crate::http::responses::{BadBody, BadId, CannotDelete, CannotModify};
use axum::http::StatusCode;
use meson_core::ssh::{KeyCreate, MAX_NAME_LEN, SshKeyId, StoredKey};
use meson_core::Error;
use meson_proto::meson::v1 as pb;
use meson_types::common::NameLabelsUpdate;
use meson_types::ssh_key as wire;
use tonic::{Request, Status};
use utoipa::IntoResponses;

/// How its operations read a request body.
pub(super) const BODIES: &[super::Body] = &[
    super::Body {
        method: "post",
        path: "/v1/ssh-keys",
        canonical: super::canonical::<wire::SshKeyCreateRequest>,
        read: |v| super::shown(KeyCreate::parse(v)),
    },
    super::Body {
        method: "patch",
        path: "/v1/ssh-keys/{id}",
        canonical: super::canonical::<NameLabelsUpdate>,
        read: |v| super::shown(meson_core::patch::NameLabels::parse(v, MAX_NAME_LEN)),
    },
];

/// Viewers read keys; editors keep, change and delete them.
pub(super) const RULES: &[Rule] = &[
    authz::read("ssh_key_list"),
    authz::read("ssh_key_get"),
    authz::write("ssh_key_create"),
    authz::write("ssh_key_update"),
    authz::write("ssh_key_delete"),
];

pub(super) fn routes() -> OpenApiRouter<AppState> {
    let router = OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(read, update, delete));
    super::described(
        router,
        "ssh-keys",
        "Public SSH keys kept at meson",
    )
}

pub(super) fn grpc(svc: &Svc, max: usize) -> pb::ssh_key_service_server::SshKeyServiceServer<Svc> {
    pb::ssh_key_service_server::SshKeyServiceServer::new(svc.clone())
        .max_decoding_message_size(max)
}

// The app layer.

impl App {
    /// Keeps a key: its name and fingerprint free among the tenant's keys
    /// (`uniqueness_error` naming `name` or `public_key` otherwise).
    pub async fn ssh_key_create(
        &self,
        p: &Principal,
        body: &serde_json::Value,
    ) -> Result<(StoredKey, Vec<Warning>)> {
        let (req, warnings) = KeyCreate::parse(body)?;
        let key = req.stored(&p.tenant);
        meson_db::ssh_keys::insert(&self.pool, &key).await?;
        tracing::info!(ssh_key = %key.id, fingerprint = %key.fingerprint, "SSH key kept");
        Ok((key, warnings))
    }

    pub async fn ssh_key_get(&self, p: &Principal, id: SshKeyId) -> Result<StoredKey> {
        meson_db::ssh_keys::get(&self.pool, &p.tenant, id).await
    }

    /// A page of the tenant's keys by name and labels; keys have no status
    /// to filter or sort by.
    pub async fn ssh_key_list(
        &self,
        p: &Principal,
        query: &[(String, String)],
    ) -> Result<Paged<StoredKey>> {
        let q = ListQuery::parse(query, |_| false)?;
        if q.sort.iter().any(|k| k.field == SortField::Status) {
            return Err(Error::invalid(
                "sort",
                "SSH keys sort by id, name or created: they have no status",
            ));
        }
        self.page(&p.tenant, &q.page, q.bound("ssh_keys", &p.tenant)?, &q.filter())
            .await
    }

    /// Renames and/or relabels a key (its key stays: keep another instead).
    pub async fn ssh_key_update(
        &self,
        p: &Principal,
        id: SshKeyId,
        body: &serde_json::Value,
    ) -> Result<(StoredKey, Vec<Warning>)> {
        let renamed = meson_db::ssh_keys::RENAMED;
        let warnings = self.rename::<StoredKey>(&p.tenant, id.0, body, MAX_NAME_LEN, renamed)
            .await?;
        Ok((self.ssh_key_get(p, id).await?, warnings))
    }

    /// Forgets a key. VMs made with it keep it in their `authorized_keys`.
    pub async fn ssh_key_delete(&self, p: &Principal, id: SshKeyId) -> Result<()> {
        meson_db::ssh_keys::delete(&self.pool, &p.tenant, id).await?;
        tracing::info!(ssh_key = %id, "SSH key deleted");
        Ok(())
    }
}

/// A key as both transports show it.
fn view(k: &StoredKey) -> wire::SshKey {
    wire::SshKey {
        id: k.id.0,
        name: k.name.clone(),
        public_key: k.key.as_str().to_owned(),
        fingerprint: k.fingerprint.clone(),
        labels: k.labels.clone(),
        created: k.created,
    }
}

fn answered(k: &StoredKey, w: &[Warning]) -> wire::SshKeyResponse {
    wire::SshKeyResponse {
        ssh_key: view(k),
        warnings: w.iter().map(views::warning).collect(),
    }
}

// REST.

/// The key the path names is not the tenant's.
#[derive(IntoResponses)]
#[response(
    status = 404,
    description = "No such SSH key for this tenant (`not_found`)."
)]
struct NoSuchSshKey(#[allow(dead_code)] ErrorResponse);

/// SSH keys through the shared handlers.
struct SshKeys;

impl Creatable for SshKeys {
    type Created = wire::SshKeyResponse;

    async fn create(app: &App, p: &Principal, body: &serde_json::Value) -> Result<Self::Created> {
        let (key, warnings) = app.ssh_key_create(p, body).await?;
        Ok(answered(&key, &warnings))
    }
}

impl Resource for SshKeys {
    type Id = SshKeyId;
    type Item = StoredKey;
    type Got = wire::SshKeyResponse;
    type Updated = wire::SshKeyResponse;
    type Listed = Paged<StoredKey>;
    type Page = wire::SshKeyList;
    const PATH: &'static str = "/v1/ssh-keys";

    async fn get(app: &App, p: &Principal, id: SshKeyId) -> Result<StoredKey> {
        app.ssh_key_get(p, id).await
    }

    async fn update(
        app: &App,
        p: &Principal,
        id: SshKeyId,
        body: &serde_json::Value,
    ) -> Result<(StoredKey, Vec<Warning>)> {
        app.ssh_key_update(p, id, body).await
    }

    async fn list(app: &App, p: &Principal, query: &[(String, String)]) -> Result<Self::Listed> {
        app.ssh_key_list(p, query).await
    }

    fn got(k: &StoredKey) -> wire::SshKeyResponse {
        answered(k, &[])
    }

    fn updated(k: &StoredKey, warnings: Vec<meson_types::Warning>) -> wire::SshKeyResponse {
        wire::SshKeyResponse {
            ssh_key: view(k),
            warnings,
        }
    }

    fn page(listed: &Paged<StoredKey>, meta: meson_types::Meta) -> wire::SshKeyList {
        wire::SshKeyList {
            ssh_keys: listed.items.iter().map(view).collect(),
            meta,
        }
    }
}

resource::list_operation! {
    SshKeys => wire::SshKeyList,
    doc: "The tenant's SSH keys, filtered by name and labels.",
    path: "/v1/ssh-keys",
    tag: "ssh-keys",
    operation_id: "ssh_key_list",
    summary: "List SSH keys",
    query: wire::SshKeyListQuery,
    found: "A page of SSH keys.",
}

resource::create_operation! {
    SshKeys;
    /// Keeps a public key.
    #[utoipa::path(
        post,
        path = "/v1/ssh-keys",
        tag = "ssh-keys",
        operation_id = "ssh_key_create",
        summary = "Create an SSH key",
        description = "Keeps an OpenSSH public key under a name, with its fingerprint \
            (`SHA256:...`, as `ssh-keygen -l` prints it). Nothing on AtomOS changes.",
        request_body(content = wire::SshKeyCreateRequest, content_type = "application/json",
            example = json!({"name": "laptop", "public_key": "ssh-ed25519 \
                AAAAC3NzaC1lZDI1NTE5AAAAIMLavtiPfhiG3t6TAxHosXoVh7Pc/lSD8L9SNPyAzp1d user@host",
                "labels": {"team": "web"}})),
        responses(
            (status = 201, description = "The key.", body = wire::SshKeyResponse,
                links(("GetSshKey" = (operation_id = "ssh_key_get",
                    parameters(("id" = "$response.body#/ssh_key/id")))))),
            BadBody,
            CannotModify,
            (status = 409, description = "A key of the tenant has this name or is this key \
                (`uniqueness_error`, naming `name` or `public_key`), or the Idempotency-Key was \
                used with another body (`conflict`).", body = ErrorResponse),
        ),
    )]
}

resource::get_operation! {
    SshKeys => wire::SshKeyResponse,
    doc: "Reads an SSH key.",
    path: "/v1/ssh-keys/{id}",
    tag: "ssh-keys",
    operation_id: "ssh_key_get",
    summary: "Get an SSH key",
    id: "The key's id.",
    found: "The key.",
    missing: NoSuchSshKey,
}

resource::update_operation! {
    SshKeys => wire::SshKeyResponse;
    /// Renames and/or relabels an SSH key.
    #[utoipa::path(
        patch,
        path = "/v1/ssh-keys/{id}",
        tag = "ssh-keys",
        operation_id = "ssh_key_update",
        summary = "Update an SSH key",
        description = "Changes a key's name and/or replaces its labels; the key itself \
            stays (keep another to change it).",
        params(("id" = uuid::Uuid, Path, description = "The key's id.")),
        request_body(content = NameLabelsUpdate, content_type = "application/json"),
        responses(
            (status = 200, description = "The key as it is now.", body = wire::SshKeyResponse),
            BadBody,
            CannotModify,
            NoSuchSshKey,
            (status = 409, description = "The name is taken (`uniqueness_error`).",
                body = ErrorResponse),
        ),
    )]
}

/// Deletes an SSH key.
#[utoipa::path(
    delete,
    path = "/v1/ssh-keys/{id}",
    tag = "ssh-keys",
    operation_id = "ssh_key_delete",
    summary = "Delete an SSH key",
    description = "Forgets the key: its name and key may be kept again. VMs created with \
        it keep it.",
    params(("id" = uuid::Uuid, Path, description = "The key's id.")),
    responses(
        (status = 204, description = "Deleted."),
        BadId,
        CannotDelete,
        NoSuchSshKey,
    ),
)]
async fn delete(
    State(s): State<AppState>,
    p: Principal,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    s.app.ssh_key_delete(&p, parse_id(&id)?).await?;
    Ok(StatusCode::NO_CONTENT)
}

// gRPC.

fn grpc_key(k: &StoredKey) -> pb::SshKey {
    let k = view(k);
    pb::SshKey {
        id: k.id.to_string(),
        name: k.name,
        public_key: k.public_key,
        fingerprint: k.fingerprint,
        labels: map(&k.labels),
        created: Some(timestamp(k.created)),
    }
}

fn grpc_answer(k: &StoredKey, w: &[Warning]) -> pb::SshKeyResponse {
    pb::SshKeyResponse {
        ssh_key: Some(grpc_key(k)),
        warnings: warnings(w),
    }
}

/// A `CreateSshKeyRequest` as the REST body of `POST /v1/ssh-keys`.
fn create_body(r: &pb::CreateSshKeyRequest) -> serde_json::Value {
    Obj::new()
        .str("name", &r.name)
        .str("public_key", &r.public_key)
        .labels("labels", &r.labels)
        .value()
}

#[tonic::async_trait]
impl pb::ssh_key_service_server::SshKeyService for Svc {
    async fn create_ssh_key(
        &self,
        req: Request<pb::CreateSshKeyRequest>,
    ) -> Result<tonic::Response<pb::SshKeyResponse>, Status> {
        let p = principal(&req)?;
        let r = async {
            let (key, w) = self
                .0
                .app
                .ssh_key_create(&p, &create_body(req.get_ref()))
                .await?;
            note_resource(&req, "ssh_key", key.id);
            Ok(grpc_answer(&key, &w))
        };
        answer(r.await)
    }

    async fn get_ssh_key(
        &self,
        req: Request<pb::GetSshKeyRequest>,
    ) -> Result<tonic::Response<pb::SshKey>, Status> {
        let p = principal(&req)?;
        let r = async {
            let key = self
                .0
                .app
                .ssh_key_get(&p, id("id", &req.get_ref().id)?)
                .await?;
            Ok(grpc_key(&key))
        };
        answer(r.await)
    }

    async fn list_ssh_keys(
        &self,
        req: Request<pb::ListSshKeysRequest>,
    ) -> Result<tonic::Response<pb::ListSshKeysResponse>, Status> {
        let p = principal(&req)?;
        let r = async {
            let query = list_query(req.get_ref().options.as_ref());
            let keys = self.0.app.ssh_key_list(&p, &query).await?;
            Ok(pb::ListSshKeysResponse {
                ssh_keys: keys.items.iter().map(grpc_key).collect(),
                pagination: Some(pagination(keys.pagination())),
            })
        };
        answer(r.await)
    }

    async fn update_ssh_key(
        &self,
        req: Request<pb::UpdateSshKeyRequest>,
    ) -> Result<tonic::Response<pb::SshKeyResponse>, Status> {
        let p = principal(&req)?;
        let r = async {
            let m = req.get_ref();
            let key: SshKeyId = id("id", &m.id)?;
            note_resource(&req, "ssh_key", key);
            let body = name_labels(&m.name, &m.labels);
            let (key, w) = self.0.app.ssh_key_update(&p, key, &body).await?;
            Ok(grpc_answer(&key, &w))
        };
        answer(r.await)
    }

    async fn delete_ssh_key(
        &self,
        req: Request<pb::DeleteSshKeyRequest>,
    ) -> Result<tonic::Response<pb::DeleteSshKeyResponse>, Status> {
        let p = principal(&req)?;
        let r = async {
            let key: SshKeyId = id("id", &req.get_ref().id)?;
            note_resource(&req, "ssh_key", key);
            self.0.app.ssh_key_delete(&p, key).await?;
            Ok(pb::DeleteSshKeyResponse {})
        };
        answer(r.await)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grpc::convert::shapes::{filled, unread};

    /// Every key the gRPC conversion writes is one the REST reader reads.
    #[test]
    fn the_grpc_request_is_read_as_the_rest_body() {
        let m: pb::CreateSshKeyRequest = filled("meson.v1.CreateSshKeyRequest");
        let unread = unread(&create_body(&m), |v| drop(KeyCreate::parse(v)));
        assert!(unread.is_empty(), "written, never read: {unread:?}");
    }
}
