//! The guest side of cloud-init's `phone_home`: once a VM first runs, POST its form to the URL from its user-data.

use crate::host::SimHost;
use crate::state::PhoneHome;
use std::time::{Duration, Instant};

/// Per attempt; a phone-home target is a small HTTP endpoint.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(2);
/// Pause after the first failed attempt, doubled up to [`MAX_PAUSE`]
/// (cloud-init waits 3 s; a simulator need not).
const FIRST_PAUSE: Duration = Duration::from_millis(50);
const MAX_PAUSE: Duration = Duration::from_secs(1);

/// What the watcher does next.
enum Step {
    /// The VM is gone or has nothing (left) to call.
    Done,
    /// Off: wait for a start. On: wait this long for the boot to finish.
    Wait(Option<Duration>),
    Call {
        vm_name: String,
        call: PhoneHome,
    },
}

fn step(host: &SimHost, vm_id: &str, now: Instant) -> Step {
    if host.is_halted() {
        return Step::Done;
    }
    let boot = host.boot_time();
    let state = host.state();
    let Some(vm) = state.vms.iter().find(|vm| vm.id == vm_id) else {
        return Step::Done;
    };
    let Some(call) = &vm.phone_home else {
        return Step::Done;
    };
    match vm.power.boot_left(now, boot) {
        None => Step::Wait(None),
        Some(left) if !left.is_zero() => Step::Wait(Some(left)),
        // The call stays pending (and in the state file) until it is over:
        // a simulator stopped meanwhile makes it again when started on the
        // same state. Only this task makes it.
        Some(_) => Step::Call {
            vm_name: vm.name.clone(),
            call: call.clone(),
        },
    }
}

/// Watches VM `vm_id` of `host` in the background and phones home when it
/// first runs. The task holds no strong reference to the host while it
/// waits, and ends when the VM goes away or the host is dropped.
pub(crate) fn watch(host: &SimHost, vm_id: String) {
    let weak = host.downgrade();
    let mut wake = host.wake_watch();
    tokio::spawn(async move {
        loop {
            // Seen before reading the state: a later start or boot-time
            // change wakes the wait below.
            wake.borrow_and_update();
            let next = match weak.upgrade() {
                Some(host) => step(&host, &vm_id, host.now()),
                None => return,
            };
            match next {
                Step::Done => return,
                Step::Wait(None) => {
                    if wake.changed().await.is_err() {
                        return;
                    }
                }
                Step::Wait(Some(left)) => {
                    tokio::select! {
                        () = tokio::time::sleep(left) => {}
                        changed = wake.changed() => if changed.is_err() { return },
                    }
                }
                Step::Call { vm_name, call } => {
                    let answered = post(&vm_name, &call).await;
                    let Some(host) = weak.upgrade() else { return };
                    if let Some(vm) = host.state().vms.iter_mut().find(|vm| vm.id == vm_id) {
                        vm.phone_home = None;
                        vm.phoned_home = answered;
                    }
                    if let Err(e) = host.save().await {
                        tracing::error!(host = host.name(), error = %e, "the host's state could not be saved");
                    }
                    return;
                }
            }
        }
    });
}

/// POSTs the form up to `call.tries` times; whether a 2xx came back.
async fn post(vm_name: &str, call: &PhoneHome) -> bool {
    let client = match reqwest::Client::builder()
        .no_proxy()
        .timeout(ATTEMPT_TIMEOUT)
        .user_agent(concat!("Cloud-Init/atomos-sim-", env!("CARGO_PKG_VERSION")))
        .build()
    {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(vm = vm_name, error = %e, "phone home: no HTTP client");
            return false;
        }
    };
    // The query may carry the guest's secret (meson's phone-home token): logs
    // show the URL without it.
    let url = call.url.split('?').next().unwrap_or_default();
    let mut pause = FIRST_PAUSE;
    for attempt in 1..=call.tries {
        match client.post(&call.url).form(&call.form).send().await {
            Ok(r) if r.status().is_success() => {
                tracing::info!(vm = vm_name, url, attempt, "phoned home");
                return true;
            }
            Ok(r) => {
                tracing::info!(
                    vm = vm_name,
                    url,
                    attempt,
                    status = r.status().as_u16(),
                    "phone home refused"
                );
            }
            Err(e) => {
                tracing::info!(vm = vm_name, url, attempt, error = %e.without_url(), "phone home failed");
            }
        }
        if attempt < call.tries {
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(MAX_PAUSE);
        }
    }
    tracing::warn!(vm = vm_name, url, tries = call.tries, "phone home gave up");
    false
}
