//! SSH keys: public keys the tenant keeps at meson.

use super::*;
use meson_types::ssh_key::{SshKey, SshKeyCreateRequest, SshKeyList, SshKeyResponse};

impl Client {
    /// `POST /v1/ssh-keys`: the key kept, with its fingerprint.
    pub async fn ssh_key_create(&self, req: &SshKeyCreateRequest) -> Result<SshKey> {
        let r: SshKeyResponse = self.call(Method::POST, "/v1/ssh-keys", Some(req)).await?;
        Ok(r.ssh_key)
    }

    /// A page of the tenant's keys that `filter` keeps (keys have no
    /// status).
    pub async fn ssh_key_list(&self, page: Page, filter: &ListFilter) -> Result<SshKeyList> {
        self.get(&list_path("/v1/ssh-keys", &page, &filter.query()))
            .await
    }

    /// Every key of the tenant that `filter` keeps, page after page.
    pub async fn ssh_key_list_all(&self, filter: &ListFilter) -> Result<Vec<SshKey>> {
        self.list_all("/v1/ssh-keys", &filter.query(), |l: SshKeyList| {
            (l.ssh_keys, l.meta)
        })
        .await
    }

    pub async fn ssh_key_get(&self, id: Uuid) -> Result<SshKey> {
        let r: SshKeyResponse = self.get(&format!("/v1/ssh-keys/{id}")).await?;
        Ok(r.ssh_key)
    }

    /// Renames and/or relabels a key.
    pub async fn ssh_key_update(&self, id: Uuid, req: &NameLabelsUpdate) -> Result<SshKey> {
        let r: SshKeyResponse = self
            .call(Method::PATCH, &format!("/v1/ssh-keys/{id}"), Some(req))
            .await?;
        Ok(r.ssh_key)
    }

    /// Forgets a key (VMs created with it keep it).
    pub async fn ssh_key_delete(&self, id: Uuid) -> Result<()> {
        let res = self
            .send(
                Method::DELETE,
                &format!("/v1/ssh-keys/{id}"),
                None::<&()>,
                false,
            )
            .await?;
        drop(res);
        Ok(())
    }
}
