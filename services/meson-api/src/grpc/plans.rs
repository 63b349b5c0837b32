//! `meson.v1.PlanService`: plans, the named quota sets operators put
//! tenants on (`app::quotas`). A plan is read as REST's PUT body is, by
//! `App::plan_put`.

use super::{Svc, answer, convert, note_resource, principal};
use crate::views;
use meson_core::quota::{Plan, Resources};
use meson_proto::meson::v1 as pb;
use tonic::{Request, Response, Status};

fn plan((p, q): (Plan, Resources)) -> pb::Plan {
    convert::plan(views::plan(&p, &q))
}

#[tonic::async_trait]
impl pb::plan_service_server::PlanService for Svc {
    async fn list_plans(
        &self,
        req: Request<pb::ListPlansRequest>,
    ) -> Result<Response<pb::ListPlansResponse>, Status> {
        // Anyone admitted reads the plans; the gate checked the role.
        principal(&req)?;
        let r = async {
            Ok(pb::ListPlansResponse {
                plans: self
                    .0
                    .app
                    .plan_list()
                    .await?
                    .into_iter()
                    .map(plan)
                    .collect(),
            })
        };
        answer(r.await)
    }

    async fn get_plan(
        &self,
        req: Request<pb::GetPlanRequest>,
    ) -> Result<Response<pb::Plan>, Status> {
        principal(&req)?;
        let r = async { Ok(plan(self.0.app.plan_get(&req.get_ref().name).await?)) };
        answer(r.await)
    }

    async fn put_plan(
        &self,
        req: Request<pb::PutPlanRequest>,
    ) -> Result<Response<pb::PutPlanResponse>, Status> {
        // Operators only: the gate refused anyone else (`plan_put`'s rule).
        let p = principal(&req)?;
        let r = async {
            let name = &req.get_ref().name;
            note_resource(&req, "plan", name);
            let body = convert::plan_put(req.get_ref());
            let (v, created) = self.0.app.plan_put(&p, name, &body).await?;
            Ok(pb::PutPlanResponse {
                plan: Some(plan(v)),
                created,
            })
        };
        answer(r.await)
    }

    async fn delete_plan(
        &self,
        req: Request<pb::DeletePlanRequest>,
    ) -> Result<Response<pb::DeletePlanResponse>, Status> {
        // Operators only: the gate refused anyone else (`plan_delete`'s rule).
        principal(&req)?;
        let r = async {
            let name = &req.get_ref().name;
            note_resource(&req, "plan", name);
            self.0.app.plan_delete(name).await?;
            Ok(pb::DeletePlanResponse {})
        };
        answer(r.await)
    }
}
