//! `meson.v1.OrganizationService`: the organisation a call acts in and its
//! sub-organisations, carved out of their parent's quotas
//! (`app::organizations`). The organisation a call acts in is its token's,
//! or the one its `meson-organization` metadata names.

use super::{Svc, answer, convert, note_resource, principal};
use crate::views;
use meson_core::Error;
use meson_db::organizations::Node;
use meson_proto::meson::v1 as pb;
use tonic::{Request, Response, Status};

/// An organisation's id from a request field: required (REST's path
/// always has one).
fn org_id(raw: &str) -> Result<&str, Error> {
    if raw.is_empty() {
        Err(Error::invalid("id", "is required"))
    } else {
        Ok(raw)
    }
}

fn one(n: &Node) -> pb::Organization {
    convert::organization(views::organization(n))
}

#[tonic::async_trait]
impl pb::organization_service_server::OrganizationService for Svc {
    async fn list_organizations(
        &self,
        req: Request<pb::ListOrganizationsRequest>,
    ) -> Result<Response<pb::ListOrganizationsResponse>, Status> {
        let p = principal(&req)?;
        let r = async {
            let tree = self.0.app.org_list(&p).await?;
            Ok(pb::ListOrganizationsResponse {
                organizations: tree.iter().map(one).collect(),
            })
        };
        answer(r.await)
    }

    async fn get_organization(
        &self,
        req: Request<pb::GetOrganizationRequest>,
    ) -> Result<Response<pb::Organization>, Status> {
        let p = principal(&req)?;
        let r = async {
            let id = org_id(&req.get_ref().id)?;
            Ok(one(&self.0.app.org_get(&p, id).await?))
        };
        answer(r.await)
    }

    async fn create_organization(
        &self,
        req: Request<pb::CreateOrganizationRequest>,
    ) -> Result<Response<pb::Organization>, Status> {
        let p = principal(&req)?;
        let r = async {
            let body = convert::organization_create(req.get_ref());
            let n = self.0.app.org_create(&p, &body).await?;
            note_resource(&req, "organization", &n.org.id);
            Ok(one(&n))
        };
        answer(r.await)
    }

    async fn update_organization(
        &self,
        req: Request<pb::UpdateOrganizationRequest>,
    ) -> Result<Response<pb::Organization>, Status> {
        let p = principal(&req)?;
        let r = async {
            let id = org_id(&req.get_ref().id)?;
            note_resource(&req, "organization", id);
            let body = convert::organization_update(req.get_ref());
            Ok(one(&self.0.app.org_update(&p, id, &body).await?))
        };
        answer(r.await)
    }

    async fn delete_organization(
        &self,
        req: Request<pb::DeleteOrganizationRequest>,
    ) -> Result<Response<pb::Organization>, Status> {
        let p = principal(&req)?;
        let r = async {
            let id = org_id(&req.get_ref().id)?;
            note_resource(&req, "organization", id);
            Ok(one(&self.0.app.org_delete(&p, id).await?))
        };
        answer(r.await)
    }
}
