//! Idempotency keys, for every transport: a call that names a key claims it
//! for its tenant, runs once and stores its answer; a retry with the same key
//! and the same request gets that answer again, and the same key with another
//! request, or while the first still runs, is a `conflict`.
//!
//! The transports say what a request is (its [`fingerprint`]) and what an
//! answer is ([`StoredResponse`]: REST's status, body and headers; gRPC's
//! message and status): this module keeps the rules.

use super::App;
use crate::auth::Principal;
use meson_core::{Error, Result, TenantId};
use meson_db::PgPool;
pub use meson_db::idempotency::StoredResponse;
use meson_db::idempotency::{self as store, Claim as Claimed};
use sha2::{Digest, Sha256};
use std::sync::atomic::{AtomicI64, Ordering};

/// What a retry with the key of a request whose answer held a credential
/// gets: meson keeps no credential, not even for a replay.
pub fn credential_not_kept() -> Error {
    conflict(
        "the first request with this Idempotency-Key was answered with a credential, which \
         meson does not keep: make a new request with another key",
    )
}

/// How the key is named in errors, on either transport.
pub const KEY_FIELD: &str = "Idempotency-Key";

/// Expired keys are pruned by the API itself, at most this often per process,
/// in the background: cheap enough to need no separate job.
const PRUNE_EVERY_SECS: i64 = 600;
const PRUNE_BATCH: i64 = 10_000;

/// A client's idempotency key: 1 to 255 printable ASCII characters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    pub fn parse(raw: &[u8]) -> Result<IdempotencyKey> {
        if (1..=255).contains(&raw.len()) && raw.iter().all(|b| (0x20..=0x7e).contains(b)) {
            // Printable ASCII is UTF-8.
            Ok(IdempotencyKey(String::from_utf8_lossy(raw).into_owned()))
        } else {
            Err(Error::invalid(
                KEY_FIELD,
                "must be 1 to 255 printable ASCII characters",
            ))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// What makes two requests "the same": the method (`POST`, or `GRPC`), what
/// it calls (a path with its query, or a gRPC method) and the body.
pub fn fingerprint(method: &str, target: &str, body: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(method);
    h.update(b" ");
    h.update(target);
    h.update(b"\n");
    h.update(body);
    h.finalize().into()
}

/// What a call with a key does.
pub enum Begun {
    /// Run it, then [`Claim::complete`] it with its answer (or drop the claim).
    Run(Claim),
    /// Answer this, stored by the first call with the key.
    Replay(StoredResponse),
}

impl App {
    /// Claims `key` for the caller's tenant and the request `hash`, or finds
    /// the answer a first call with it stored; the key used with another
    /// request, or still running, is a `conflict`.
    pub async fn idempotency_begin(
        &self,
        p: &Principal,
        key: IdempotencyKey,
        hash: [u8; 32],
    ) -> Result<Begun> {
        match store::claim(&self.pool, &p.tenant, key.as_str(), &hash).await? {
            Claimed::Claimed => {}
            Claimed::Existing {
                request_hash,
                response,
            } => {
                if request_hash != hash {
                    return Err(conflict("Idempotency-Key reused with a different request"));
                }
                return response
                    .map(Begun::Replay)
                    .ok_or_else(|| conflict(meson_types::error::IDEMPOTENCY_KEY_IN_USE));
            }
        }
        maybe_prune(&self.pool);
        Ok(Begun::Run(Claim {
            pool: self.pool.clone(),
            tenant: p.tenant.clone(),
            key: key.0,
            hash,
            armed: true,
        }))
    }
}

fn conflict(message: &str) -> Error {
    Error::Conflict {
        message: message.into(),
    }
}

/// A claimed key. Unless [`Claim::complete`] stores the answer, dropping it
/// releases the claim: a timeout or a client hang-up drops the request's
/// future and a panic unwinds through it, and the key must not then look
/// "in flight" for 24 hours.
pub struct Claim {
    pool: PgPool,
    tenant: TenantId,
    key: String,
    hash: [u8; 32],
    armed: bool,
}

impl Claim {
    /// Stores the answer for replay. A server error must not be stored (the
    /// client may retry it): [`Claim::release`] the key instead.
    pub async fn complete(mut self, answer: &StoredResponse) {
        self.armed = false;
        match store::complete(&self.pool, &self.tenant, &self.key, &self.hash, answer).await {
            Ok(true) => {}
            Ok(false) => {
                tracing::warn!(key = %self.key, "idempotency claim vanished before its response was stored")
            }
            // The request did its work: answer it, and leave the claim in
            // flight so that a retry cannot do the work twice; the answer is
            // stored once the database answers again (a failover).
            Err(e) => {
                tracing::error!(error = %e, key = %self.key, "could not store an idempotent response");
                if matches!(e, Error::Outage { .. }) {
                    let answer = answer.clone();
                    self.settle_later("storing an idempotent response", move |c| {
                        let answer = answer.clone();
                        async move {
                            store::complete(&c.pool, &c.tenant, &c.key, &c.hash, &answer)
                                .await
                                .map(drop)
                        }
                    });
                }
            }
        }
    }

    /// Gives the key up: a retry runs the request again.
    pub async fn release(mut self) {
        self.release_now().await;
    }

    async fn release_now(&mut self) {
        self.armed = false;
        if let Err(e) = store::release(&self.pool, &self.tenant, &self.key, &self.hash).await {
            tracing::warn!(error = %e, key = %self.key, "could not release an idempotency key");
            // The database is down (its request most likely failed for that
            // very reason): without this, a retry would find the key "still
            // being processed" until the claim's lease runs out.
            if matches!(e, Error::Outage { .. }) {
                self.settle_later("releasing an idempotency key", |c| async move {
                    store::release(&c.pool, &c.tenant, &c.key, &c.hash).await
                });
            }
        }
    }

    /// Retries `settle` in the background (the tenant's scope) while the
    /// database is unreachable, for at most [`SETTLE_FOR`]: well inside the
    /// claim's lease, so that it never settles a claim another request has
    /// taken over since.
    fn settle_later<F, Fut>(&self, what: &'static str, settle: F)
    where
        F: Fn(Claim) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = Result<()>> + Send,
    {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let claim = Claim {
            pool: self.pool.clone(),
            tenant: self.tenant.clone(),
            key: self.key.clone(),
            hash: self.hash,
            armed: false,
        };
        let scope = meson_db::scope::Scope::Tenant(claim.tenant.clone());
        rt.spawn(meson_db::scope::run(scope, async move {
            let deadline = tokio::time::Instant::now() + SETTLE_FOR;
            let mut pause = std::time::Duration::from_millis(250);
            loop {
                tokio::time::sleep(pause).await;
                let copy = Claim {
                    pool: claim.pool.clone(),
                    tenant: claim.tenant.clone(),
                    key: claim.key.clone(),
                    hash: claim.hash,
                    armed: false,
                };
                match settle(copy).await {
                    Ok(()) => {
                        tracing::info!(key = %claim.key, "{what}: done once the database answered");
                        return;
                    }
                    Err(Error::Outage { .. }) if tokio::time::Instant::now() < deadline => {}
                    Err(e) => {
                        tracing::error!(error = %e, key = %claim.key, "{what}: given up");
                        return;
                    }
                }
                pause = (pause * 2).min(std::time::Duration::from_secs(5));
            }
        }));
    }
}

/// How long a claim's release or answer is retried while the database is
/// unreachable: half the claim's lease, which also bounds the request.
const SETTLE_FOR: std::time::Duration =
    std::time::Duration::from_secs((store::IN_FLIGHT_SECS / 2.0) as u64);

impl Drop for Claim {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let mut claim = Claim {
            pool: self.pool.clone(),
            tenant: self.tenant.clone(),
            key: std::mem::take(&mut self.key),
            hash: self.hash,
            armed: false,
        };
        // A spawned task starts outside the request's scope: give it the tenant's.
        let scope = meson_db::scope::Scope::Tenant(claim.tenant.clone());
        rt.spawn(meson_db::scope::run(scope, async move {
            claim.release_now().await
        }));
    }
}

/// Starts a background prune of expired keys when the last one is old enough.
fn maybe_prune(pool: &PgPool) {
    static NEXT_PRUNE: AtomicI64 = AtomicI64::new(0);
    let now = chrono::Utc::now().timestamp();
    let next = NEXT_PRUNE.load(Ordering::Relaxed);
    // Only the request that moves the deadline prunes.
    if now < next
        || NEXT_PRUNE
            .compare_exchange(
                next,
                now + PRUNE_EVERY_SECS,
                Ordering::Relaxed,
                Ordering::Relaxed,
            )
            .is_err()
    {
        return;
    }
    let pool = pool.clone();
    // Every tenant's expired keys.
    tokio::spawn(meson_db::scope::system(async move {
        match store::prune(&pool, PRUNE_BATCH).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(pruned = n, "pruned expired idempotency keys"),
            Err(e) => tracing::warn!(error = %e, "could not prune idempotency keys"),
        }
    }));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_fingerprints() {
        let key = IdempotencyKey::parse(b"a-key_1 with space").unwrap();
        assert_eq!(key.as_str(), "a-key_1 with space");
        assert!(IdempotencyKey::parse("k".repeat(256).as_bytes()).is_err());
        assert!(IdempotencyKey::parse(b"a\tb").is_err());
        assert!(IdempotencyKey::parse(b"").is_err());
        assert!(IdempotencyKey::parse("é".as_bytes()).is_err());

        let h = fingerprint("POST", "/v1/vms?x=1", b"{}");
        assert_eq!(h, fingerprint("POST", "/v1/vms?x=1", b"{}"));
        assert_ne!(h, fingerprint("POST", "/v1/vms?x=1", b"{ }"));
        assert_ne!(h, fingerprint("POST", "/v1/vms", b"{}"));
        assert_ne!(h, fingerprint("GRPC", "/v1/vms?x=1", b"{}"));
    }
}
