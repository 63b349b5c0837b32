//! Volumes: read one, or list them.

use super::{App, Page};
use crate::auth::Principal;
use meson_core::volume::{Volume, VolumeKind};
use meson_core::{Result, VmId, VolumeId};

impl App {
    pub async fn volume_get(&self, p: &Principal, id: VolumeId) -> Result<Volume> {
        meson_db::volumes::get(&self.pool, &p.tenant, id).await
    }

    pub async fn volume_list(
        &self,
        p: &Principal,
        page: Page,
        vm: Option<VmId>,
        kind: Option<VolumeKind>,
    ) -> Result<(Vec<Volume>, u64)> {
        let (v, total) = meson_db::volumes::list(
            &self.pool,
            &p.tenant,
            vm,
            kind,
            i64::from(page.per_page),
            page.offset(),
        )
        .await?;
        Ok((v, total.max(0) as u64))
    }
}
