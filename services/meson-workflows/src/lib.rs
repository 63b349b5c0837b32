//! meson's provisioning workflows, one file each, and what they share.

pub mod atomos;
pub mod auto_repair;
pub mod auto_upgrade;
pub mod backup;
pub mod cluster_create;
pub mod cluster_delete;
pub mod cluster_rotate_credentials;
pub mod cluster_upgrade;
pub mod drift;
pub mod image_create;
pub mod image_delete;
pub mod keys;
pub mod network_delete;
pub mod node_pool_create;
pub mod node_pool_delete;
pub mod node_pool_scale;
pub mod node_pools;
pub mod node_reboot;
pub mod node_replace;
pub mod nodes;
pub mod orphans;
pub mod placement;
pub mod port_forward;
pub mod provision;
pub mod reconcile;
pub mod rolling;
pub mod vm_create;
pub mod vm_delete;
pub mod vm_migrate;
pub mod vm_network;
pub mod vm_power;
pub mod vm_rebuild;
pub mod vm_resize;
pub mod vm_restore;
pub mod volume_attach;
pub mod volume_create;
pub mod volume_delete;
pub mod volume_move;
pub mod volume_resize;

use meson_db::PgPool;
use std::sync::Arc;
use std::time::Duration;

pub use atomos::Atomos;
pub use meson_placement::cluster as cluster_placement;

/// Tunables of the workflows.
#[derive(Clone, Debug)]
pub struct WorkflowConfig {
    /// How long a VM may take from `register` to running with an IPv4.
    pub vm_boot_timeout: Duration,
    /// How often AtomOS is polled while waiting.
    pub poll_interval: Duration,
    /// How long a node may take from booting to phoning home (kubelet up).
    pub node_ready_timeout: Duration,
    /// The base URL guests reach meson's API at (their phone-home calls).
    pub public_url: String,
    /// Seals cluster secrets at rest.
    pub secrets_key: meson_kaas::SecretKey,
    /// Node auto-repair's thresholds.
    pub repair: auto_repair::RepairConfig,
    /// The most backups the schedule has in progress on one host at once.
    pub backups_per_host: u32,
    /// The default quotas (a tenant's overrides apply over them): automatic
    /// backups are refused over `images_gb` as a request's would be.
    pub quotas: meson_core::quota::Resources,
}

impl Default for WorkflowConfig {
    /// Defaults for tests and dev: a fresh random secrets key (so nothing it
    /// sealed outlives the process) and a loopback public URL.
    fn default() -> Self {
        WorkflowConfig {
            vm_boot_timeout: Duration::from_secs(600),
            poll_interval: Duration::from_secs(2),
            node_ready_timeout: Duration::from_secs(600),
            public_url: "http://127.0.0.1:8080".to_owned(),
            secrets_key: meson_kaas::SecretKey::generate(),
            repair: auto_repair::RepairConfig::default(),
            backups_per_host: 2,
            quotas: meson_core::quota::Resources::DEFAULT_QUOTAS,
        }
    }
}

/// What every workflow step can reach: the database and AtomOS.
pub struct Env {
    pub pool: PgPool,
    pub atomos: Atomos,
    pub config: WorkflowConfig,
}

/// Registers every workflow with a worker.
pub fn register_all(worker: meson_jobs::Worker, env: Arc<Env>) -> meson_jobs::Worker {
    worker
        .register(vm_create::VmCreate(env.clone()))
        .register(vm_delete::VmDelete(env.clone()))
        .register(image_create::ImageCreate(env.clone()))
        .register(image_delete::ImageDelete(env.clone()))
        .register(network_delete::NetworkDelete(env.clone()))
        .register(cluster_create::ClusterCreate(env.clone()))
        .register(cluster_delete::ClusterDelete(env.clone()))
        .register(cluster_upgrade::ClusterUpgrade(env.clone()))
        .register(cluster_rotate_credentials::ClusterRotateCredentials(
            env.clone(),
        ))
        .register(node_replace::NodeReplace(env.clone()))
        .register(node_reboot::NodeReboot(env.clone()))
        .register(node_pool_create::NodePoolCreate(env.clone()))
        .register(node_pool_scale::NodePoolScale(env.clone()))
        .register(node_pool_delete::NodePoolDelete(env.clone()))
        .register(vm_power::VmPower::<vm_power::PowerOn>::new(env.clone()))
        .register(vm_power::VmPower::<vm_power::PowerOff>::new(env.clone()))
        .register(vm_power::VmPower::<vm_power::Reboot>::new(env.clone()))
        .register(vm_resize::VmResize(env.clone()))
        .register(vm_rebuild::VmRebuild(env.clone()))
        .register(vm_migrate::VmMigrate(env.clone()))
        .register(vm_network::VmAttachNetwork(env.clone()))
        .register(vm_network::VmDetachNetwork(env.clone()))
        .register(port_forward::PortForwardCreate(env.clone()))
        .register(port_forward::PortForwardDelete(env.clone()))
        .register(backup::BackupCreate(env.clone()))
        .register(backup::BackupDelete(env.clone()))
        .register(vm_restore::VmRestore(env.clone()))
        .register(volume_create::VolumeCreate(env.clone()))
        .register(volume_delete::VolumeDelete(env.clone()))
        .register(volume_attach::VolumeAttach(env.clone()))
        .register(volume_attach::VolumeDetach(env.clone()))
        .register(volume_move::VolumeMove(env.clone()))
        .register(volume_resize::VolumeResize(env))
}

meson_jobs::steps! {
    /// The steps of deleting a standalone resource (a network, a volume):
    /// destroy it on AtomOS, then forget its row.
    pub enum DeleteStep {
        Destroy = "destroy",
        Forget = "forget",
    }
}

/// The undo of a forward-only workflow (a delete, a power operation): a
/// half-done one is reported, not reversed.
pub fn forward_only() -> meson_jobs::StepResult<()> {
    Ok(())
}

/// Ends a cluster workflow's failure: the cluster is `error`, with `reason`.
pub async fn cluster_failed(
    env: &Env,
    cluster: meson_core::ClusterId,
    reason: &str,
) -> meson_jobs::StepResult<()> {
    meson_db::clusters::set_status(
        &env.pool,
        cluster,
        meson_core::cluster::ClusterStatus::Error,
        Some(reason),
    )
    .await?;
    Ok(())
}

/// Enqueues workflow `W` on `action` in the caller's transaction, holding
/// concurrency key `key` (from [`keys`]): the shape of every day-two
/// action's enqueue.
pub async fn enqueue_keyed<W: meson_jobs::Workflow>(
    tx: &mut meson_db::Tx<'_>,
    params: &W::Params,
    key: String,
    action: meson_core::ActionId,
    tenant: &meson_core::TenantId,
) -> Result<meson_jobs::Enqueued, meson_core::Error> {
    meson_jobs::enqueue::<W>(
        tx,
        params,
        meson_jobs::EnqueueOpts {
            action: Some(action),
            tenant: Some(tenant.to_string()),
            concurrency_key: Some(key),
            ..meson_jobs::EnqueueOpts::default()
        },
    )
    .await
}

/// Parameters of every VM workflow.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct VmParams {
    pub vm_id: meson_core::VmId,
}

/// Enqueues a workflow on one VM in the caller's transaction, serialized with
/// every other mutation of that VM.
pub async fn enqueue_for_vm<W: meson_jobs::Workflow<Params = VmParams>>(
    tx: &mut meson_db::Tx<'_>,
    vm: meson_core::VmId,
    action: meson_core::ActionId,
    tenant: &meson_core::TenantId,
    max_attempts: i32,
) -> Result<meson_jobs::Enqueued, meson_core::Error> {
    meson_db::jobs::enqueue(tx, &job_for_vm::<W>(vm, action, tenant, max_attempts)?).await
}

/// The job [`enqueue_for_vm`] inserts.
pub fn job_for_vm<W: meson_jobs::Workflow<Params = VmParams>>(
    vm: meson_core::VmId,
    action: meson_core::ActionId,
    tenant: &meson_core::TenantId,
    max_attempts: i32,
) -> Result<meson_db::jobs::NewJob, meson_core::Error> {
    meson_jobs::job::<W>(
        &VmParams { vm_id: vm },
        meson_jobs::EnqueueOpts {
            action: Some(action),
            tenant: Some(tenant.to_string()),
            concurrency_key: Some(crate::keys::vm(vm)),
            max_attempts,
            ..meson_jobs::EnqueueOpts::default()
        },
    )
}
