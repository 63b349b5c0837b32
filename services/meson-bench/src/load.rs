//! A closed-loop HTTP load generator: N clients, each sending its next
//! request when the last one answered, over keep-alive loopback connections.

use crate::stats::Latency;
use anyhow::ensure;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub struct Load {
    pub per_sec: f64,
    pub latency: Latency,
}

/// The calls one or more closed loops measured: their latencies, and how
/// long the loops measured for.
#[derive(Default)]
pub struct Samples {
    latencies: Vec<Duration>,
    window: Duration,
}

impl Samples {
    /// Adds another loop's calls (a later slice of the same measurement).
    pub fn add(&mut self, other: Samples) {
        self.latencies.extend(other.latencies);
        self.window += other.window;
    }

    /// Calls per second over the whole window, and their latencies.
    pub fn load(mut self) -> anyhow::Result<Load> {
        ensure!(
            !self.latencies.is_empty(),
            "no request completed in the measured window"
        );
        Ok(Load {
            per_sec: self.latencies.len() as f64 / self.window.as_secs_f64(),
            latency: Latency::of(&mut self.latencies)?,
        })
    }
}

/// Runs `clients` loops of `call(client, seq)` for `warmup + window`;
/// counts the calls that started after the warm-up and ended in the
/// window. The first error stops the run and is returned: a load test that
/// saw a failed request reports no figure.
pub async fn closed_loop<F, Fut>(
    clients: usize,
    warmup: Duration,
    window: Duration,
    call: F,
) -> anyhow::Result<Load>
where
    F: Fn(usize, u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = anyhow::Result<()>> + Send + 'static,
{
    closed_loop_samples(clients, warmup, window, call)
        .await?
        .load()
}

/// [`closed_loop`], its calls kept apart, to be added to others'.
pub async fn closed_loop_samples<F, Fut>(
    clients: usize,
    warmup: Duration,
    window: Duration,
    call: F,
) -> anyhow::Result<Samples>
where
    F: Fn(usize, u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = anyhow::Result<()>> + Send + 'static,
{
    let call = Arc::new(call);
    let start = Instant::now();
    let measure_from = start + warmup;
    let end = measure_from + window;
    let mut tasks = tokio::task::JoinSet::new();
    for c in 0..clients {
        let call = call.clone();
        tasks.spawn(async move {
            let mut samples = Vec::new();
            let mut seq = 0u64;
            loop {
                let t = Instant::now();
                if t >= end {
                    break;
                }
                call(c, seq).await?;
                seq += 1;
                let done = Instant::now();
                if t >= measure_from && done <= end {
                    samples.push(done - t);
                }
            }
            Ok::<_, anyhow::Error>(samples)
        });
    }
    let mut latencies = Vec::new();
    while let Some(r) = tasks.join_next().await {
        match r? {
            Ok(s) => latencies.extend(s),
            Err(e) => {
                tasks.abort_all();
                return Err(e);
            }
        }
    }
    Ok(Samples { latencies, window })
}

/// A client for loopback load: a pool big enough for every client's
/// connection to stay open.
pub fn http_client(clients: usize) -> anyhow::Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .pool_max_idle_per_host(clients)
        .timeout(Duration::from_secs(30))
        .build()?)
}

/// Fails unless `r` has status `want`; returns its body.
pub async fn expect(r: reqwest::Response, want: u16) -> anyhow::Result<Vec<u8>> {
    let status = r.status().as_u16();
    let body = r.bytes().await?.to_vec();
    ensure!(
        status == want,
        "HTTP {status} where {want} was expected: {}",
        String::from_utf8_lossy(&body)
    );
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[tokio::test]
    async fn one_failed_request_fails_the_whole_load() {
        let seen = Arc::new(AtomicU64::new(0));
        let r = closed_loop(4, Duration::ZERO, Duration::from_secs(5), move |_, _| {
            let n = seen.fetch_add(1, Ordering::SeqCst);
            async move {
                anyhow::ensure!(n < 20, "HTTP 500 where 201 was expected");
                Ok(())
            }
        })
        .await;
        let e = r
            .err()
            .expect("a load with a failed request reports no figure");
        assert!(e.to_string().contains("HTTP 500"), "{e}");
    }
}
