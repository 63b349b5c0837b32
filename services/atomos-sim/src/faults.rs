//! Fault injection for one host: failed, slow and hung requests, lost VMs, a full host.

use crate::host::{HostState, lock};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Faults of one host. Routes are labelled like the driver's errors:
/// `vm/register`, `vm/status`, `volume/create`, `volume/cloudinit/metadata`,
/// `network/list`, `authenticate/login`.
pub struct Faults {
    state: Arc<Mutex<HostState>>,
    plan: Mutex<Plan>,
    full: AtomicBool,
}

#[derive(Default)]
struct Plan {
    /// route -> (status, requests left to fail)
    fail: HashMap<String, (u16, u32)>,
    /// route -> requests left to leave unanswered
    hang: HashMap<String, u32>,
    latency: Duration,
}

/// What the request gate does with one request.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    Serve,
    Fail(u16),
    Hang,
}

impl std::fmt::Debug for Faults {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Faults")
            .field("full", &self.is_full())
            .finish_non_exhaustive()
    }
}

fn route_key(route: &str) -> String {
    route.trim_matches('/').to_owned()
}

impl Faults {
    pub(crate) fn new(state: Arc<Mutex<HostState>>) -> Self {
        Faults {
            state,
            plan: Mutex::new(Plan::default()),
            full: AtomicBool::new(false),
        }
    }

    /// The next `count` requests to `route` answer `status` with a `detail`.
    pub fn fail_next(&self, route: &str, status: u16, count: u32) {
        lock(&self.plan)
            .fail
            .insert(route_key(route), (status, count));
    }

    /// Every request waits this long before being handled.
    pub fn set_latency(&self, latency: Duration) {
        lock(&self.plan).latency = latency;
    }

    /// The next `count` requests to `route` are never answered (the client
    /// times out; the connection is dropped when it gives up).
    pub fn hang(&self, route: &str, count: u32) {
        lock(&self.plan).hang.insert(route_key(route), count);
    }

    /// The VM named `name` vanishes, as if the host lost it: gone from
    /// `/status`, its resources freed, its volumes detached but kept.
    /// Returns whether such a VM existed.
    pub fn lose_vm(&self, name: &str) -> bool {
        let mut state = lock(&self.state);
        let before = state.vms.len();
        state.vms.retain(|vm| vm.name != name);
        state.vms.len() != before
    }

    /// A full host refuses canallocate/cancreate and every allocation.
    pub fn fill_host(&self, full: bool) {
        self.full.store(full, Ordering::SeqCst);
    }

    pub fn is_full(&self) -> bool {
        self.full.load(Ordering::SeqCst)
    }

    /// Removes every injected fault (lost VMs stay lost).
    pub fn clear(&self) {
        *lock(&self.plan) = Plan::default();
        self.fill_host(false);
    }

    /// Decides the fate of one request and consumes one unit of its fault.
    pub(crate) fn verdict(&self, route: &str) -> (Duration, Verdict) {
        let mut plan = lock(&self.plan);
        let latency = plan.latency;
        if let Some(left) = plan.hang.get_mut(route)
            && *left > 0
        {
            *left -= 1;
            return (latency, Verdict::Hang);
        }
        if let Some((status, left)) = plan.fail.get_mut(route)
            && *left > 0
        {
            *left -= 1;
            return (latency, Verdict::Fail(*status));
        }
        (latency, Verdict::Serve)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn faults() -> Faults {
        Faults::new(Arc::new(Mutex::new(HostState::default())))
    }

    #[test]
    fn faults_are_counted_per_route() {
        let f = faults();
        f.fail_next("/vm/register", 503, 2);
        f.hang("vm/status", 1);
        assert_eq!(f.verdict("vm/register").1, Verdict::Fail(503));
        assert_eq!(f.verdict("vm/status").1, Verdict::Hang);
        assert_eq!(f.verdict("vm/status").1, Verdict::Serve);
        assert_eq!(f.verdict("vm/register").1, Verdict::Fail(503));
        assert_eq!(f.verdict("vm/register").1, Verdict::Serve);
        assert_eq!(f.verdict("volume/create").1, Verdict::Serve);
    }

    #[test]
    fn clear_resets_everything() {
        let f = faults();
        f.fail_next("vm/status", 500, 5);
        f.set_latency(Duration::from_millis(5));
        f.fill_host(true);
        f.clear();
        assert_eq!(f.verdict("vm/status"), (Duration::ZERO, Verdict::Serve));
        assert!(!f.is_full());
    }
}
