//! `meson.v1.BackupService`.

use super::{Svc, action_on, answer, convert, id, note_action, note_resource, principal};
use crate::app::list::BackupQuery;
use crate::views;
use meson_core::VmId;
use meson_proto::meson::v1 as pb;
use tonic::{Request, Response, Status};

#[tonic::async_trait]
impl pb::backup_service_server::BackupService for Svc {
    async fn enable_backups(
        &self,
        req: Request<pb::EnableBackupsRequest>,
    ) -> Result<Response<pb::UpdateVmResponse>, Status> {
        let p = principal(&req)?;
        let r = async {
            let vm: VmId = id("id", &req.get_ref().id)?;
            note_resource(&req, "vm", vm);
            let body = convert::backup_policy_request(req.get_ref());
            let (vm, parts, warnings) = self.0.app.vm_enable_backups(&p, vm, &body).await?;
            Ok(pb::UpdateVmResponse {
                vm: Some(convert::vm(views::vm(&vm, &parts))),
                warnings: convert::warnings(&warnings),
            })
        };
        answer(r.await)
    }

    async fn disable_backups(
        &self,
        req: Request<pb::DisableBackupsRequest>,
    ) -> Result<Response<pb::Vm>, Status> {
        let p = principal(&req)?;
        let r = async {
            let vm: VmId = id("id", &req.get_ref().id)?;
            note_resource(&req, "vm", vm);
            let (vm, parts) = self.0.app.vm_disable_backups(&p, vm).await?;
            Ok(convert::vm(views::vm(&vm, &parts)))
        };
        answer(r.await)
    }

    async fn backup(
        &self,
        req: Request<pb::BackupRequest>,
    ) -> Result<Response<pb::CreateBackupResponse>, Status> {
        let p = principal(&req)?;
        let r = async {
            let vm = id("vm", &req.get_ref().vm)?;
            let body = convert::backup_create(req.get_ref());
            let c = self.0.app.vm_backup(&p, vm, &body).await?;
            note_resource(&req, "backup", c.backup.id);
            note_action(&req, &c.action);
            Ok(pb::CreateBackupResponse {
                backup: Some(convert::backup(views::backup(&c.backup))),
                action: Some(convert::action(views::action(&c.action))),
                warnings: convert::warnings(&c.warnings),
            })
        };
        answer(r.await)
    }

    async fn restore(
        &self,
        req: Request<pb::RestoreRequest>,
    ) -> Result<Response<pb::RestoreResponse>, Status> {
        let p = principal(&req)?;
        let r = async {
            let vm: VmId = id("id", &req.get_ref().id)?;
            note_resource(&req, "vm", vm);
            let body = convert::restore(req.get_ref());
            let r = self.0.app.vm_restore(&p, vm, &body).await?;
            // The VM written to: a restore into a new VM made it.
            note_resource(&req, "vm", r.vm.id);
            note_action(&req, &r.action);
            Ok(pb::RestoreResponse {
                vm: Some(convert::vm(views::vm(&r.vm, &r.parts))),
                action: Some(convert::action(views::action(&r.action))),
                warnings: convert::warnings(&r.warnings),
            })
        };
        answer(r.await)
    }

    async fn list_backups(
        &self,
        req: Request<pb::ListBackupsRequest>,
    ) -> Result<Response<pb::ListBackupsResponse>, Status> {
        let p = principal(&req)?;
        let r = async {
            let q = BackupQuery::parse(&convert::backup_list_query(req.get_ref()))?;
            let backups = self.0.app.backup_list(&p, &q).await?;
            Ok(pb::ListBackupsResponse {
                backups: backups
                    .items
                    .iter()
                    .map(|b| convert::backup(views::backup(b)))
                    .collect(),
                pagination: Some(convert::pagination(backups.pagination())),
            })
        };
        answer(r.await)
    }

    async fn get_backup(
        &self,
        req: Request<pb::GetBackupRequest>,
    ) -> Result<Response<pb::Backup>, Status> {
        let p = principal(&req)?;
        let r = async {
            let b = self
                .0
                .app
                .backup_get(&p, id("id", &req.get_ref().id)?)
                .await?;
            Ok(convert::backup(views::backup(&b)))
        };
        answer(r.await)
    }

    async fn update_backup(
        &self,
        req: Request<pb::UpdateBackupRequest>,
    ) -> Result<Response<pb::BackupResponse>, Status> {
        let p = principal(&req)?;
        let r = async {
            let backup_id = id("id", &req.get_ref().id)?;
            note_resource(&req, "backup", backup_id);
            let body = convert::name_labels(&req.get_ref().name, &req.get_ref().labels);
            let (b, warnings) = self.0.app.backup_update(&p, backup_id, &body).await?;
            Ok(pb::BackupResponse {
                backup: Some(convert::backup(views::backup(&b))),
                warnings: convert::warnings(&warnings),
            })
        };
        answer(r.await)
    }

    async fn delete_backup(
        &self,
        req: Request<pb::DeleteBackupRequest>,
    ) -> Result<Response<pb::Action>, Status> {
        action_on(&req, "backup", &req.get_ref().id, |p, id| async move {
            self.0.app.backup_delete(&p, id).await
        })
        .await
    }

    async fn list_backup_actions(
        &self,
        req: Request<pb::ResourceActionsRequest>,
    ) -> Result<Response<pb::ResourceActionsResponse>, Status> {
        self.resource_actions(&req, meson_core::action::ResourceType::Backup)
            .await
    }
}
