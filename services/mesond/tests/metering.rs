//! Metering through a simulated month: the metering clock is frozen at
//! each step of a timeline (VMs created, one resized, one stopped, then
//! deleted; a volume grown; a price changed), real `mesond worker`
//! processes do the work, one of them is killed with SIGKILL in the middle
//! of a resize and the database (a private PostgreSQL) crashes and
//! restarts mid-month. The month's statement, written by a worker's
//! reconciler once the month is over, must equal, to the cent, the cost
//! this test computes on its own from the timeline it drove.

mod support;

use chrono::{DateTime, TimeDelta, Utc};
use meson_api::{App, Principal, Role};
use meson_core::action::ActionStatus;
use meson_core::vm::VmStatus;
use meson_core::volume::VolumeKind;
use meson_core::{ActionId, TenantId, VmId};
use meson_types::vm::PowerCommand;
use std::time::{Duration, Instant};
use support::Process;

const KEY: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMLavtiPfhiG3t6TAxHosXoVh7Pc/lSD8L9SNPyAzp1d user@host";

/// A 1-core VM with a 5 GB data disk, on `provider`'s hosts (each
/// provider prices its own; on-prem is free).
fn vm_body(name: &str, provider: &str) -> serde_json::Value {
    serde_json::json!({"provider": provider, "specs": {"vm_name": name,
        "req": {"cpu": {"numberOfCores": 1}, "mem": {"capacity": 1024}, "misc": {"osDistribution": "Debian"}},
        "volumes": [{"name": "data", "size": 5, "private": "True"}],
        "authentication": {"ssh-key": KEY}}})
}

/// Waits (bounded) until the action is final, and wants it a success.
async fn done(pool: &meson_db::PgPool, id: ActionId) {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let a = meson_db::actions::get(pool, None, id).await;
        match a {
            Ok(a) if a.status == ActionStatus::Success => return,
            Ok(a) if a.status == ActionStatus::Error => panic!("action {id} failed: {a:?}"),
            // Running, or the database restarting.
            _ => {}
        }
        assert!(Instant::now() < deadline, "action {id} stuck");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A decimal string as an exact number of 10⁻¹² units.
fn pico(s: &str) -> i128 {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    assert!(frac.len() <= 12, "{s}");
    let frac = format!("{frac:0<12}");
    int.parse::<i128>().unwrap() * 1_000_000_000_000 + frac.parse::<i128>().unwrap()
}

/// The test's own ledger: cost × 3600 in 10⁻¹² units, exact.
#[derive(Default)]
struct Ledger(i128);

impl Ledger {
    /// `quantity` units for `[from, to)` at `price` (a decimal per unit
    /// and hour).
    fn add(&mut self, quantity: i128, price: &str, from: DateTime<Utc>, to: DateTime<Utc>) {
        let seconds = i128::from((to - from).num_seconds());
        assert!(seconds >= 0);
        self.0 += quantity * pico(price) * seconds;
    }

    /// Storage at the price list's volume price, which changes at `change`.
    fn storage(&mut self, gb: i128, from: DateTime<Utc>, to: DateTime<Utc>, change: DateTime<Utc>) {
        if from < change {
            self.add(gb, OLD_VOLUME_PRICE, from, to.min(change));
        }
        if to > change {
            self.add(gb, NEW_VOLUME_PRICE, from.max(change), to);
        }
    }

    /// The total in cents, rounded half away from zero.
    fn cents(&self) -> i128 {
        let per_cent = 3600 * 10_000_000_000; // 3600 × 10¹² / 100
        (self.0 + per_cent / 2) / per_cent
    }
}

const OLD_VOLUME_PRICE: &str = "0.00006";
const NEW_VOLUME_PRICE: &str = "0.0001";

/// The VM's hourly price as the database holds it (a float8, which the
/// metering converts to a decimal of 15 significant digits, as Rust's
/// shortest representation of these prices reads).
async fn price(app: &App, who: &Principal, id: VmId) -> String {
    let (vm, _) = app.vm_get(who, id).await.unwrap();
    format!("{}", vm.placement.expect("placed").price_hourly)
}

/// GB of the VM's metered volumes (not its cloud-init disk).
async fn disks(app: &App, who: &Principal, id: VmId) -> i128 {
    let (_, parts) = app.vm_get(who, id).await.unwrap();
    parts
        .volumes
        .iter()
        .filter(|v| v.kind != VolumeKind::Cloudinit)
        .map(|v| i128::from(v.size_gb))
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_month_is_billed_to_the_cent_through_a_worker_kill_and_a_database_crash() {
    let scratch = support::Scratch::new(0o755);
    std::fs::create_dir_all(scratch.data_dir()).unwrap();
    let pg = mesond::pg::PrivatePostgres::start(&scratch.data_dir())
        .await
        .expect("a private PostgreSQL");
    let pool = mesond::server::database(&pg.url, 8, true).await.unwrap();
    let sim = support::simulator(Duration::from_millis(100)).await;
    mesond::server::register_targets(&pool, &sim.targets())
        .await
        .unwrap();
    let app = App::new(pool.clone());
    let who = Principal {
        tenant: TenantId("metered".into()),
        subject: "ops".into(),
        role: Role::Owner,
        email: None,
    };
    const LEASE_MS: &str = "600";
    let reconcile = [("MESON_RECONCILE_INTERVAL_S", "1")];
    let mut worker: Process = support::worker_with(&pg.url, LEASE_MS, &reconcile);

    let t0: DateTime<Utc> = "2027-03-01T00:00:00Z".parse().unwrap();
    let day = |d: i64| t0 + TimeDelta::days(d);
    let at = |t: DateTime<Utc>| {
        let pool = pool.clone();
        async move { meson_db::testing::freeze_clock(&pool, t).await.unwrap() }
    };
    let mut ledger = Ledger::default();
    let price_change = day(5);

    // Day 0: two VMs and a standalone 10 GB volume.
    at(t0).await;
    let a = app.vm_create(&who, &vm_body("a", "ionos")).await.unwrap();
    let b = app.vm_create(&who, &vm_body("b", "ovh")).await.unwrap();
    let v = app
        .volume_create(&who, &serde_json::json!({"name": "v", "size": 10}))
        .await
        .unwrap();
    for id in [a.action.id, b.action.id, v.action.id] {
        done(&pool, id).await;
    }
    let (a, b, v) = (a.vm.id, b.vm.id, v.volume.id);
    let (price_a, price_b) = (price(&app, &who, a).await, price(&app, &who, b).await);
    let (disks_a, disks_b) = (disks(&app, &who, a).await, disks(&app, &who, b).await);
    assert!(disks_a > 5 && disks_b > 5, "boot and data disks");

    // Day 3: the volume price changes from day 5 on (set ahead of time, as
    // a provider announces it).
    at(day(3)).await;
    app.price_create(
        &serde_json::json!({"meter": "volume", "unit_price": NEW_VOLUME_PRICE,
                                          "currency": "EUR",
                                          "effective_from": price_change.to_rfc3339()}),
    )
    .await
    .unwrap();
    // A price for the past is refused: what was billed keeps its prices.
    let past = app
        .price_create(&serde_json::json!({"meter": "volume", "unit_price": "1",
                                           "currency": "EUR", "effective_from": day(1).to_rfc3339()}))
        .await
        .unwrap_err();
    assert!(
        matches!(past, meson_core::Error::Conflict { .. }),
        "{past:?}"
    );

    // Day 3, still: VM a grows to 2 cores (stopped and started for it),
    // and its worker is SIGKILLed in the middle; another takes over.
    for h in sim.hosts() {
        h.faults().set_latency(Duration::from_millis(150));
    }
    let (resize, _) = app
        .vm_resize(&who, a, &serde_json::json!({"cores": 2, "stop": true}))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    worker.kill();
    worker = support::worker_with(&pg.url, LEASE_MS, &reconcile);
    done(&pool, resize.id).await;
    for h in sim.hosts() {
        h.faults().set_latency(Duration::ZERO);
    }
    let (vm_a, _) = app.vm_get(&who, a).await.unwrap();
    assert_eq!(vm_a.status, VmStatus::Running);
    let price_a2 = price(&app, &who, a).await;
    assert_ne!(price_a, price_a2, "a resize re-prices the VM");
    ledger.add(1, &price_a, t0, day(3));

    // Day 10: VM b is stopped (its disks are still billed).
    at(day(10)).await;
    let off = app.vm_power(&who, b, PowerCommand::Poweroff).await.unwrap();
    done(&pool, off.id).await;
    ledger.add(1, &price_b, t0, day(10));

    // Day 12: the standalone volume grows to 30 GB.
    at(day(12)).await;
    let (grow, _) = app
        .volume_resize(&who, v, &serde_json::json!({"size": 30}))
        .await
        .unwrap();
    done(&pool, grow.id).await;
    ledger.storage(10, t0, day(12), price_change);

    // Day 15: the database crashes and comes back.
    at(day(15)).await;
    pg.crash_restart().await.expect("PostgreSQL restarted");
    let deadline = Instant::now() + Duration::from_secs(30);
    while meson_db::usage::clock(&pool).await.is_err() {
        assert!(Instant::now() < deadline, "the database did not come back");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(meson_db::usage::clock(&pool).await.unwrap(), day(15));

    // Day 20: VM a is deleted, with its disks.
    at(day(20)).await;
    let gone = app.vm_delete(&who, a).await.unwrap();
    done(&pool, gone.id).await;
    ledger.add(1, &price_a2, day(3), day(20));
    ledger.storage(disks_a, t0, day(20), price_change);

    // The month ends; what is left runs to its end.
    let april = day(31);
    assert_eq!(
        april,
        "2027-04-01T00:00:00Z".parse::<DateTime<Utc>>().unwrap()
    );
    ledger.storage(disks_b, t0, april, price_change);
    ledger.storage(30, day(12), april, price_change);

    // Before the statement: the running month's usage, by day, already
    // adds up to the same (read at the month's last instant).
    at(april).await;
    let by_day = app
        .usage(
            &who,
            &meson_api::app::usage::UsageQuery {
                from: Some(t0),
                to: Some(april),
                group_by: Some(meson_db::usage::GroupBy::Day),
                tenant: None,
            },
        )
        .await
        .unwrap();
    let expected = format!("{}.{:02}", ledger.cents() / 100, ledger.cents() % 100);
    assert_eq!(by_day.totals.len(), 1, "{:?}", by_day.totals);
    assert_eq!(by_day.totals[0].amount, expected, "usage by day");
    assert_eq!(
        by_day
            .lines
            .iter()
            .filter_map(|l| l.group.clone())
            .collect::<std::collections::BTreeSet<_>>()
            .len(),
        31,
        "a line group per day of March"
    );

    // An hour into April, a worker's reconciler writes March's statement.
    at(april + TimeDelta::hours(1)).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    let march = loop {
        let list = app.statement_list(&who, None).await.unwrap();
        if let Some(s) = list.iter().find(|s| s.period_start == t0) {
            break s.clone();
        }
        assert!(
            Instant::now() < deadline,
            "no statement for March: {list:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(march.total, expected, "March's statement: {march:?}");
    assert_eq!(march.currency, "EUR");
    let full = app.statement_get(&who, &march.id, None).await.unwrap();
    let lines = full.lines.unwrap();
    // Two VMs, their boot and data disks, the standalone volume.
    assert_eq!(lines.len(), 2 + 4 + 1, "{lines:?}");
    let line_a = lines.iter().find(|l| l.resource_id == a.0).unwrap();
    assert_eq!(line_a.quantity, "480.000000", "a ran 20 days: {line_a:?}");

    // The running month (April) has its first hour; the statement never
    // changes, even for the database's owner.
    let list = app.statement_list(&who, None).await.unwrap();
    assert_eq!(list[0].id, "current");
    let frozen = meson_db::testing::rewrite_statement_total(&pool, &march.id).await;
    assert!(frozen.is_err(), "a closed statement was changed");
    let again = app.statement_get(&who, &march.id, None).await.unwrap();
    assert_eq!(again.total, expected);

    worker.kill();
    drop(sim);
}
