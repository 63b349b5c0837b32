//! Retry delays: exponential, capped, with full jitter so retries of many jobs
//! that failed together do not arrive together.

use rand::Rng;
use std::time::Duration;

/// Delay before attempt `attempt + 1`, given that `attempt` (1-based) just failed.
pub fn delay(attempt: i32, base: Duration, cap: Duration) -> Duration {
    let exp = attempt.clamp(1, 20) as u32 - 1;
    let ceiling = base.saturating_mul(1u32 << exp.min(16)).min(cap);
    // Half fixed, half random: never zero, never above the ceiling.
    let half = ceiling / 2;
    half + rand::thread_rng().gen_range(Duration::ZERO..=half)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_and_caps() {
        let base = Duration::from_millis(100);
        let cap = Duration::from_secs(10);
        for attempt in 1..30 {
            let d = delay(attempt, base, cap);
            assert!(d <= cap, "attempt {attempt}: {d:?}");
            let ceiling = base.saturating_mul(1 << (attempt.min(17) - 1)).min(cap);
            assert!(d >= ceiling / 2, "attempt {attempt}: {d:?}");
        }
    }
}
