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
            let setting = current_setting();
            Box::pin(async move { apply(conn, &setting).await })
        })
        .before_acquire(|conn, _| {
            let setting = current_setting();
            Box::pin(async move { apply(conn, &setting).await.map(|()| true) })
        })
        .connect_lazy_with(opts))
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
}
