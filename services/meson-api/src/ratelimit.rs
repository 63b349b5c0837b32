//! Per-tenant rate limits: a token bucket (GCRA) per tenant and budget.
//!
//! Every authenticated answer carries `RateLimit-Limit` (the bucket's size),
//! `RateLimit-Remaining` and `RateLimit-Reset` (seconds until the bucket is
//! full again); a request over the limit answers `429 rate_limit_exceeded`
//! with `Retry-After`. Reading actions draws on a separate, larger budget
//! ([`Budget::Polling`]) so that clients waiting for their actions never
//! starve the calls that do work. Buckets live in each API replica's memory:
//! with N replicas behind a balancer a tenant gets up to N times the budget.

use crate::authz::Budget;
use axum::http::{HeaderMap, HeaderName, HeaderValue};
use governor::clock::{Clock, DefaultClock};
use governor::middleware::StateInformationMiddleware;
use governor::state::keyed::DefaultKeyedStateStore;
use governor::{Quota, RateLimiter};
use meson_core::TenantId;
use std::num::NonZeroU32;
use std::time::Duration;

pub static RATELIMIT_LIMIT: HeaderName = HeaderName::from_static("ratelimit-limit");
pub static RATELIMIT_REMAINING: HeaderName = HeaderName::from_static("ratelimit-remaining");
pub static RATELIMIT_RESET: HeaderName = HeaderName::from_static("ratelimit-reset");

/// Requests per minute per tenant; a tenant may burst a whole minute's worth.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateLimitConfig {
    pub api_per_minute: u32,
    pub polling_per_minute: u32,
}

impl Default for RateLimitConfig {
    /// Hetzner allows 3600 requests an hour; meson allows as many a minute
    /// less bursty: 600 a minute for work, 3000 for reading actions.
    fn default() -> Self {
        RateLimitConfig {
            api_per_minute: 600,
            polling_per_minute: 3000,
        }
    }
}

type Keyed = RateLimiter<
    TenantId,
    DefaultKeyedStateStore<TenantId>,
    DefaultClock,
    StateInformationMiddleware,
>;

struct Bucket {
    limiter: Keyed,
    limit: u32,
    /// How long one request takes to come back.
    interval: Duration,
}

impl Bucket {
    fn new(per_minute: u32) -> Bucket {
        let limit = NonZeroU32::new(per_minute).unwrap_or(NonZeroU32::MIN);
        let quota = Quota::per_minute(limit);
        Bucket {
            limiter: RateLimiter::keyed(quota).with_middleware::<StateInformationMiddleware>(),
            limit: limit.get(),
            interval: quota.replenish_interval(),
        }
    }

    fn check(&self, tenant: &TenantId) -> Decision {
        match self.limiter.check_key(tenant) {
            Ok(state) => {
                let remaining = state.remaining_burst_capacity();
                Decision {
                    limit: self.limit,
                    remaining,
                    reset: ceil_secs(self.interval * (self.limit - remaining)),
                    retry_after: None,
                }
            }
            Err(not_until) => {
                let wait = not_until.wait_time_from(self.limiter.clock().now());
                Decision {
                    limit: self.limit,
                    remaining: 0,
                    reset: ceil_secs(wait + self.interval * (self.limit - 1)),
                    retry_after: Some(ceil_secs(wait).max(1)),
                }
            }
        }
    }
}

fn ceil_secs(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

/// Every tenant's buckets, for both budgets.
pub struct RateLimits {
    api: Bucket,
    polling: Bucket,
}

/// The outcome of one request's check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    pub limit: u32,
    pub remaining: u32,
    /// Seconds until the bucket is full again.
    pub reset: u64,
    /// Set when the request is refused: seconds until it may be retried.
    pub retry_after: Option<u64>,
}

impl RateLimits {
    pub fn new(cfg: RateLimitConfig) -> RateLimits {
        RateLimits {
            api: Bucket::new(cfg.api_per_minute),
            polling: Bucket::new(cfg.polling_per_minute),
        }
    }

    /// Takes one request from `tenant`'s `budget`.
    pub fn check(&self, tenant: &TenantId, budget: Budget) -> Decision {
        match budget {
            Budget::Api => self.api.check(tenant),
            Budget::Polling => self.polling.check(tenant),
        }
    }

    /// Forgets tenants whose buckets are full again (call now and then:
    /// the maps otherwise keep every tenant ever seen).
    pub fn forget_idle(&self) {
        self.api.limiter.retain_recent();
        self.polling.limiter.retain_recent();
    }
}

impl Decision {
    /// Puts the `RateLimit-*` headers (and `Retry-After` when refused) on an answer.
    pub fn apply(&self, headers: &mut HeaderMap) {
        headers.insert(&RATELIMIT_LIMIT, HeaderValue::from(self.limit));
        headers.insert(&RATELIMIT_REMAINING, HeaderValue::from(self.remaining));
        headers.insert(&RATELIMIT_RESET, HeaderValue::from(self.reset));
        if let Some(s) = self.retry_after {
            headers.insert(axum::http::header::RETRY_AFTER, HeaderValue::from(s));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenant_spends_its_own_budget_and_polling_has_another() {
        let limits = RateLimits::new(RateLimitConfig {
            api_per_minute: 3,
            polling_per_minute: 5,
        });
        let a = TenantId("a".into());
        let b = TenantId("b".into());
        let seen: Vec<u32> = (0..3)
            .map(|_| limits.check(&a, Budget::Api).remaining)
            .collect();
        assert_eq!(seen, [2, 1, 0]);
        let refused = limits.check(&a, Budget::Api);
        assert_eq!((refused.limit, refused.remaining), (3, 0));
        // One request comes back every 20 s.
        assert!(matches!(refused.retry_after, Some(1..=20)), "{refused:?}");
        assert!(refused.reset >= 40 && refused.reset <= 60, "{refused:?}");
        // Another tenant, and the polling budget, are untouched.
        assert_eq!(limits.check(&b, Budget::Api).remaining, 2);
        let poll = limits.check(&a, Budget::Polling);
        assert_eq!((poll.limit, poll.remaining, poll.retry_after), (5, 4, None));
        assert_eq!(poll.reset, 12);
    }

    #[test]
    fn headers_say_what_is_left() {
        let mut h = HeaderMap::new();
        Decision {
            limit: 10,
            remaining: 0,
            reset: 7,
            retry_after: Some(2),
        }
        .apply(&mut h);
        assert_eq!(h["ratelimit-limit"], "10");
        assert_eq!(h["ratelimit-remaining"], "0");
        assert_eq!(h["ratelimit-reset"], "7");
        assert_eq!(h["retry-after"], "2");
    }
}
