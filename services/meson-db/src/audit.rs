//! The audit log: appended by the API, listed by operators.

use crate::DbResult;
use meson_core::Error;
use meson_core::audit::{AuditEntry, AuditFilter};

/// Appends an entry (its `id` and `at` are the database's).
pub async fn insert(db: impl sqlx::PgExecutor<'_>, e: &AuditEntry) -> Result<(), Error> {
    sqlx::query!(
        r#"insert into audit_log
             (tenant_id, subject, role, operation, method, path, resource_type, resource_id,
              action_id, status, correlation_id)
           values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"#,
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
