//! Fault injection for one host: failed, slow, hung and randomly failing requests, a host that is down, crashed and lost VMs, a full host.

use crate::state::{HostState, Power, lock};
use crate::store::Store;
use serde::{Deserialize, Deserializer, Serialize};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

/// Route name matching every route in [`Faults::fail_next`], [`Faults::hang`]
/// and [`Faults::set_error_rate`]; a route's own entry wins over it.
pub const ANY_ROUTE: &str = "*";

/// Longest latency the control endpoint and hosts files accept.
const MAX_LATENCY: Duration = Duration::from_secs(600);

/// Faults of one host. Routes are labelled like the driver's errors:
/// `vm/register`, `vm/status`, `volume/create`, `volume/cloudinit/metadata`,
/// `network/list`, `network/portforward` (create and delete alike),
/// `network/portforwards`, `vm/backup`, `vm/backup/restore`, `vm/backups`
/// (list and delete alike), `vm/backups/search`, `authenticate/login`, or
/// [`ANY_ROUTE`].
pub struct Faults {
    /// Mixes the host's name into every random draw.
    host_key: u64,
    state: Arc<Mutex<HostState>>,
    /// Where crashed and lost VMs are written through, if anywhere.
    store: Option<Arc<Store>>,
    plan: Mutex<Plan>,
    full: AtomicBool,
    /// `true` while the host's daemons refuse connections.
    down: watch::Sender<bool>,
    /// Bumped when VMs crash or are lost: port forwards close their
    /// connections to them ([`crate::forward`]).
    guests_changed: watch::Sender<()>,
}

#[derive(Default)]
struct Plan {
    /// route -> (status, requests left to fail)
    fail: HashMap<String, (u16, u32)>,
    /// route -> requests left to leave unanswered
    hang: HashMap<String, ((), u32)>,
    /// route -> (probability, status)
    rates: HashMap<String, (f64, u16)>,
    /// route -> draws made so far; the n-th draw of a route depends only on
    /// (seed, host, route, n), so concurrency elsewhere cannot shift it.
    draws: HashMap<String, u64>,
    seed: u64,
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
            .field("down", &self.is_down())
            .finish_non_exhaustive()
    }
}

fn route_key(route: &str) -> String {
    let key = route.trim_matches('/');
    if key.is_empty() {
        ANY_ROUTE.to_owned()
    } else {
        key.to_owned()
    }
}

/// FNV-1a: a stable hash (std's hasher may change between releases, which
/// would change what a seed reproduces).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

const GOLDEN_GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// SplitMix64's output function.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The `n`-th uniform draw in [0, 1) of one (seed, host, route) stream.
fn draw(seed: u64, host_key: u64, route: &str, n: u64) -> f64 {
    let stream = mix(seed ^ mix(host_key ^ fnv1a(route.as_bytes())));
    let x = mix(stream.wrapping_add(n.wrapping_add(1).wrapping_mul(GOLDEN_GAMMA)));
    // 53 random bits as a fraction.
    (x >> 11) as f64 / (1u64 << 53) as f64
}

fn clamp_rate(rate: f64) -> f64 {
    if rate.is_nan() {
        0.0
    } else {
        rate.clamp(0.0, 1.0)
    }
}

/// Takes one unit of a counted fault on `route` (its own entry, else `*`).
fn take<T: Copy>(map: &mut HashMap<String, (T, u32)>, route: &str) -> Option<T> {
    for key in [route, ANY_ROUTE] {
        if let Some((value, left)) = map.get_mut(key)
            && *left > 0
        {
            *left -= 1;
            return Some(*value);
        }
    }
    None
}

impl Faults {
    pub(crate) fn new(
        state: Arc<Mutex<HostState>>,
        host_name: &str,
        store: Option<Arc<Store>>,
        guests_changed: watch::Sender<()>,
    ) -> Self {
        Faults {
            host_key: fnv1a(host_name.as_bytes()),
            state,
            store,
            plan: Mutex::new(Plan::default()),
            full: AtomicBool::new(false),
            down: watch::channel(false).0,
            guests_changed,
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
        lock(&self.plan).hang.insert(route_key(route), ((), count));
    }

    /// Each request to `route` fails with 503 with probability `rate`
    /// (clamped to 0..=1; 0 removes the fault). Draws are reproducible: see
    /// [`Faults::set_seed`].
    pub fn set_error_rate(&self, route: &str, rate: f64) {
        self.set_error_rate_status(route, rate, 503);
    }

    /// [`Faults::set_error_rate`] answering `status` instead of 503.
    pub fn set_error_rate_status(&self, route: &str, rate: f64, status: u16) {
        let key = route_key(route);
        let rate = clamp_rate(rate);
        let mut plan = lock(&self.plan);
        if key == ANY_ROUTE {
            plan.draws.clear();
        } else {
            plan.draws.remove(&key);
        }
        if rate == 0.0 {
            plan.rates.remove(&key);
        } else {
            plan.rates.insert(key, (rate, status));
        }
    }

    /// Seeds the random draws of error rates and restarts every route's
    /// sequence: the same seed, host name and sequence of requests per route
    /// give the same failures. The default seed is 0.
    pub fn set_seed(&self, seed: u64) {
        let mut plan = lock(&self.plan);
        plan.seed = seed;
        plan.draws.clear();
    }

    pub fn seed(&self) -> u64 {
        lock(&self.plan).seed
    }

    /// Takes the host down (its four daemons close their listeners and drop
    /// every open connection, so clients see connection refused) or brings
    /// it back on the same ports. Takes effect asynchronously within
    /// milliseconds; [`crate::SimHost::take_down`] and
    /// [`crate::SimHost::bring_up`] wait for it. VMs keep running meanwhile.
    pub fn set_down(&self, down: bool) {
        self.down
            .send_if_modified(|d| std::mem::replace(d, down) != down);
    }

    pub fn is_down(&self) -> bool {
        *self.down.borrow()
    }

    pub(crate) fn down_watch(&self) -> watch::Receiver<bool> {
        self.down.subscribe()
    }

    /// The VM named `name` (or with that id) crashes: it is shut off
    /// unexpectedly, keeps its resources and volumes, and can be started
    /// again. Returns whether such a VM existed. With a state directory the
    /// crash is on disk when this returns (a blocking write).
    pub fn crash_vm(&self, name: &str) -> bool {
        let found = crash(&mut lock(&self.state), name);
        self.guests_changed.send_replace(());
        self.save_blocking();
        found
    }

    /// The VM named `name` (or with that id) vanishes, as if the host lost
    /// it: gone from `/status`, its resources freed, its volumes detached but
    /// kept. Returns whether such a VM existed. With a state directory the
    /// loss is on disk when this returns (a blocking write).
    pub fn lose_vm(&self, name: &str) -> bool {
        let found = lose(&mut lock(&self.state), name);
        self.guests_changed.send_replace(());
        self.save_blocking();
        found
    }

    fn save_blocking(&self) {
        if let Some(store) = &self.store
            && let Err(e) = store.save()
        {
            tracing::error!(error = %e, "the simulator's state could not be saved");
        }
    }

    /// A full host refuses canallocate/cancreate and every allocation.
    pub fn fill_host(&self, full: bool) {
        self.full.store(full, Ordering::SeqCst);
    }

    pub fn is_full(&self) -> bool {
        self.full.load(Ordering::SeqCst)
    }

    /// Removes every injected fault and brings the host up (crashed VMs stay
    /// off, lost VMs stay lost, the seed stays).
    pub fn clear(&self) {
        let mut plan = lock(&self.plan);
        let seed = plan.seed;
        *plan = Plan {
            seed,
            ..Plan::default()
        };
        drop(plan);
        self.fill_host(false);
        self.set_down(false);
    }

    /// Applies every part of `spec`, or nothing when it is invalid or names
    /// a VM that does not exist.
    pub fn apply(&self, spec: &FaultSpec) -> Result<(), FaultError> {
        spec.validate().map_err(FaultError::Invalid)?;
        {
            let mut state = lock(&self.state);
            let missing: Vec<&String> = spec
                .crash_vm
                .iter()
                .chain(&spec.lose_vm)
                .filter(|n| !state.vms.iter().any(|vm| vm.name == **n || vm.id == **n))
                .collect();
            if !missing.is_empty() {
                return Err(FaultError::NoSuchVm(missing.into_iter().cloned().collect()));
            }
            for name in &spec.crash_vm {
                crash(&mut state, name);
            }
            for name in &spec.lose_vm {
                lose(&mut state, name);
            }
        }
        if !(spec.crash_vm.is_empty() && spec.lose_vm.is_empty()) {
            self.guests_changed.send_replace(());
        }
        {
            let mut plan = lock(&self.plan);
            for f in &spec.fail_next {
                plan.fail.insert(route_key(&f.route), (f.status, f.count));
            }
            for h in &spec.hang {
                plan.hang.insert(route_key(&h.route), ((), h.count));
            }
            if let Some(ms) = spec.latency_ms {
                plan.latency = Duration::from_millis(ms);
            }
            if let Some(seed) = spec.seed {
                plan.seed = seed;
                plan.draws.clear();
            }
        }
        for r in &spec.error_rates {
            self.set_error_rate_status(&r.route, r.rate, r.status);
        }
        if let Some(full) = spec.full {
            self.fill_host(full);
        }
        if let Some(down) = spec.wants_down() {
            self.set_down(down);
        }
        Ok(())
    }

    /// The faults in force, in the control endpoint's form.
    pub fn snapshot(&self) -> FaultSpec {
        let plan = lock(&self.plan);
        let mut fail_next: Vec<FailNext> = plan
            .fail
            .iter()
            .filter(|(_, (_, left))| *left > 0)
            .map(|(route, (status, count))| FailNext {
                route: route.clone(),
                status: *status,
                count: *count,
            })
            .collect();
        fail_next.sort_by(|a, b| a.route.cmp(&b.route));
        let mut hang: Vec<HangNext> = plan
            .hang
            .iter()
            .filter(|(_, ((), left))| *left > 0)
            .map(|(route, ((), count))| HangNext {
                route: route.clone(),
                count: *count,
            })
            .collect();
        hang.sort_by(|a, b| a.route.cmp(&b.route));
        let mut error_rates: Vec<ErrorRate> = plan
            .rates
            .iter()
            .map(|(route, (rate, status))| ErrorRate {
                route: route.clone(),
                rate: *rate,
                status: *status,
            })
            .collect();
        error_rates.sort_by(|a, b| a.route.cmp(&b.route));
        FaultSpec {
            fail_next,
            error_rates,
            hang,
            latency_ms: Some(u64::try_from(plan.latency.as_millis()).unwrap_or(u64::MAX)),
            down: Some(self.is_down()),
            up: None,
            full: Some(self.is_full()),
            seed: Some(plan.seed),
            crash_vm: Vec::new(),
            lose_vm: Vec::new(),
        }
    }

    /// Decides the fate of one request and consumes one unit of its fault.
    pub(crate) fn verdict(&self, route: &str) -> (Duration, Verdict) {
        let mut plan = lock(&self.plan);
        let latency = plan.latency;
        if take(&mut plan.hang, route).is_some() {
            return (latency, Verdict::Hang);
        }
        if let Some(status) = take(&mut plan.fail, route) {
            return (latency, Verdict::Fail(status));
        }
        let rate = plan
            .rates
            .get(route)
            .or_else(|| plan.rates.get(ANY_ROUTE))
            .copied();
        if let Some((rate, status)) = rate {
            let seed = plan.seed;
            let n = plan.draws.entry(route.to_owned()).or_insert(0);
            let x = draw(seed, self.host_key, route, *n);
            *n += 1;
            if x < rate {
                return (latency, Verdict::Fail(status));
            }
        }
        (latency, Verdict::Serve)
    }
}

fn matches(vm: &crate::state::VmRec, name: &str) -> bool {
    vm.name == name || vm.id == name
}

fn crash(state: &mut HostState, name: &str) -> bool {
    match state.vms.iter_mut().find(|vm| matches(vm, name)) {
        Some(vm) => {
            if vm.power != Power::Off {
                vm.power = Power::Off;
                vm.crashed = true;
            }
            true
        }
        None => false,
    }
}

fn lose(state: &mut HostState, name: &str) -> bool {
    let before = state.vms.len();
    state.vms.retain(|vm| !matches(vm, name));
    state.vms.len() != before
}

/// Why [`Faults::apply`] refused a spec.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FaultError {
    #[error("{0}")]
    Invalid(String),
    #[error("no VM named {0:?}")]
    NoSuchVm(Vec<String>),
}

/// Faults to inject into one host: the body of the control endpoint's
/// `POST /faults/{host}` and the `faults` of a hosts-file entry. Every part
/// is optional; absent parts leave the current faults alone.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultSpec {
    /// The next `count` requests to `route` fail with `status`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fail_next: Vec<FailNext>,
    /// Requests to `route` fail with probability `rate`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub error_rates: Vec<ErrorRate>,
    /// The next `count` requests to `route` are never answered.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hang: Vec<HangNext>,
    /// Added to every request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<u64>,
    /// `true` takes the host down, `false` brings it up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub down: Option<bool>,
    /// `true` brings the host up (the same as `"down": false`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub up: Option<bool>,
    /// Capacity exhaustion: the host refuses every allocation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub full: Option<bool>,
    /// Seed of this host's error-rate draws.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// VMs (names or ids) that crash: shut off unexpectedly.
    #[serde(
        default,
        deserialize_with = "one_or_many",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub crash_vm: Vec<String>,
    /// VMs (names or ids) the host loses entirely.
    #[serde(
        default,
        deserialize_with = "one_or_many",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub lose_vm: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FailNext {
    pub route: String,
    #[serde(default = "default_status")]
    pub status: u16,
    #[serde(default = "default_count")]
    pub count: u32,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ErrorRate {
    pub route: String,
    /// Probability in 0..=1.
    pub rate: f64,
    #[serde(default = "default_status")]
    pub status: u16,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HangNext {
    pub route: String,
    #[serde(default = "default_count")]
    pub count: u32,
}

fn default_status() -> u16 {
    503
}

fn default_count() -> u32 {
    1
}

/// Accepts `"name"` as well as `["a", "b"]`.
fn one_or_many<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(match OneOrMany::deserialize(d)? {
        OneOrMany::One(s) => vec![s],
        OneOrMany::Many(v) => v,
    })
}

impl FaultSpec {
    pub fn is_empty(&self) -> bool {
        *self == FaultSpec::default()
    }

    /// `Some(true)` to take the host down, `Some(false)` to bring it up.
    fn wants_down(&self) -> Option<bool> {
        self.down.or(self.up.map(|up| !up))
    }

    /// Checks ranges and consistency; the message names the bad field.
    pub fn validate(&self) -> Result<(), String> {
        let route = |field: &str, r: &str| {
            if r.trim_matches('/').is_empty() && r != ANY_ROUTE {
                Err(format!(
                    "{field}: route must be a label like vm/register, or \"*\""
                ))
            } else {
                Ok(())
            }
        };
        let status = |field: &str, s: u16| {
            if (400..=599).contains(&s) {
                Ok(())
            } else {
                Err(format!(
                    "{field}: status {s} is not an HTTP error (400..=599)"
                ))
            }
        };
        for f in &self.fail_next {
            route("fail_next", &f.route)?;
            status("fail_next", f.status)?;
        }
        for r in &self.error_rates {
            route("error_rates", &r.route)?;
            status("error_rates", r.status)?;
            if !(0.0..=1.0).contains(&r.rate) {
                return Err(format!(
                    "error_rates: rate {} is not a probability (0..=1)",
                    r.rate
                ));
            }
        }
        for h in &self.hang {
            route("hang", &h.route)?;
        }
        if self
            .latency_ms
            .is_some_and(|ms| Duration::from_millis(ms) > MAX_LATENCY)
        {
            return Err(format!(
                "latency_ms must be at most {}",
                MAX_LATENCY.as_millis()
            ));
        }
        if let (Some(down), Some(up)) = (self.down, self.up)
            && down == up
        {
            return Err("down and up contradict each other".into());
        }
        for name in self.crash_vm.iter().chain(&self.lose_vm) {
            if name.is_empty() {
                return Err("crash_vm/lose_vm: VM names must not be empty".into());
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn faults() -> Faults {
        Faults::new(
            Arc::new(Mutex::new(HostState::default())),
            "h",
            None,
            watch::channel(()).0,
        )
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
    }

    #[test]
    fn wildcard_applies_after_the_route_itself() {
        let f = faults();
        f.fail_next("*", 502, 1);
        f.fail_next("vm/status", 500, 1);
        assert_eq!(f.verdict("vm/status").1, Verdict::Fail(500));
        assert_eq!(f.verdict("vm/status").1, Verdict::Fail(502));
        assert_eq!(f.verdict("network/list").1, Verdict::Serve);
    }

    #[test]
    fn clear_resets_everything_but_the_seed() {
        let f = faults();
        f.fail_next("vm/status", 500, 5);
        f.set_latency(Duration::from_millis(5));
        f.set_error_rate("*", 1.0);
        f.fill_host(true);
        f.set_down(true);
        f.set_seed(7);
        f.clear();
        assert_eq!(f.verdict("vm/status"), (Duration::ZERO, Verdict::Serve));
        assert!(!f.is_full());
        assert!(!f.is_down());
        assert_eq!(f.seed(), 7);
    }

    fn outcomes(f: &Faults, route: &str, n: usize) -> Vec<bool> {
        (0..n)
            .map(|_| f.verdict(route).1 != Verdict::Serve)
            .collect()
    }

    #[test]
    fn error_rates_are_reproducible_from_the_seed() {
        let a = faults();
        let b = faults();
        for f in [&a, &b] {
            f.set_seed(42);
            f.set_error_rate("vm/status", 0.3);
        }
        let run = outcomes(&a, "vm/status", 400);
        // Interleaved requests to other routes do not shift a route's draws.
        let mut other = Vec::new();
        for _ in 0..400 {
            other.push(b.verdict("vm/status").1 != Verdict::Serve);
            b.verdict("network/list");
        }
        assert_eq!(run, other);
        let failures = run.iter().filter(|x| **x).count();
        assert!((80..=160).contains(&failures), "{failures} of 400 at 0.3");
        // Re-seeding restarts the sequence; another seed gives another one.
        a.set_seed(42);
        assert_eq!(outcomes(&a, "vm/status", 400), run);
        a.set_seed(43);
        assert_ne!(outcomes(&a, "vm/status", 400), run);
        // Another host with the same seed draws differently.
        let c = Faults::new(
            Arc::new(Mutex::new(HostState::default())),
            "other",
            None,
            watch::channel(()).0,
        );
        c.set_seed(42);
        c.set_error_rate("vm/status", 0.3);
        assert_ne!(outcomes(&c, "vm/status", 400), run);
    }

    #[test]
    fn rates_clamp_and_zero_removes() {
        let f = faults();
        f.set_error_rate_status("vm/status", 7.0, 500);
        assert!(outcomes(&f, "vm/status", 20).iter().all(|x| *x));
        assert_eq!(f.verdict("vm/status").1, Verdict::Fail(500));
        f.set_error_rate("vm/status", f64::NAN);
        assert!(outcomes(&f, "vm/status", 20).iter().all(|x| !*x));
        assert!(f.snapshot().error_rates.is_empty());
    }

    #[test]
    fn specs_are_validated_before_anything_applies() {
        let f = faults();
        let bad: FaultSpec = serde_json::from_value(serde_json::json!({
            "fail_next": [{"route": "vm/status"}],
            "error_rates": [{"route": "vm/status", "rate": 1.5}]
        }))
        .unwrap();
        assert!(matches!(f.apply(&bad), Err(FaultError::Invalid(_))));
        assert_eq!(f.verdict("vm/status").1, Verdict::Serve);
        for body in [
            serde_json::json!({"fail_next": [{"route": "", "status": 503}]}),
            serde_json::json!({"fail_next": [{"route": "x", "status": 200}]}),
            serde_json::json!({"down": true, "up": true}),
            serde_json::json!({"latency_ms": 10_000_000}),
            serde_json::json!({"crash_vm": ""}),
        ] {
            let spec: FaultSpec = serde_json::from_value(body.clone()).unwrap();
            assert!(spec.validate().is_err(), "{body}");
        }
        let ghost: FaultSpec = serde_json::from_value(serde_json::json!({
            "crash_vm": "ghost", "full": true
        }))
        .unwrap();
        assert_eq!(
            f.apply(&ghost),
            Err(FaultError::NoSuchVm(vec!["ghost".into()]))
        );
        assert!(!f.is_full(), "nothing applied");
        let good: FaultSpec = serde_json::from_value(serde_json::json!({
            "fail_next": [{"route": "vm/status", "status": 502, "count": 2}],
            "hang": [{"route": "vm/register"}],
            "error_rates": [{"route": "*", "rate": 0.5, "status": 500}],
            "latency_ms": 3, "full": true, "down": true, "seed": 9
        }))
        .unwrap();
        f.apply(&good).unwrap();
        let snap = f.snapshot();
        assert_eq!(snap.fail_next[0].count, 2);
        assert_eq!(snap.hang[0].route, "vm/register");
        assert_eq!(snap.error_rates[0].rate, 0.5);
        assert_eq!(
            (snap.latency_ms, snap.full, snap.down, snap.seed),
            (Some(3), Some(true), Some(true), Some(9))
        );
        f.apply(&serde_json::from_value(serde_json::json!({"up": true})).unwrap())
            .unwrap();
        assert!(!f.is_down());
    }
}
