//! `meson.v1.QuotaService`: a tenant's quotas (`app::quotas`). An update
//! is read as REST's PATCH body is, by `App::tenant_quota_update`.

use super::{Svc, answer, convert, note_resource, principal};
use crate::views;
use meson_proto::meson::v1 as pb;
use tonic::{Request, Response, Status};

#[tonic::async_trait]
impl pb::quota_service_server::QuotaService for Svc {
    async fn get_quota(
        &self,
        req: Request<pb::GetQuotaRequest>,
    ) -> Result<Response<pb::Quota>, Status> {
        let p = principal(&req)?;
        let r = async {
            Ok(convert::quota(views::quota(
                &self.0.app.quota_get(&p).await?,
            )))
        };
        answer(r.await)
    }

    async fn get_tenant_quota(
        &self,
        req: Request<pb::GetTenantQuotaRequest>,
    ) -> Result<Response<pb::Quota>, Status> {
        // Operators only: the gate refused anyone else.
        let p = principal(&req)?;
        let r = async {
            let q = self
                .0
                .app
                .tenant_quota_get(&p, &req.get_ref().tenant)
                .await?;
            Ok(convert::quota(views::quota(&q)))
        };
        answer(r.await)
    }

    async fn update_tenant_quota(
        &self,
        req: Request<pb::UpdateTenantQuotaRequest>,
    ) -> Result<Response<pb::Quota>, Status> {
        // Operators only: the gate refused anyone else.
        let p = principal(&req)?;
        let r = async {
            let tenant = &req.get_ref().tenant;
            note_resource(&req, "tenant", tenant);
            let body = convert::quota_update(req.get_ref())?;
            let q = self.0.app.tenant_quota_update(&p, tenant, &body).await?;
            Ok(convert::quota(views::quota(&q)))
        };
        answer(r.await)
    }
}
