//! `meson.v1.VmService`.

use super::{
    Svc, action_call, action_on, answer, convert, id, note_action, note_resource, principal,
};
use crate::app::ListQuery;
use crate::views;
use meson_core::Error;
use meson_core::vm::VmStatus;
use meson_proto::meson::v1 as pb;
use tonic::{Request, Response, Status};

#[tonic::async_trait]
impl pb::vm_service_server::VmService for Svc {
    async fn create_vm(
        &self,
        req: Request<pb::CreateVmRequest>,
    ) -> Result<Response<pb::CreateVmResponse>, Status> {
        let p = principal(&req)?;
        let body = convert::vm_create(req.get_ref());
        answer(self.0.app.vm_create(&p, &body).await.map(|c| {
            note_resource(&req, "vm", c.vm.id);
            note_action(&req, &c.action);
            pb::CreateVmResponse {
                vm: Some(convert::vm(views::vm(&c.vm, &c.parts))),
                action: Some(convert::action(views::action(&c.action))),
                warnings: convert::warnings(&c.warnings),
            }
        }))
    }

    async fn get_vm(&self, req: Request<pb::GetVmRequest>) -> Result<Response<pb::Vm>, Status> {
        let p = principal(&req)?;
        let r = async {
            let (vm, parts) = self.0.app.vm_get(&p, id("id", &req.get_ref().id)?).await?;
            Ok(convert::vm(views::vm(&vm, &parts)))
        };
        answer(r.await)
    }

    async fn list_vms(
        &self,
        req: Request<pb::ListVmsRequest>,
    ) -> Result<Response<pb::ListVmsResponse>, Status> {
        let p = principal(&req)?;
        let r = async {
            let pairs = convert::list_query(req.get_ref().options.as_ref());
            let q = ListQuery::parse(&pairs, |v| VmStatus::parse(v).is_some())?;
            let res = self.0.app.vm_list(&p, &q).await?;
            Ok(pb::ListVmsResponse {
                vms: res
                    .vms
                    .items
                    .iter()
                    .map(|v| convert::vm(views::vm(v, &res.parts)))
                    .collect(),
                pagination: Some(convert::pagination(res.vms.pagination())),
            })
        };
        answer(r.await)
    }

    async fn update_vm(
        &self,
        req: Request<pb::UpdateVmRequest>,
    ) -> Result<Response<pb::UpdateVmResponse>, Status> {
        let p = principal(&req)?;
        let r = async {
            let vm_id = id("id", &req.get_ref().id)?;
            note_resource(&req, "vm", vm_id);
            let body = convert::name_labels(&req.get_ref().name, &req.get_ref().labels);
            let ((vm, parts), warnings) = self.0.app.vm_update(&p, vm_id, &body).await?;
            Ok(pb::UpdateVmResponse {
                vm: Some(convert::vm(views::vm(&vm, &parts))),
                warnings: convert::warnings(&warnings),
            })
        };
        answer(r.await)
    }

    async fn delete_vm(
        &self,
        req: Request<pb::DeleteVmRequest>,
    ) -> Result<Response<pb::Action>, Status> {
        action_on(&req, "vm", &req.get_ref().id, |p, id| async move {
            self.0.app.vm_delete(&p, id).await
        })
        .await
    }

    async fn power_vm(
        &self,
        req: Request<pb::PowerVmRequest>,
    ) -> Result<Response<pb::Action>, Status> {
        action_call(&req, |p, req| async move {
            let vm_id = id("id", &req.get_ref().id)?;
            note_resource(req, "vm", vm_id);
            let command = &req.get_ref().command;
            let op = meson_types::vm::PowerCommand::parse(command)
                .ok_or_else(|| Error::invalid("command", "must be poweron, poweroff or reboot"))?;
            self.0.app.vm_power(&p, vm_id, op).await
        })
        .await
    }

    async fn resize_vm(
        &self,
        req: Request<pb::ResizeVmRequest>,
    ) -> Result<Response<pb::Action>, Status> {
        let body = convert::vm_resize(req.get_ref());
        action_on(&req, "vm", &req.get_ref().id, |p, id| async move {
            Ok(self.0.app.vm_resize(&p, id, &body).await?.0)
        })
        .await
    }

    async fn rebuild_vm(
        &self,
        req: Request<pb::RebuildVmRequest>,
    ) -> Result<Response<pb::Action>, Status> {
        let body = convert::vm_rebuild(req.get_ref());
        action_on(&req, "vm", &req.get_ref().id, |p, id| async move {
            Ok(self.0.app.vm_rebuild(&p, id, &body).await?.0)
        })
        .await
    }

    async fn migrate_vm(
        &self,
        req: Request<pb::MigrateVmRequest>,
    ) -> Result<Response<pb::Action>, Status> {
        let body = convert::vm_migrate(req.get_ref());
        action_on(&req, "vm", &req.get_ref().id, |p, id| async move {
            Ok(self.0.app.vm_migrate(&p, id, &body).await?.0)
        })
        .await
    }

    async fn attach_vm_network(
        &self,
        req: Request<pb::VmNetworkRequest>,
    ) -> Result<Response<pb::Action>, Status> {
        let body = convert::vm_network(req.get_ref());
        action_on(&req, "vm", &req.get_ref().id, |p, id| async move {
            Ok(self.0.app.vm_attach_network(&p, id, &body).await?.0)
        })
        .await
    }

    async fn detach_vm_network(
        &self,
        req: Request<pb::VmNetworkRequest>,
    ) -> Result<Response<pb::Action>, Status> {
        let body = convert::vm_network(req.get_ref());
        action_on(&req, "vm", &req.get_ref().id, |p, id| async move {
            Ok(self.0.app.vm_detach_network(&p, id, &body).await?.0)
        })
        .await
    }

    async fn list_vm_actions(
        &self,
        req: Request<pb::ResourceActionsRequest>,
    ) -> Result<Response<pb::ResourceActionsResponse>, Status> {
        self.resource_actions(&req, meson_core::action::ResourceType::Vm)
            .await
    }
}
