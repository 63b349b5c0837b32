//! AtomOS as the workflows see it: one driver client per registered target,
//! the mapping of driver errors to step errors, and idempotent helpers.

use atomos_driver::{AtomosClient, ClientOptions, DriverError, ErrorKind};
use meson_core::Code;
use meson_core::TargetId;
use meson_core::target::Target;
use meson_db::PgPool;
use meson_jobs::StepError;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;
use tokio::time::Instant;

/// A host's list of one kind (its VMs, its volumes), as last asked for,
/// with when it was asked for.
type Listing<T> = Arc<tokio::sync::Mutex<Option<(Instant, Arc<Vec<T>>)>>>;

/// Each host's latest list of one kind. Callers at the same time share one
/// request: the first asks, the others wait for its answer; a host with
/// many VMs being made is listed once for all of them, not once each.
struct Listings<T> {
    // Short critical sections only; each listing's own lock is held while
    // it is asked for.
    hosts: Mutex<HashMap<TargetId, Listing<T>>>,
}

impl<T> Default for Listings<T> {
    fn default() -> Self {
        Listings {
            hosts: Mutex::new(HashMap::new()),
        }
    }
}

impl<T> Listings<T> {
    /// `target`'s list, from a request asked for no earlier than `since`
    /// (`list` asks for a new one).
    async fn since<F>(
        &self,
        target: TargetId,
        since: Instant,
        list: impl FnOnce() -> F,
    ) -> Result<Arc<Vec<T>>, DriverError>
    where
        F: std::future::Future<Output = Result<Vec<T>, DriverError>>,
    {
        let listing = match self.hosts.lock() {
            Ok(mut map) => map.entry(target).or_default().clone(),
            // A panic elsewhere: list on our own.
            Err(_) => Listing::default(),
        };
        let mut last = listing.lock().await;
        if let Some((asked, items)) = &*last
            && *asked >= since
        {
            return Ok(items.clone());
        }
        let asked = Instant::now();
        let items = Arc::new(list().await?);
        *last = Some((asked, items.clone()));
        Ok(items)
    }
}

/// Driver clients, one per target, built on first use from the database.
pub struct Atomos {
    pool: PgPool,
    options: ClientOptions,
    // Short critical sections only, never held across an await.
    clients: RwLock<HashMap<TargetId, AtomosClient>>,
    vms: Listings<atomos_driver::Vm>,
    volumes: Listings<atomos_driver::Volume>,
    /// Where the poll ticks of [`Atomos::next_tick`] count from.
    epoch: Instant,
}

impl Atomos {
    pub fn new(pool: PgPool, options: ClientOptions) -> Self {
        Atomos {
            pool,
            options,
            clients: RwLock::new(HashMap::new()),
            vms: Listings::default(),
            volumes: Listings::default(),
            epoch: Instant::now(),
        }
    }

    /// The VMs of `target` (whose client is `c`), as listed by a request
    /// asked for no earlier than `since`, shared with the callers asking at
    /// the same time: a host with many VMs booting is listed once per poll.
    pub async fn vms_since(
        &self,
        target: TargetId,
        c: &AtomosClient,
        since: Instant,
    ) -> Result<Arc<Vec<atomos_driver::Vm>>, DriverError> {
        self.vms.since(target, since, || c.vms()).await
    }

    /// The VM called `name` on `target`, from a listing asked for now or
    /// later (see [`Atomos::vms_since`]).
    pub async fn vm_by_name(
        &self,
        target: TargetId,
        c: &AtomosClient,
        name: &str,
    ) -> Result<Option<atomos_driver::Vm>, DriverError> {
        let vms = self.vms_since(target, c, Instant::now()).await?;
        Ok(vms.iter().find(|v| v.name == name).cloned())
    }

    /// The volume called `name` on `target` (whose client is `c`), from a
    /// listing asked for now or later, shared like [`Atomos::vms_since`]'s:
    /// the nodes of a cluster being made on one host each look their
    /// volumes up before making them.
    pub async fn volume_by_name(
        &self,
        target: TargetId,
        c: &AtomosClient,
        name: &str,
    ) -> Result<Option<atomos_driver::Volume>, StepError> {
        let volumes = self
            .volumes
            .since(target, Instant::now(), || c.volumes())
            .await
            .map_err(step_error)?;
        Ok(volumes.iter().find(|v| v.name == name).cloned())
    }

    /// The next multiple of `every` since this process's first client:
    /// waits that poll on these ticks poll together, and share listings.
    pub fn next_tick(&self, every: Duration) -> Instant {
        let every = every.max(Duration::from_millis(1));
        let ticks = self.epoch.elapsed().as_nanos() / every.as_nanos() + 1;
        let ticks = u32::try_from(ticks).unwrap_or(u32::MAX);
        self.epoch + every.saturating_mul(ticks)
    }

    fn build(&self, t: &Target) -> Result<AtomosClient, StepError> {
        let client = AtomosClient::new(meson_placement::driver_target(t), self.options.clone())
            .map_err(step_error)?;
        if let Ok(mut map) = self.clients.write() {
            map.insert(t.id, client.clone());
        }
        Ok(client)
    }

    /// Every enabled target with its client.
    pub async fn enabled(&self) -> Result<Vec<(Target, AtomosClient)>, StepError> {
        let targets = meson_db::targets::list(&self.pool).await?;
        let mut out = Vec::new();
        for t in targets.into_iter().filter(|t| t.enabled) {
            let cached = self.clients.read().ok().and_then(|m| m.get(&t.id).cloned());
            let client = match cached {
                // Rebuild when the target's endpoints changed in the database.
                Some(c) if c.target() == &meson_placement::driver_target(&t) => c,
                _ => self.build(&t)?,
            };
            out.push((t, client));
        }
        Ok(out)
    }

    /// The client of one target, enabled or not (a disabled target still
    /// needs its VMs deleted).
    pub async fn client(&self, id: TargetId) -> Result<AtomosClient, StepError> {
        if let Some(c) = self.clients.read().ok().and_then(|m| m.get(&id).cloned()) {
            return Ok(c);
        }
        let targets = meson_db::targets::list(&self.pool).await?;
        let t = targets
            .iter()
            .find(|t| t.id == id)
            .ok_or_else(|| StepError::internal(format!("AtomOS target {id} is not registered")))?;
        self.build(t)
    }
}

/// Maps a driver error to a step error: transient faults are retried,
/// the rest end the workflow with a message a user understands.
pub fn step_error(e: DriverError) -> StepError {
    tracing::warn!(error = %e, kind = ?e.kind, "AtomOS call failed");
    match e.kind {
        ErrorKind::Transient | ErrorKind::Auth => StepError::temporary(e.describe()),
        ErrorKind::Capacity => StepError::fatal(
            Code::ResourceUnavailable,
            format!("the hypervisor has no room left: {}", e.message),
        ),
        ErrorKind::NotFound => StepError::fatal(
            Code::NotFound,
            format!("the hypervisor lost track of a resource: {}", e.message),
        ),
        ErrorKind::Invalid => StepError::fatal(
            Code::InvalidInput,
            format!("the hypervisor rejected the request: {}", e.message),
        ),
        ErrorKind::AlreadyExists => StepError::fatal(
            Code::Conflict,
            format!("the hypervisor already has this resource: {}", e.message),
        ),
    }
}

/// Destroys a volume by id; "already gone" is success.
pub async fn destroy_volume(c: &AtomosClient, id: &str) -> Result<(), StepError> {
    match c.volume_destroy(id).await {
        Ok(()) => Ok(()),
        Err(e) if e.is_not_found() => Ok(()),
        // A volume still attached becomes free once the VM is gone: retry.
        Err(e) if e.kind == ErrorKind::Invalid || e.kind == ErrorKind::AlreadyExists => {
            tracing::warn!(error = %e, "volume not destroyable yet");
            Err(StepError::temporary("the volume is still in use"))
        }
        Err(e) => Err(step_error(e)),
    }
}

/// Destroys every volume whose name starts with `prefix`, plus the given ids.
pub async fn destroy_volumes(
    c: &AtomosClient,
    prefix: &str,
    ids: &[String],
) -> Result<(), StepError> {
    let listed = c.volumes().await.map_err(step_error)?;
    let mut doomed: Vec<String> = listed
        .into_iter()
        .filter(|v| v.name.starts_with(prefix))
        .map(|v| v.id)
        .collect();
    for id in ids {
        if !doomed.contains(id) {
            doomed.push(id.clone());
        }
    }
    for id in doomed {
        destroy_volume(c, &id).await?;
    }
    Ok(())
}

/// Unregisters the VM called `name`, if AtomOS still has it.
pub async fn unregister_by_name(c: &AtomosClient, name: &str) -> Result<(), StepError> {
    let Some(vm) = c.vm_by_name(name).await.map_err(step_error)? else {
        return Ok(());
    };
    match c.unregister(&vm.id).await {
        Ok(()) => Ok(()),
        Err(e) if e.is_not_found() => Ok(()),
        Err(e) => Err(step_error(e)),
    }
}
