//! Images: snapshot a VM's boot volume, import one from a URL, read, list,
//! rename/relabel and delete them.

use super::list::{ListQuery, Paged};
use super::{App, new_action};
use crate::auth::Principal;
use meson_core::action::{Action, Command, ResourceType};
use meson_core::image::{
    Image, ImageImport, ImageSnapshot, ImageSource, ImageStatus, MAX_IMAGE_NAME_LEN,
};
use meson_core::parse::Warning;
use meson_core::vm::VmStatus;
use meson_core::volume::{VolumeKind, VolumePlacement};
use meson_core::{Error, ImageId, Result, VmId};
use meson_workflows::{image_create, image_delete};

pub struct ImageCreated {
    pub image: Image,
    pub action: Action,
    pub warnings: Vec<Warning>,
}

impl App {
    pub async fn image_get(&self, p: &Principal, id: ImageId) -> Result<Image> {
        meson_db::images::get(&self.pool, &p.tenant, id).await
    }

    pub async fn image_list(&self, p: &Principal, q: &ListQuery) -> Result<Paged<Image>> {
        self.page(
            &p.tenant,
            &q.page,
            q.bound("images", &p.tenant)?,
            &q.filter(),
        )
        .await
    }

    /// Imports an image from a URL: validates the request and, in one
    /// transaction, writes the image, checks the `images_gb` quota, and
    /// writes the action and its `image_create` job.
    pub async fn image_import(
        &self,
        p: &Principal,
        body: &serde_json::Value,
    ) -> Result<ImageCreated> {
        let req = ImageImport::parse(body, &meson_db::targets::list(&self.pool).await?)?;
        let image = Image::new(
            &p.tenant,
            req.name,
            req.labels,
            ImageSource::Url {
                url: req.url,
                checksum: req.checksum,
            },
            req.size_gb,
            None,
        );
        let params = image_create::Params {
            image_id: image.id,
            boot_volume: None,
            provider: req.provider,
            continent: req.continent,
            region: req.region,
        };
        let action = self.create_image(p, &image, &params, None).await?;
        Ok(ImageCreated {
            image,
            action,
            warnings: req.warnings,
        })
    }

    /// Snapshots a VM's boot volume into a new image on the VM's host. The
    /// VM must be placed and `running` or `off`; no other action may run on
    /// it (`locked`), and none can start until the copy is made.
    pub async fn vm_create_image(
        &self,
        p: &Principal,
        vm_id: VmId,
        body: &serde_json::Value,
    ) -> Result<ImageCreated> {
        let req = ImageSnapshot::parse(body)?;
        let (vm, parts) = self.vm_get(p, vm_id).await?;
        let boot = parts
            .volumes
            .iter()
            .find(|v| v.vm_id == Some(vm.id) && v.kind == VolumeKind::Boot);
        let (Some(placement), Some(boot), VmStatus::Running | VmStatus::Off) =
            (&vm.placement, boot, vm.status)
        else {
            return Err(Error::Conflict {
                message: format!(
                    "the VM is {}: only a placed VM that is running or off can be imaged",
                    vm.status.as_str()
                ),
            });
        };
        let image = Image::new(
            &p.tenant,
            req.name,
            req.labels,
            ImageSource::Snapshot { vm: vm.id },
            boot.size_gb,
            Some(VolumePlacement {
                target_id: placement.target_id,
                host: placement.host.clone(),
                provider: placement.provider.clone(),
                region: placement.region.clone(),
            }),
        );
        let params = image_create::Params {
            image_id: image.id,
            boot_volume: Some(boot.id),
            provider: None,
            continent: None,
            region: None,
        };
        let action = self.create_image(p, &image, &params, Some(vm.id)).await?;
        Ok(ImageCreated {
            image,
            action,
            warnings: req.warnings,
        })
    }

    /// Writes a new image with its `create_image` action and job, within
    /// the tenant's quotas, in one transaction; a snapshot's VM is `locked`
    /// while another action runs on it.
    async fn create_image(
        &self,
        p: &Principal,
        image: &Image,
        params: &image_create::Params,
        vm: Option<VmId>,
    ) -> Result<Action> {
        let mut resources = vec![(ResourceType::Image, image.id.0)];
        resources.extend(vm.map(|vm| (ResourceType::Vm, vm.0)));
        let action = new_action(p, Command::CreateImage, resources);
        let mut tx = meson_db::begin(&self.pool).await?;
        let held = self.hold_usage(&mut tx, &p.tenant).await?;
        meson_db::images::insert(&mut tx, image).await?;
        self.within_quotas(&mut tx, &p.tenant, &held).await?;
        meson_db::actions::insert(&mut tx, &action).await?;
        let queued = image_create::enqueue(&mut tx, image, params, action.id, &p.tenant).await?;
        match vm {
            Some(vm) => queued.or_locked("vm", vm)?,
            None => queued.of_new("image")?,
        };
        meson_db::commit(tx).await?;
        tracing::info!(image = %image.id, action = %action.id, tenant = %p.tenant, "image create accepted");
        Ok(action)
    }

    /// Renames an image and/or replaces its labels.
    pub async fn image_update(
        &self,
        p: &Principal,
        id: ImageId,
        body: &serde_json::Value,
    ) -> Result<(Image, Vec<Warning>)> {
        let renamed = meson_db::images::RENAMED;
        let warnings = self
            .rename::<Image>(&p.tenant, id.0, body, MAX_IMAGE_NAME_LEN, renamed)
            .await?;
        Ok((self.image_get(p, id).await?, warnings))
    }

    /// Starts deleting an image; `locked` while it is being created (the
    /// create's action named) or deleted.
    pub async fn image_delete(&self, p: &Principal, id: ImageId) -> Result<Action> {
        let mut tx = meson_db::begin(&self.pool).await?;
        let image = meson_db::images::lock(&mut tx, &p.tenant, id).await?;
        // Its own create, or a VM's create copying it (which names it).
        let running = meson_db::images::running_action(&mut tx, id).await?;
        if image.status == ImageStatus::Creating
            || (image.status != ImageStatus::Deleting && running.is_some())
        {
            return Err(Error::Locked {
                kind: "image",
                id: id.to_string(),
                action_id: running.map(|a| a.0).unwrap_or_default(),
            });
        }
        let action = new_action(p, Command::DeleteImage, vec![(ResourceType::Image, id.0)]);
        meson_db::actions::insert(&mut tx, &action).await?;
        image_delete::enqueue(&mut tx, id, action.id, &p.tenant)
            .await?
            .or_locked("image", id)?;
        meson_db::images::set_status(&mut *tx, id, ImageStatus::Deleting, None).await?;
        meson_db::commit(tx).await?;
        tracing::info!(image = %id, action = %action.id, "image delete accepted");
        Ok(action)
    }
}
