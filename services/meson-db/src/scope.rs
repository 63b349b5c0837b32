//! Which tenant's rows a database session may see: the `meson.tenant`
//! setting that PostgreSQL's row-level security policies read.
//!
//! The API's pool ([`connect_scoped`]) sets it on every connection it hands
//! out, from the [`Scope`] of the task that asks: the tenant of the request
//! being served, `*` for the operator's routes ([`Scope::System`]), or the
//! empty string when no scope was set, which sees no tenant's rows at all.
//! Every query of a request thus runs under the policies as a second wall
//! behind the `tenant_id = $1` of the query itself. The workers' pool
//! ([`crate::connect`]) runs in the system scope for good: workflows act for
//! every tenant.
//!
//! Setting the scope on checkout costs a round trip of its own. The hot
//! statements of the API (a VM's create and read) instead carry it: they
//! run on a pool whose connections see no tenant's rows ([`own_scope`]) and
//! begin with `set_config('meson.tenant', $1, true)`, evaluated before
//! anything they read or write, for their own transaction only
//! ([`own_setting`] gives `$1`). Should a statement ever read a row before
//! setting it, it sees nothing rather than another tenant's rows.

use crate::{DbResult, PgPool};
use meson_core::{Error, TenantId};
use sqlx::PgConnection;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use std::future::Future;
use std::str::FromStr;
use std::time::Duration;

/// The PostgreSQL setting the row-level security policies read.
pub const SETTING: &str = "meson.tenant";

/// The setting's value for the system scope (no tenant id can be `*`).
pub const SYSTEM: &str = "*";

/// What a statement on the [`own_scope`] pool sets `meson.tenant` to: the
/// current task's scope, or, outside any scope, `None` (the statement then
/// keeps its session's setting: none, which sees no rows, on a pool made
/// from a scoped one).
pub fn own_setting() -> Option<String> {
    SCOPE.try_with(|s| s.setting().to_owned()).ok()
}

/// Whose rows the current task works on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scope {
    Tenant(TenantId),
    /// Every tenant's rows: workers, and the API's operator routes.
    System,
}

impl Scope {
    fn setting(&self) -> &str {
        match self {
            Scope::Tenant(t) => t.as_str(),
            Scope::System => SYSTEM,
        }
    }
}

tokio::task_local! {
    static SCOPE: Scope;
}

/// Runs `f` with `scope`: connections the API's pool hands out within it see
/// that scope's rows. Scopes nest; spawned tasks start without one.
pub async fn run<F: Future>(scope: Scope, f: F) -> F::Output {
    SCOPE.scope(scope, f).await
}

/// [`run`] in the system scope.
pub async fn system<F: Future>(f: F) -> F::Output {
    run(Scope::System, f).await
}

/// The current task's scope, if any.
pub fn current() -> Option<Scope> {
    SCOPE.try_with(Clone::clone).ok()
}

/// The current task's scope as the policies' setting: its tenant, `*` for
/// the system scope, or the empty string (no rows) outside any scope.
fn current_setting() -> String {
    SCOPE
        .try_with(|s| s.setting().to_owned())
        .unwrap_or_default()
}

async fn apply(conn: &mut PgConnection, setting: &str) -> Result<(), sqlx::Error> {
    sqlx::query_scalar!(
        r#"select set_config('meson.tenant', $1, false) as "v!""#,
        setting
    )
    .fetch_one(conn)
    .await
    .map(|_| ())
}

/// How long a request waits for a connection of the API's pool by default:
/// short, so that a database outage answers `503 unavailable` in seconds.
pub const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(3);

/// The API's pool: every connection it hands out is set to the asking task's
/// scope before use (this replaces sqlx's liveness ping on checkout, so it
/// costs no extra round trip).
pub fn connect_scoped(url: &str, max_connections: u32) -> Result<PgPool, Error> {
    connect_scoped_with(url, max_connections, ACQUIRE_TIMEOUT)
}

/// [`connect_scoped`], waiting at most `acquire_timeout` for a connection.
pub fn connect_scoped_with(
    url: &str,
    max_connections: u32,
    acquire_timeout: Duration,
) -> Result<PgPool, Error> {
    let opts = PgConnectOptions::from_str(url)
        .map_err(|e| Error::internal_from("invalid DATABASE_URL", e))?
        .application_name("meson-api")
        .options([("statement_timeout", "30s")]);
    Ok(PgPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(acquire_timeout)
        .test_before_acquire(false)
        .after_connect(|conn, _| {
            // Read in the acquiring task, before the future is handed back.
            let (setting, connected) = (current_setting(), crate::outage::connecting());
            Box::pin(async move {
                apply(conn, &setting).await?;
                live(connected);
                Ok(())
            })
        })
        .before_acquire(|conn, _| {
            let (setting, connected) = (current_setting(), crate::outage::connecting());
            Box::pin(async move {
                apply(conn, &setting).await?;
                live(connected);
                Ok(true)
            })
        })
        .connect_lazy_with(opts))
}

/// A pool for statements that carry their own scope ([`own_setting`]),
/// beside the pool `scoped` (same server, role, options and size): it sets
/// nothing on checkout. Its sessions keep the setting `scoped`'s options
/// give them: none for [`connect_scoped`]'s, which sees no tenant's rows,
/// so a statement sees only what it scopes itself to.
pub fn own_scope(scoped: &PgPool) -> PgPool {
    let opts = scoped.connect_options().as_ref().clone();
    PgPoolOptions::new()
        .max_connections(scoped.options().get_max_connections())
        .acquire_timeout(scoped.options().get_acquire_timeout())
        .test_before_acquire(false)
        // No round trip: a connection handed out counts as live.
        .after_connect(|_, _| {
            live(crate::outage::connecting());
            Box::pin(async { Ok(()) })
        })
        .before_acquire(|_, _| {
            live(crate::outage::connecting());
            Box::pin(async { Ok(true) })
        })
        .connect_lazy_with(opts)
}

/// Marks the acquiring request as having had a live connection.
fn live(connected: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>) {
    if let Some(c) = connected {
        c.store(true, std::sync::atomic::Ordering::Release);
    }
}

/// True when `pool`'s role passes around row-level security (a superuser or
/// a `BYPASSRLS` role): the second wall is then down, the first still holds.
pub async fn bypasses_rls(pool: &PgPool) -> Result<bool, Error> {
    sqlx::query_scalar!(
        r#"select (rolsuper or rolbypassrls) as "bypass!" from pg_roles where rolname = current_user"#
    )
    .fetch_one(pool)
    .await
    .ctx("reading the database role")
}

#[cfg(test)]
// The test counts rows in every table by name, which needs SQL built at run time.
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;
    use crate::testing::TestDatabase;
    use sqlx::{Connection, Executor};

    /// Every table under row-level security, with a row of tenant `a` in each.
    const TABLES: [&str; 15] = [
        "vms",
        "volumes",
        "actions",
        "action_resources",
        "idempotency_keys",
        "networks",
        "network_hosts",
        "network_reservations",
        "vm_networks",
        "clusters",
        "node_pools",
        "nodes",
        "tenant_quotas",
        "tenant_usage",
        "audit_log",
    ];

    /// One row of tenant `a` in every table of [`TABLES`], written in the
    /// system scope (`tenant_usage`'s by the triggers).
    async fn tenant_a(pool: &PgPool) {
        let sql = r#"
            insert into atomos_targets (id, name, host, compute_port, storage_port, network_port,
                auth_port, provider, region, continent)
            values ('00000000-0000-0000-0000-0000000000f1', 'h1', '127.0.0.1', 1, 2, 3, 4,
                'ovh', 'fra', 'europe');
            insert into clusters (id, tenant_id, name, status, spec, kubernetes_version, update_policy)
            values ('00000000-0000-0000-0000-0000000000c1', 'a', 'k', 'running', '{}', '1.29.2',
                'NEVER_UPDATE');
            insert into node_pools (id, cluster_id, name, spec, autoscale, min_nodes, max_nodes,
                desired_nodes)
            values ('00000000-0000-0000-0000-0000000000d1', '00000000-0000-0000-0000-0000000000c1',
                'p', '{}', false, 1, 1, 1);
            insert into vms (id, tenant_id, name, status, spec, atomos_name, cluster_id)
            values ('00000000-0000-0000-0000-0000000000a1', 'a', 'vm', 'running', '{}', 'v-a1',
                '00000000-0000-0000-0000-0000000000c1');
            insert into nodes (id, cluster_id, pool_id, role, vm_id, name, status, kubernetes_version)
            values ('00000000-0000-0000-0000-0000000000e1', '00000000-0000-0000-0000-0000000000c1',
                '00000000-0000-0000-0000-0000000000d1', 'worker',
                '00000000-0000-0000-0000-0000000000a1', 'n', 'ready', '1.29.2');
            insert into volumes (id, tenant_id, vm_id, name, kind, size_gb, atomos_name, status)
            values ('00000000-0000-0000-0000-0000000000b1', 'a',
                '00000000-0000-0000-0000-0000000000a1', 'boot', 'boot', 10, 'd-b1', 'available');
            insert into actions (id, tenant_id, command, status)
            values ('00000000-0000-0000-0000-000000000011', 'a', 'create_vm', 'running');
            insert into action_resources (action_id, resource_type, resource_id)
            values ('00000000-0000-0000-0000-000000000011', 'vm',
                '00000000-0000-0000-0000-0000000000a1');
            insert into idempotency_keys (tenant_id, key, request_hash)
            values ('a', 'k', decode(repeat('00', 32), 'hex'));
            insert into networks (id, tenant_id, name, status, cidr, gateway, dhcp, range_start,
                range_last)
            values ('00000000-0000-0000-0000-000000000021', 'a', 'net', 'available',
                '10.0.0.0/24', '10.0.0.1', false, '10.0.0.2', '10.0.0.254');
            insert into network_hosts (network_id, target_id)
            values ('00000000-0000-0000-0000-000000000021', '00000000-0000-0000-0000-0000000000f1');
            insert into network_reservations (network_id, address, purpose)
            values ('00000000-0000-0000-0000-000000000021', '10.0.0.9', 'vip');
            insert into vm_networks (vm_id, network_id, position, mac, address)
            values ('00000000-0000-0000-0000-0000000000a1', '00000000-0000-0000-0000-000000000021',
                0, '52:54:00:00:00:01', '10.0.0.2');
            insert into tenant_quotas (tenant_id, vms, updated_by) values ('a', 5, 'op');
            insert into audit_log (tenant_id, subject, role, operation, method, path, status,
                correlation_id)
            values ('a', 'alice', 'editor', 'vm_create', 'POST', '/v1/vms', 201, 'c');
        "#;
        pool.execute(sql).await.expect("tenant a's rows");
    }

    async fn counts(conn: &mut PgConnection) -> Vec<(&'static str, i64)> {
        let mut out = Vec::new();
        for t in TABLES {
            let n: i64 = sqlx::query_scalar(&format!("select count(*) from {t}"))
                .fetch_one(&mut *conn)
                .await
                .expect("count");
            out.push((t, n));
        }
        out
    }

    #[tokio::test]
    async fn the_application_role_sees_no_row_of_another_tenant() {
        let db = TestDatabase::new().await;
        tenant_a(&db.pool).await;

        // Raw SQL as the application role meson connects as (no superuser,
        // no BYPASSRLS), owner of every table.
        let mut conn = PgConnection::connect(&db.url).await.expect("connect");
        let bypass: bool = sqlx::query_scalar(
            "select rolsuper or rolbypassrls from pg_roles where rolname = current_user",
        )
        .fetch_one(&mut conn)
        .await
        .unwrap();
        assert!(!bypass, "the test role must be bound by row-level security");

        for setting in ["b", "", "a ", "A", "%", "a' or 'x'='x"] {
            sqlx::query("select set_config('meson.tenant', $1, false)")
                .bind(setting)
                .execute(&mut conn)
                .await
                .unwrap();
            for (table, n) in counts(&mut conn).await {
                assert_eq!(
                    n, 0,
                    "{table} shows tenant a's rows to meson.tenant={setting:?}"
                );
            }
            // Nor can it change them, or write rows in tenant a's name.
            let updated = sqlx::query("update vms set name = 'stolen'")
                .execute(&mut conn)
                .await
                .unwrap();
            assert_eq!(updated.rows_affected(), 0);
            let deleted = sqlx::query("delete from audit_log")
                .execute(&mut conn)
                .await
                .unwrap();
            assert_eq!(deleted.rows_affected(), 0);
            let forged = sqlx::query(
                "insert into tenant_quotas (tenant_id, vms, updated_by) values ('a2', 1, 'x')",
            )
            .execute(&mut conn)
            .await;
            assert!(forged.is_err(), "a row of another tenant was written");
        }

        // A session that never set it sees nothing either.
        let mut fresh = PgConnection::connect(&db.url).await.expect("connect");
        for (table, n) in counts(&mut fresh).await {
            assert_eq!(n, 0, "{table} shows rows to a session with no tenant set");
        }

        // The tenant itself sees one row in each, and the system scope too.
        for setting in ["a", SYSTEM] {
            sqlx::query("select set_config('meson.tenant', $1, false)")
                .bind(setting)
                .execute(&mut conn)
                .await
                .unwrap();
            for (table, n) in counts(&mut conn).await {
                assert_eq!(n, 1, "{table} as meson.tenant={setting:?}");
            }
        }
    }

    #[tokio::test]
    async fn the_api_pool_sees_the_asking_tasks_tenant_and_nothing_outside_a_scope() {
        let db = TestDatabase::new().await;
        tenant_a(&db.pool).await;
        let api = db.api_pool();
        let vms = |pool: PgPool| async move {
            sqlx::query_scalar::<_, i64>("select count(*) from vms")
                .fetch_one(&pool)
                .await
                .unwrap()
        };
        let a = Scope::Tenant(TenantId("a".into()));
        let b = Scope::Tenant(TenantId("b".into()));
        // Used one at a time, the pool hands the same connection back each time.
        for _ in 0..3 {
            assert_eq!(run(a.clone(), vms(api.clone())).await, 1);
            assert_eq!(run(b.clone(), vms(api.clone())).await, 0);
            assert_eq!(vms(api.clone()).await, 0, "no scope must see nothing");
            assert_eq!(system(vms(api.clone())).await, 1);
        }
        // Transactions take the scope of the task that begins them.
        let in_tx = |pool: PgPool| async move {
            let mut tx = pool.begin().await.unwrap();
            let n: i64 = sqlx::query_scalar("select count(*) from clusters")
                .fetch_one(&mut *tx)
                .await
                .unwrap();
            tx.commit().await.unwrap();
            n
        };
        assert_eq!(run(a.clone(), in_tx(api.clone())).await, 1);
        assert_eq!(run(b.clone(), in_tx(api.clone())).await, 0);
        // A task spawned from within a scope does not inherit it.
        let spawned = run(a.clone(), async {
            tokio::spawn(vms(api.clone())).await.unwrap()
        })
        .await;
        assert_eq!(spawned, 0);
        assert_eq!(current(), None);
        assert!(!bypasses_rls(&db.pool).await.unwrap());
    }

    /// A VM of `tenant` as a create writes it: its row, volumes, action, job.
    fn new_vm(
        tenant: &TenantId,
        name: &str,
    ) -> (
        meson_core::vm::Vm,
        Vec<meson_core::volume::Volume>,
        meson_core::action::Action,
        crate::jobs::NewJob,
    ) {
        let body = serde_json::json!({
            "specs": {
                "req": {
                    "cpu": {"smtEnabled": false, "numberOfCores": 2, "numberOfThreads": 1,
                            "min_frequency": 1.0, "arch": ["X86_64"], "flags": []},
                    "mem": {"capacity": 4096, "requireECC": 0},
                    "pci": {"devices": {}},
                    "misc": {"osDistribution": "Debian"}
                },
                "volumes": [{"name": "data", "size": 30, "private": "True",
                             "shareable": "False", "bootable": "False", "readonly": "False"}],
                "vm_name": name
            },
            "provider": "ionos"
        });
        let req = meson_core::vm::VmCreate::parse(&body).expect("a valid vm");
        let id = meson_core::VmId::new();
        let (vm, volumes) = meson_core::vm::Vm::new_with_volumes(
            tenant,
            id,
            req.spec,
            req.labels,
            meson_core::naming::vm_atomos_name(id, tenant),
        );
        let mut resources = vec![(meson_core::action::ResourceType::Vm, id.0)];
        resources.extend(
            volumes
                .iter()
                .map(|v| (meson_core::action::ResourceType::Volume, v.id.0)),
        );
        let action = meson_core::action::Action {
            id: meson_core::ActionId::new(),
            tenant: tenant.clone(),
            command: "create_vm".into(),
            status: meson_core::action::ActionStatus::Running,
            progress: 0,
            started: chrono::Utc::now(),
            finished: None,
            resources,
            error: None,
        };
        let job = crate::jobs::NewJob {
            kind: "vm_create".into(),
            args: serde_json::json!({"vm_id": id}),
            priority: 2,
            max_attempts: 10,
            concurrency_key: Some(format!("vm:{id}")),
            action_id: Some(action.id),
            tenant_id: Some(tenant.to_string()),
            trace_context: None,
        };
        (vm, volumes, action, job)
    }

    /// A VM of tenant `a` as a create writes it, with a standalone volume
    /// attached to it (named to sort before the VM's own volumes) and a NIC.
    struct VmWithParts {
        db: TestDatabase,
        own: PgPool,
        tenant: TenantId,
        vm: meson_core::vm::Vm,
        volumes: Vec<meson_core::volume::Volume>,
        extra: meson_core::volume::Volume,
        nic: meson_core::network::Attachment,
    }

    async fn vm_with_parts() -> VmWithParts {
        use crate::vms::{Created, NewVm, create};
        use meson_core::network::{Attachment, Network, NetworkCreate, NetworkStatus};
        use meson_core::volume::{Volume, VolumeCreate};
        let db = TestDatabase::new().await;
        let own = own_scope(&db.api_pool());
        let tenant = TenantId("a".into());
        let scope = Scope::Tenant(tenant.clone());
        let (vm, volumes, action, job) = new_vm(&tenant, "web");
        let new = NewVm {
            vm: &vm,
            volumes: &volumes,
            action: &action,
            job: &job,
            audit: None,
            defaults: meson_core::quota::Resources::DEFAULT_QUOTAS,
            created_by: "",
        };
        let created = run(scope.clone(), create(&own, &new))
            .await
            .expect("create");
        assert!(matches!(created, Created::Written(_)), "{created:?}");
        let req = VolumeCreate::parse(&serde_json::json!({"name": "aaa", "size": 10}), &[])
            .expect("a valid volume");
        let extra = Volume::new_standalone(&tenant, &req);
        let req = NetworkCreate::parse(&serde_json::json!({"name": "lan", "cidr": "10.9.0.0/24"}))
            .expect("a valid network");
        let network = Network {
            id: meson_core::NetworkId::new(),
            tenant: tenant.clone(),
            name: req.name,
            status: NetworkStatus::Available,
            labels: req.labels,
            subnet: req.subnet,
            created: chrono::Utc::now(),
        };
        let nic = Attachment {
            vm_id: vm.id,
            network_id: network.id,
            position: 0,
            mac: meson_core::network::random_mac(),
            address: Some("10.9.0.7".parse().expect("an address")),
        };
        system(async {
            let mut tx = crate::begin(&db.pool).await?;
            crate::volumes::insert(&mut tx, &extra).await?;
            crate::volumes::attach(&mut tx, extra.id, vm.id).await?;
            crate::networks::insert(&mut tx, &network).await?;
            crate::networks::attach(&mut tx, &nic).await?;
            crate::commit(tx).await
        })
        .await
        .expect("a volume and a NIC attached");
        VmWithParts {
            db,
            own,
            tenant,
            vm,
            volumes,
            extra,
            nic,
        }
    }

    impl VmWithParts {
        /// The VM's parts as its read answers them (kept by `vm_parts`'s
        /// triggers), and as computed from the volumes and NICs themselves
        /// (what a list reads), volumes by id; `None` once it is gone.
        async fn parts_both_ways(&self) -> (Option<Parts>, Parts) {
            let scope = Scope::Tenant(self.tenant.clone());
            let read = run(
                scope.clone(),
                crate::vms::get_with_parts(&self.own, &self.tenant, self.vm.id),
            )
            .await
            .ok()
            .map(|(_, mut vols, nics)| {
                vols.sort_by_key(|v| v.id.0);
                (vols, nics)
            });
            let ids = [self.vm.id];
            let computed = run(scope, async {
                let mut conn = crate::acquire(&self.db.api_pool()).await?;
                let mut vols = crate::volumes::list_for_vms(&mut *conn, &ids).await?;
                vols.extend(crate::volumes::attached_to_vms(&mut *conn, &ids).await?);
                vols.sort_by_key(|v| v.id.0);
                let nics = crate::networks::attachments_of(&mut *conn, &ids).await?;
                Ok::<_, Error>((vols, nics))
            })
            .await
            .expect("the parts computed");
            (read, computed)
        }
    }

    type Parts = (
        Vec<meson_core::volume::Volume>,
        Vec<meson_core::network::Attachment>,
    );

    #[tokio::test]
    async fn a_vm_read_lists_its_own_volumes_then_those_attached_then_its_nics() {
        use crate::vms::get_with_parts;
        use meson_core::volume::VolumeKind;
        let f = vm_with_parts().await;
        let (own, tenant, vm, volumes, extra, nic) =
            (&f.own, &f.tenant, &f.vm, &f.volumes, &f.extra, &f.nic);
        let scope = Scope::Tenant(tenant.clone());
        let (_, vols, nics) = run(scope, get_with_parts(own, tenant, vm.id))
            .await
            .expect("read");
        let mut want = Vec::new();
        for kind in [VolumeKind::Boot, VolumeKind::Cloudinit, VolumeKind::Data] {
            let mut of_kind: Vec<_> = volumes.iter().filter(|v| v.kind == kind).collect();
            of_kind.sort_by(|a, b| a.name.cmp(&b.name));
            want.extend(of_kind.into_iter().map(|v| v.id));
        }
        want.push(extra.id);
        assert_eq!(vols.iter().map(|v| v.id).collect::<Vec<_>>(), want);
        let attached = vols.last().expect("the attached volume");
        assert_eq!(
            (attached.attached_to, attached.vm_id, attached.size_gb),
            (Some(vm.id), None, 10)
        );
        assert_eq!(nics, vec![nic.clone()]);
    }

    impl VmWithParts {
        /// Asserts that the read answers the parts computed from scratch,
        /// after `step`; returns them.
        async fn agree(&self, step: &str) -> Parts {
            let (read, computed) = self.parts_both_ways().await;
            assert_eq!(read.as_ref(), Some(&computed), "after {step}");
            computed
        }
    }

    #[tokio::test]
    async fn a_vm_read_follows_every_change_to_its_volumes_and_nics() {
        use meson_core::volume::VolumeStatus;
        let f = vm_with_parts().await;
        let (vols, nics) = f.agree("the create, a volume and a NIC attached").await;
        assert_eq!(vols.len(), f.volumes.len() + 1);
        assert_eq!(nics, vec![f.nic.clone()]);
        crate::volumes::set_status(&f.db.pool, f.volumes[0].id, VolumeStatus::Error)
            .await
            .expect("one volume's status");
        f.agree("one volume's status").await;
        crate::volumes::set_status_for_vm(&f.db.pool, f.vm.id, VolumeStatus::Available)
            .await
            .expect("every volume's status");
        let (vols, _) = f.agree("every volume's status, in one statement").await;
        assert!(
            vols.iter()
                .filter(|v| v.vm_id == Some(f.vm.id))
                .all(|v| v.status == VolumeStatus::Available)
        );
        crate::volumes::detach_all(&f.db.pool, f.vm.id)
            .await
            .expect("detached");
        let (vols, _) = f.agree("the standalone volume detached").await;
        assert!(vols.iter().all(|v| v.id != f.extra.id));
        // Attached again by a statement in the tenant's own scope.
        run(Scope::Tenant(f.tenant.clone()), async {
            let mut tx = crate::begin(&f.db.api_pool()).await?;
            crate::volumes::attach(&mut tx, f.extra.id, f.vm.id).await?;
            crate::networks::detach_vm(&mut tx, f.vm.id).await?;
            crate::commit(tx).await
        })
        .await
        .expect("attached again, the NIC detached");
        let (vols, nics) = f
            .agree("attached again in the tenant's scope, the NIC detached")
            .await;
        assert!(vols.iter().any(|v| v.id == f.extra.id));
        assert!(nics.is_empty(), "{nics:?}");
        // Deleted: its own volumes with it, the attached one detached.
        let mut tx = crate::begin(&f.db.pool).await.expect("begin");
        crate::vms::mark_deleted(&mut tx, f.vm.id)
            .await
            .expect("the VM deleted");
        crate::commit(tx).await.expect("commit");
        assert_eq!(f.parts_both_ways().await, (None, (vec![], vec![])));
        let parts: (String, String) =
            sqlx::query_as("select volumes::text, nics::text from vm_parts where vm_id = $1")
                .bind(f.vm.id.0)
                .fetch_one(&f.db.pool)
                .await
                .expect("the VM's parts");
        assert_eq!(parts, ("[]".to_owned(), "[]".to_owned()));
    }

    #[tokio::test]
    async fn a_vm_that_becomes_a_clusters_node_keeps_no_parts() {
        use meson_core::volume::VolumeStatus;
        let f = vm_with_parts().await;
        f.agree("the create").await;
        let kept = async || -> i64 {
            sqlx::query_scalar("select count(*) from vm_parts where vm_id = $1")
                .bind(f.vm.id.0)
                .fetch_one(&f.db.pool)
                .await
                .expect("counting the VM's parts")
        };
        assert_eq!(kept().await, 1);
        // Written as a plain VM, then tied to its cluster (as a node's VM is).
        sqlx::raw_sql(&format!(
            "insert into clusters (id, tenant_id, name, status, spec, kubernetes_version,
                                   update_policy)
             values ('00000000-0000-0000-0000-0000000000c1', 'a', 'k', 'creating', '{{}}',
                     '1.29.2', 'NEVER_UPDATE');
             update vms set cluster_id = '00000000-0000-0000-0000-0000000000c1'
             where id = '{}';",
            f.vm.id.0
        ))
        .execute(&f.db.pool)
        .await
        .expect("the VM tied to a cluster");
        // The next change to its volumes drops its parts, and later ones
        // write none.
        for status in [VolumeStatus::Error, VolumeStatus::Available] {
            crate::volumes::set_status_for_vm(&f.db.pool, f.vm.id, status)
                .await
                .expect("its volumes' status");
            assert_eq!(kept().await, 0, "after {status:?}");
        }
    }

    #[tokio::test]
    async fn concurrent_changes_to_one_vms_volumes_both_reach_its_read() {
        use meson_core::volume::VolumeStatus;
        let f = vm_with_parts().await;
        let (first, second) = (f.volumes[0].id, f.volumes[1].id);
        // The first transaction changes a volume and stays open.
        let mut a = crate::begin(&f.db.pool).await.expect("begin");
        crate::volumes::set_status(&mut *a, first, VolumeStatus::Error)
            .await
            .expect("the first change");
        // The second changes another volume of the same VM meanwhile.
        let pool = f.db.pool.clone();
        let b = tokio::spawn(async move {
            let mut b = crate::begin(&pool).await?;
            crate::volumes::set_status(&mut *b, second, VolumeStatus::Deleting).await?;
            crate::commit(b).await
        });
        // It waits for the first to end before it aggregates the VM's parts.
        assert!(
            crate::testing::a_session_waits_for_a_lock(&f.db.pool).await,
            "the second change did not wait for the first"
        );
        crate::commit(a).await.expect("the first commits");
        b.await.expect("joined").expect("the second commits");
        let (vols, _) = f.agree("two concurrent changes").await;
        let status = |id| vols.iter().find(|v| v.id == id).map(|v| v.status);
        assert_eq!(
            (status(first), status(second)),
            (Some(VolumeStatus::Error), Some(VolumeStatus::Deleting))
        );
    }

    #[tokio::test]
    async fn statements_that_carry_their_scope_see_and_write_their_tenant_only() {
        use crate::vms::{Created, NewVm, create, get_with_parts};
        use meson_core::quota::Resources;
        let db = TestDatabase::new().await;
        let own = own_scope(&db.api_pool());
        let tenant = TenantId("a".into());
        let a = Scope::Tenant(tenant.clone());
        let b = Scope::Tenant(TenantId("b".into()));
        let (vm, volumes, action, job) = new_vm(&tenant, "web");
        let audit = meson_core::audit::AuditEntry {
            id: 0,
            at: chrono::Utc::now(),
            tenant: "a".into(),
            subject: "alice".into(),
            role: "editor".into(),
            operation: "vm_create".into(),
            method: "POST".into(),
            path: "/v1/vms".into(),
            resource_type: Some("vm".into()),
            resource_id: Some(vm.id.to_string()),
            action_id: Some(action.id.0),
            status: 201,
            correlation_id: "c".into(),
        };
        let new = NewVm {
            vm: &vm,
            volumes: &volumes,
            action: &action,
            job: &job,
            audit: Some(&audit),
            defaults: Resources::DEFAULT_QUOTAS,
            created_by: "",
        };
        // Neither another tenant's scope nor none writes tenant a's rows.
        assert!(run(b.clone(), create(&own, &new)).await.is_err());
        assert!(create(&own, &new).await.is_err());
        let created = run(a.clone(), create(&own, &new)).await.expect("create");
        assert!(matches!(created, Created::Written(_)), "{created:?}");

        let (got, vols, nics) = run(a.clone(), get_with_parts(&own, &tenant, vm.id))
            .await
            .expect("read");
        assert_eq!((got.id, got.name.as_str()), (vm.id, "web"));
        let mut want: Vec<_> = volumes.iter().map(|v| v.id).collect();
        let mut have: Vec<_> = vols.iter().map(|v| v.id).collect();
        want.sort();
        have.sort();
        assert_eq!(have, want);
        assert!(nics.is_empty());
        // Another tenant's scope sees nothing, even asking for tenant a's
        // VM; nor does no scope, and the setting ends with the statement.
        for scope in [Some(b.clone()), None] {
            let read = get_with_parts(&own, &tenant, vm.id);
            let read = match scope {
                Some(s) => run(s, read).await,
                None => read.await,
            };
            assert_eq!(read.err().map(|e| e.code()), Some("not_found"));
        }
        let mut conn = own.acquire().await.expect("connection");
        assert_eq!(
            counts(&mut conn).await.iter().map(|(_, n)| n).sum::<i64>(),
            0
        );

        // Everything was written, once, with its usage.
        let written = |sql: &'static str| {
            let pool = db.pool.clone();
            async move {
                sqlx::query_scalar::<_, i64>(sql)
                    .fetch_one(&pool)
                    .await
                    .expect("count")
            }
        };
        assert_eq!(written("select count(*) from vms").await, 1);
        assert_eq!(
            written("select count(*) from volumes").await,
            volumes.len() as i64
        );
        assert_eq!(
            written("select count(*) from action_resources").await,
            volumes.len() as i64 + 1
        );
        assert_eq!(
            written("select count(*) from jobs where action_id is not null").await,
            1
        );
        assert_eq!(
            written("select count(*) from audit_log where action_id is not null and status = 201")
                .await,
            1
        );
        assert_eq!(
            written("select vms from tenant_usage where tenant_id = 'a'").await,
            1
        );

        // Over a quota, nothing is written and the usage is returned.
        let (vm2, volumes2, action2, job2) = new_vm(&tenant, "db");
        let one = Resources {
            vms: 1,
            ..Resources::DEFAULT_QUOTAS
        };
        let over = run(
            a.clone(),
            create(
                &own,
                &NewVm {
                    vm: &vm2,
                    volumes: &volumes2,
                    action: &action2,
                    job: &job2,
                    audit: None,
                    defaults: one,
                    created_by: "",
                },
            ),
        )
        .await
        .expect("create over quota");
        match over {
            Created::OverQuota {
                overrides,
                usage,
                over,
            } => {
                assert_eq!(usage.vms, 1);
                assert_eq!(overrides.vms, None);
                assert_eq!(over, ["vms"], "only the VM count is over");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(written("select count(*) from vms").await, 1);
        assert_eq!(written("select count(*) from actions").await, 1);
        assert_eq!(written("select count(*) from audit_log").await, 1);
    }
}
