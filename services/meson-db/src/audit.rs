//! The audit log: appended by the API, listed by operators.

use crate::DbResult;
use meson_core::Error;
use meson_core::audit::{AuditEntry, AuditFilter};

/// Appends an entry (its `id` is the database's; `at` is when the request
/// came, which an entry written late, after an outage, keeps).
pub async fn insert(db: impl sqlx::PgExecutor<'_>, e: &AuditEntry) -> Result<(), Error> {
    sqlx::query!(
        r#"insert into audit_log
             (tenant_id, subject, role, operation, method, path, resource_type, resource_id,
              action_id, status, correlation_id, at)
           values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)"#,
        e.tenant,
        e.subject,
        e.role,
        e.operation,
        e.method,
        e.path,
        e.resource_type,
        e.resource_id,
        e.action_id,
        i16::try_from(e.status).unwrap_or(500),
        e.correlation_id,
        e.at,
    )
    .execute(db)
    .await
    .ctx("appending to the audit log")?;
    Ok(())
}

/// One page of entries, newest first, and how many match in all.
pub async fn list(
    db: impl sqlx::PgExecutor<'_>,
    f: &AuditFilter,
    limit: i64,
    offset: i64,
) -> Result<(Vec<AuditEntry>, i64), Error> {
    let rows = sqlx::query!(
        r#"select id, at, tenant_id, subject, role, operation, method, path, resource_type,
                  resource_id, action_id, status, correlation_id,
                  count(*) over () as "total!"
           from audit_log
           where ($1::text is null or tenant_id = $1)
             and ($2::text is null or subject = $2)
             and ($3::text is null or operation = $3)
             and ($4::text is null or resource_id = $4)
             and ($5::timestamptz is null or at >= $5)
             and ($6::timestamptz is null or at < $6)
           order by id desc
           limit $7 offset $8"#,
        f.tenant,
        f.subject,
        f.operation,
        f.resource_id,
        f.since,
        f.until,
        limit,
        offset,
    )
    .fetch_all(db)
    .await
    .ctx("listing the audit log")?;
    let total = rows.first().map_or(0, |r| r.total);
    let entries = rows
        .into_iter()
        .map(|r| AuditEntry {
            id: r.id,
            at: r.at,
            tenant: r.tenant_id,
            subject: r.subject,
            role: r.role,
            operation: r.operation,
            method: r.method,
            path: r.path,
            resource_type: r.resource_type,
            resource_id: r.resource_id,
            action_id: r.action_id,
            status: u16::try_from(r.status).unwrap_or(0),
            correlation_id: r.correlation_id,
        })
        .collect();
    Ok((entries, total))
}

/// Deletes entries older than `days` days, at most `limit` at a time.
pub async fn prune(db: impl sqlx::PgExecutor<'_>, days: i64, limit: i64) -> Result<u64, Error> {
    let done = sqlx::query!(
        r#"delete from audit_log where id in (
             select id from audit_log where at < now() - make_interval(days => $1::int)
             order by id limit $2)"#,
        i32::try_from(days).unwrap_or(i32::MAX),
        limit
    )
    .execute(db)
    .await
    .ctx("pruning the audit log")?;
    Ok(done.rows_affected())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::TestDatabase;

    fn entry(tenant: &str, operation: &str) -> AuditEntry {
        AuditEntry {
            id: 0,
            at: chrono::Utc::now(),
            tenant: tenant.into(),
            subject: "alice".into(),
            role: "editor".into(),
            operation: operation.into(),
            method: "POST".into(),
            path: "/v1/vms".into(),
            resource_type: Some("vm".into()),
            resource_id: Some("r1".into()),
            action_id: None,
            status: 201,
            correlation_id: "c1".into(),
        }
    }

    #[tokio::test]
    async fn entries_are_listed_newest_first_kept_unchanged_and_pruned_when_old() {
        let db = TestDatabase::new().await;
        for (t, op) in [("a", "vm_create"), ("b", "vm_create"), ("a", "vm_delete")] {
            insert(&db.pool, &entry(t, op)).await.unwrap();
        }
        let (all, total) = list(&db.pool, &AuditFilter::default(), 10, 0)
            .await
            .unwrap();
        assert_eq!(total, 3);
        let ops: Vec<&str> = all.iter().map(|e| e.operation.as_str()).collect();
        assert_eq!(ops, ["vm_delete", "vm_create", "vm_create"]);
        let a = AuditFilter {
            tenant: Some("a".into()),
            ..AuditFilter::default()
        };
        assert_eq!(list(&db.pool, &a, 10, 0).await.unwrap().1, 2);

        // Nobody rewrites history.
        let changed = sqlx::query!("update audit_log set status = 200")
            .execute(&db.pool)
            .await;
        assert!(changed.is_err(), "the audit log took an update");

        // Old entries go, at most `limit` at a time; recent ones stay.
        sqlx::query!(
            "insert into audit_log (at, tenant_id, subject, role, operation, method, path,
               status, correlation_id)
             select now() - interval '500 days', 'a', 's', 'viewer', 'op', 'GET', '/', 200, 'c'
             from generate_series(1, 3)"
        )
        .execute(&db.pool)
        .await
        .unwrap();
        assert_eq!(prune(&db.pool, 400, 2).await.unwrap(), 2);
        assert_eq!(prune(&db.pool, 400, 2).await.unwrap(), 1);
        assert_eq!(prune(&db.pool, 400, 2).await.unwrap(), 0);
        assert_eq!(
            list(&db.pool, &AuditFilter::default(), 10, 0)
                .await
                .unwrap()
                .1,
            3
        );
    }
}
