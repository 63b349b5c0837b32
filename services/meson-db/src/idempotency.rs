//! Idempotency keys of the public API: claim a key, store its response, replay it.

use crate::{DbResult, corrupt};
use meson_core::{Error, TenantId};
use sqlx::PgPool;

/// How long a key is remembered; older rows are treated as absent.
pub const TTL_SECS: f64 = 24.0 * 3600.0;

/// How long a claim may stay in flight: past it the claim is taken over,
/// as its request cannot be running any more (the API bounds a request's
/// time far below it). A claim outlives its request only when the process
/// died with it or the database was unreachable when the claim should have
/// been released or completed; this bounds how long the key stays "still
/// being processed" then.
pub const IN_FLIGHT_SECS: f64 = 300.0;

/// A response kept for replay: status, body and the headers worth repeating.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredResponse {
    pub status: u16,
    pub body: Vec<u8>,
    /// (lower-case name, value) pairs.
    pub headers: Vec<(String, String)>,
}

/// The outcome of [`claim`].
#[derive(Debug, PartialEq, Eq)]
pub enum Claim {
    /// The key is ours: run the request, then [`complete`] or [`release`].
    Claimed,
    /// An earlier request holds the key; `response` is `None` while it runs.
    Existing {
        request_hash: Vec<u8>,
        response: Option<StoredResponse>,
    },
}

/// Claims `key` for `request_hash`, taking over an expired record or a
/// claim in flight for longer than [`IN_FLIGHT_SECS`]. One
/// statement each, so concurrent claimers serialize on the primary key and
/// exactly one of them wins.
pub async fn claim(
    pool: &PgPool,
    tenant: &TenantId,
    key: &str,
    request_hash: &[u8],
) -> Result<Claim, Error> {
    // The record can vanish between the insert and the read (its request
    // failed and released it, or it was pruned): then claim again.
    for _ in 0..3 {
        let claimed = sqlx::query_scalar!(
            r#"insert into idempotency_keys (tenant_id, key, request_hash)
               values ($1, $2, $3)
               on conflict (tenant_id, key) do update
                 set request_hash = excluded.request_hash, status = null,
                     response_body = null, response_headers = '{}', created_at = now()
                 where idempotency_keys.created_at < now() - make_interval(secs => $4)
                    or (idempotency_keys.status is null
                        and idempotency_keys.created_at < now() - make_interval(secs => $5))
               returning true as "claimed!""#,
            tenant.as_str(),
            key,
            request_hash,
            TTL_SECS,
            IN_FLIGHT_SECS,
        )
        .fetch_optional(pool)
        .await
        .ctx("claiming an idempotency key")?;
        if claimed.is_some() {
            return Ok(Claim::Claimed);
        }
        let row = sqlx::query!(
            r#"select request_hash, status, response_body, response_headers
               from idempotency_keys
               where tenant_id = $1 and key = $2
                 and created_at >= now() - make_interval(secs => $3)"#,
            tenant.as_str(),
            key,
            TTL_SECS,
        )
        .fetch_optional(pool)
        .await
        .ctx("reading an idempotency key")?;
        let Some(row) = row else { continue };
        let response = match (row.status, row.response_body) {
            (Some(status), Some(body)) => Some(StoredResponse {
                status: u16::try_from(status).map_err(|_| corrupt("stored status", status))?,
                body,
                headers: headers_from_json(row.response_headers)?,
            }),
            _ => None,
        };
        return Ok(Claim::Existing {
            request_hash: row.request_hash,
            response,
        });
    }
    Err(Error::Conflict {
        message: "the request with this Idempotency-Key keeps changing; retry".into(),
    })
}

/// Stores the response of a claimed key. False when the claim is gone.
pub async fn complete(
    pool: &PgPool,
    tenant: &TenantId,
    key: &str,
    request_hash: &[u8],
    response: &StoredResponse,
) -> Result<bool, Error> {
    let headers: serde_json::Map<String, serde_json::Value> = response
        .headers
        .iter()
        .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
        .collect();
    let status = i16::try_from(response.status)
        .map_err(|_| Error::internal(format!("status {} out of range", response.status)))?;
    let done = sqlx::query!(
        r#"update idempotency_keys
           set status = $4, response_body = $5, response_headers = $6
           where tenant_id = $1 and key = $2 and request_hash = $3 and status is null"#,
        tenant.as_str(),
        key,
        request_hash,
        status,
        &response.body,
        serde_json::Value::Object(headers),
    )
    .execute(pool)
    .await
    .ctx("storing an idempotent response")?;
    Ok(done.rows_affected() == 1)
}

/// Gives up a claim whose request did not finish (server error, cancelled),
/// so that a retry runs the request again.
pub async fn release(
    pool: &PgPool,
    tenant: &TenantId,
    key: &str,
    request_hash: &[u8],
) -> Result<(), Error> {
    sqlx::query!(
        r#"delete from idempotency_keys
           where tenant_id = $1 and key = $2 and request_hash = $3 and status is null"#,
        tenant.as_str(),
        key,
        request_hash,
    )
    .execute(pool)
    .await
    .ctx("releasing an idempotency key")?;
    Ok(())
}

/// Deletes up to `limit` expired keys; returns how many.
pub async fn prune(pool: &PgPool, limit: i64) -> Result<u64, Error> {
    Ok(sqlx::query!(
        r#"delete from idempotency_keys where (tenant_id, key) in (
             select tenant_id, key from idempotency_keys
             where created_at < now() - make_interval(secs => $1)
             order by created_at limit $2)"#,
        TTL_SECS,
        limit,
    )
    .execute(pool)
    .await
    .ctx("pruning expired idempotency keys")?
    .rows_affected())
}

fn headers_from_json(v: serde_json::Value) -> Result<Vec<(String, String)>, Error> {
    let serde_json::Value::Object(map) = v else {
        return Err(corrupt("stored response headers", v));
    };
    map.into_iter()
        .map(|(k, v)| match v {
            serde_json::Value::String(s) => Ok((k, s)),
            other => Err(corrupt("stored response header", other)),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::TestDatabase;

    #[tokio::test]
    async fn claim_store_replay_expire_prune() {
        let db = TestDatabase::new().await;
        let (t, key, h1, h2) = (TenantId("t1".into()), "k", [1u8; 32], [2u8; 32]);

        assert_eq!(claim(&db.pool, &t, key, &h1).await.unwrap(), Claim::Claimed);
        // In flight: the second claimer sees no response.
        let in_flight = Claim::Existing {
            request_hash: h1.to_vec(),
            response: None,
        };
        assert_eq!(claim(&db.pool, &t, key, &h2).await.unwrap(), in_flight);
        // Another tenant's key of the same name is independent.
        let other = TenantId("t2".into());
        assert_eq!(
            claim(&db.pool, &other, key, &h2).await.unwrap(),
            Claim::Claimed
        );

        let res = StoredResponse {
            status: 201,
            body: b"{}".to_vec(),
            headers: vec![("content-type".into(), "application/json".into())],
        };
        assert!(complete(&db.pool, &t, key, &h1, &res).await.unwrap());
        assert!(!complete(&db.pool, &t, key, &h1, &res).await.unwrap());
        assert_eq!(
            claim(&db.pool, &t, key, &h1).await.unwrap(),
            Claim::Existing {
                request_hash: h1.to_vec(),
                response: Some(res),
            }
        );

        // Released claims can be claimed again.
        release(&db.pool, &other, key, &h2).await.unwrap();
        assert_eq!(
            claim(&db.pool, &other, key, &h1).await.unwrap(),
            Claim::Claimed
        );

        // An expired key is taken over, and pruned when nobody took it.
        sqlx::query!(
            "update idempotency_keys set created_at = now() - interval '25 hours' where tenant_id = 't1'"
        )
        .execute(&db.pool)
        .await
        .unwrap();
        assert_eq!(claim(&db.pool, &t, key, &h2).await.unwrap(), Claim::Claimed);
        assert_eq!(prune(&db.pool, 100).await.unwrap(), 0);
        sqlx::query!("update idempotency_keys set created_at = now() - interval '25 hours'")
            .execute(&db.pool)
            .await
            .unwrap();
        assert_eq!(prune(&db.pool, 100).await.unwrap(), 2);
    }

    #[tokio::test]
    async fn a_claim_in_flight_past_its_lease_is_taken_over_an_answered_one_is_not() {
        let db = TestDatabase::new().await;
        let (t, h1, h2) = (TenantId("t1".into()), [1u8; 32], [2u8; 32]);
        let age = |key: &'static str, secs: f64| {
            let pool = db.pool.clone();
            async move {
                sqlx::query!(
                    "update idempotency_keys set created_at = now() - make_interval(secs => $2)
                     where key = $1",
                    key,
                    secs
                )
                .execute(&pool)
                .await
                .unwrap();
            }
        };
        // A request whose process died with it: in flight just within the
        // lease, then just past it.
        assert_eq!(
            claim(&db.pool, &t, "lost", &h1).await.unwrap(),
            Claim::Claimed
        );
        age("lost", IN_FLIGHT_SECS - 5.0).await;
        assert!(matches!(
            claim(&db.pool, &t, "lost", &h1).await.unwrap(),
            Claim::Existing { response: None, .. }
        ));
        age("lost", IN_FLIGHT_SECS + 1.0).await;
        assert_eq!(
            claim(&db.pool, &t, "lost", &h1).await.unwrap(),
            Claim::Claimed
        );
        // The request that took it over answers; its answer is kept for the
        // whole TTL, however old.
        let res = StoredResponse {
            status: 201,
            body: b"{}".to_vec(),
            headers: Vec::new(),
        };
        assert!(complete(&db.pool, &t, "lost", &h1, &res).await.unwrap());
        age("lost", IN_FLIGHT_SECS * 10.0).await;
        assert_eq!(
            claim(&db.pool, &t, "lost", &h2).await.unwrap(),
            Claim::Existing {
                request_hash: h1.to_vec(),
                response: Some(res),
            }
        );
    }
}
