//! Backups: a VM's backup policy, backups taken now or by the policy, and
//! restores into the same VM or a new one.

use super::*;
use meson_types::backup::{
    Backup, BackupCreateRequest, BackupCreateResponse, BackupList, BackupPolicyRequest,
    BackupResponse, RestoreRequest, RestoreResponse,
};

impl Client {
    /// `POST /v1/vms/{id}/actions/enable-backups`: the VM, its `backups`
    /// policy set (a daily backup in its window, the newest `keep` kept).
    pub async fn vm_enable_backups(&self, vm: Uuid, req: &BackupPolicyRequest) -> Result<wire::Vm> {
        let r: wire::VmResponse = self
            .call(
                Method::POST,
                &format!("/v1/vms/{vm}/actions/enable-backups"),
                Some(req),
            )
            .await?;
        Ok(r.vm)
    }

    /// `POST /v1/vms/{id}/actions/disable-backups`: the VM, without a
    /// policy (its automatic backups then expire).
    pub async fn vm_disable_backups(&self, vm: Uuid) -> Result<wire::Vm> {
        let r: wire::VmResponse = self
            .call(
                Method::POST,
                &format!("/v1/vms/{vm}/actions/disable-backups"),
                Some(&serde_json::json!({})),
            )
            .await?;
        Ok(r.vm)
    }

    /// `POST /v1/vms/{id}/actions/backup`: a backup taken now (`creating`)
    /// and its action.
    pub async fn vm_backup(
        &self,
        vm: Uuid,
        req: &BackupCreateRequest,
    ) -> Result<BackupCreateResponse> {
        self.call(
            Method::POST,
            &format!("/v1/vms/{vm}/actions/backup"),
            Some(req),
        )
        .await
    }

    /// `POST /v1/vms/{id}/actions/restore`: the VM written to (this one,
    /// or the new one) and the restore's action.
    pub async fn vm_restore(&self, vm: Uuid, req: &RestoreRequest) -> Result<RestoreResponse> {
        self.call(
            Method::POST,
            &format!("/v1/vms/{vm}/actions/restore"),
            Some(req),
        )
        .await
    }

    /// A page of the tenant's backups that `filter` keeps, of VM `vm` only
    /// when given.
    pub async fn backup_list(
        &self,
        page: Page,
        vm: Option<Uuid>,
        filter: &ListFilter,
    ) -> Result<BackupList> {
        self.get(&list_path("/v1/backups", &page, &backup_query(vm, filter)))
            .await
    }

    /// Every backup of the tenant that `filter` keeps (of VM `vm` only when
    /// given), page after page.
    pub async fn backup_list_all(
        &self,
        vm: Option<Uuid>,
        filter: &ListFilter,
    ) -> Result<Vec<Backup>> {
        self.list_all("/v1/backups", &backup_query(vm, filter), |l: BackupList| {
            (l.backups, l.meta)
        })
        .await
    }

    pub async fn backup_get(&self, id: Uuid) -> Result<Backup> {
        let r: BackupResponse = self.get(&format!("/v1/backups/{id}")).await?;
        Ok(r.backup)
    }

    /// Renames and/or relabels a backup.
    pub async fn backup_update(&self, id: Uuid, req: &NameLabelsUpdate) -> Result<Backup> {
        let r: BackupResponse = self
            .call(Method::PATCH, &format!("/v1/backups/{id}"), Some(req))
            .await?;
        Ok(r.backup)
    }

    /// Starts deleting a backup (`locked` while it is being made, or a
    /// restore reads it).
    pub async fn backup_delete(&self, id: Uuid) -> Result<wire::Action> {
        let r: wire::ActionResponse = self
            .call(Method::DELETE, &format!("/v1/backups/{id}"), None::<&()>)
            .await?;
        Ok(r.action)
    }
}

fn backup_query(vm: Option<Uuid>, filter: &ListFilter) -> Vec<(&'static str, String)> {
    let mut q = filter.query();
    if let Some(vm) = vm {
        q.push(("vm", vm.to_string()));
    }
    q
}
