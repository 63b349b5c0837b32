//! Node pools changed after their cluster's create: the locks that
//! serialize those changes, and the counts a PATCH sets. The pool and node
//! rows themselves are read and written by [`crate::clusters`].

use crate::{DbResult, Tx};
use meson_core::cluster::NodePool;
use meson_core::{ClusterId, Error, PoolId};

/// Serializes the requests that change one cluster's pools, for the rest
/// of the transaction: two of them never both pass a check only one may (a
/// name taken twice, two pools growing past what the network holds).
///
/// A transaction-scoped advisory lock rather than the cluster's row: other
/// requests (a cluster delete) write the row after enqueueing their job,
/// and a pool change enqueues after taking this lock, so holding the row
/// here could deadlock with them.
pub async fn lock_cluster(tx: &mut Tx<'_>, id: ClusterId) -> Result<(), Error> {
    sqlx::query_scalar!(
        r#"select 1 as "locked!"
           from pg_advisory_xact_lock(hashtextextended('meson.cluster_pools:' || $1::text, 0))"#,
        id.0.to_string(),
    )
    .fetch_one(&mut **tx)
    .await
    .ctx("locking a cluster's pools")?;
    Ok(())
}

/// Locks a live pool for the rest of the transaction: the scale workflow
/// counts and adds nodes under it, so two attempts of one step (a worker
/// whose lease ran out and the one that took over) never both add.
pub async fn lock(tx: &mut Tx<'_>, id: PoolId) -> Result<(), Error> {
    sqlx::query_scalar!(
        "select id from node_pools where id = $1 and deleted_at is null for update",
        id.0
    )
    .fetch_optional(&mut **tx)
    .await
    .ctx("locking a node pool")?
    .ok_or_else(|| Error::not_found("node pool", id))?;
    Ok(())
}

/// A cluster's live pool.
pub async fn get(
    db: impl sqlx::PgExecutor<'_>,
    cluster: ClusterId,
    id: PoolId,
) -> Result<NodePool, Error> {
    crate::clusters::pools(db, cluster)
        .await?
        .into_iter()
        .find(|p| p.id == id)
        .ok_or_else(|| Error::not_found("node pool", id))
}

/// Stores what a PATCH changes: `autoscale` and the node counts (the
/// columns, which the pool's reads trust, and the spec's copy).
pub async fn set_counts(tx: &mut Tx<'_>, pool: &NodePool) -> Result<(), Error> {
    let s = &pool.spec;
    let spec = serde_json::to_value(s).map_err(|e| Error::internal_from("pool spec", e))?;
    let r = sqlx::query!(
        r#"update node_pools set autoscale = $2, min_nodes = $3, max_nodes = $4,
                                 desired_nodes = $5, spec = $6
           where id = $1 and deleted_at is null"#,
        pool.id.0,
        s.autoscale,
        s.min_nodes as i32,
        s.max_nodes as i32,
        s.desired_nodes as i32,
        spec,
    )
    .execute(&mut **tx)
    .await
    .ctx("updating a node pool")?;
    if r.rows_affected() == 0 {
        return Err(Error::not_found("node pool", pool.id));
    }
    Ok(())
}
