//! Waiting on actions, as hcloud-go's `WaitForFunc`: the live stream when
//! meson offers it, else (or after it breaks) polls of at most 25 ids at a
//! time, every 500 ms for the first ten polls, then backing off ×1.5 to a
//! cap. An action already final is reported without a poll.

use crate::{Client, Error, Result};
use futures::StreamExt;
use meson_types as wire;
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;
use uuid::Uuid;

/// At most this many ids per poll or stream (meson's limit).
const BATCH: usize = 25;

/// Called with every state of an action the waiter sees.
pub type OnUpdate = Box<dyn FnMut(&wire::Action) + Send>;

/// How [`Client::wait_for_with`] waits.
pub struct WaitOpts {
    /// The first polls' interval.
    pub poll: Duration,
    /// The longest interval polls back off to.
    pub poll_cap: Duration,
    /// Use the Server-Sent Events stream first (falls back to polling).
    pub stream: bool,
    /// Return at the first action that fails (else wait for all).
    pub stop_on_failure: bool,
    /// Called with every state seen, the first and the final ones included.
    pub on_update: Option<OnUpdate>,
}

impl Default for WaitOpts {
    fn default() -> Self {
        WaitOpts {
            poll: Duration::from_millis(500),
            poll_cap: Duration::from_secs(5),
            stream: true,
            stop_on_failure: true,
            on_update: None,
        }
    }
}

impl std::fmt::Debug for WaitOpts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WaitOpts")
            .field("poll", &self.poll)
            .field("poll_cap", &self.poll_cap)
            .field("stream", &self.stream)
            .field("stop_on_failure", &self.stop_on_failure)
            .finish_non_exhaustive()
    }
}

/// The waiting's state: what is final, what still runs.
struct Waiting {
    done: BTreeMap<Uuid, wire::Action>,
    running: Vec<Uuid>,
}

impl Waiting {
    /// Takes in a state; `Err` when it failed and that ends the wait.
    fn seen(&mut self, a: wire::Action, opts: &mut WaitOpts) -> Result<()> {
        if let Some(f) = opts.on_update.as_mut() {
            f(&a);
        }
        if a.status == "running" || !self.running.contains(&a.id) {
            return Ok(());
        }
        self.running.retain(|id| *id != a.id);
        let failed = a.status == "error";
        self.done.insert(a.id, a.clone());
        if failed && opts.stop_on_failure {
            return Err(Error::ActionFailed {
                action: Box::new(a),
            });
        }
        Ok(())
    }
}

type Cancel<'a> = Pin<&'a mut (dyn Future<Output = ()> + Send)>;

impl Client {
    /// Waits until every action is final; fails at the first that fails
    /// ([`Error::ActionFailed`] names it), or with the ids that do not exist.
    pub async fn wait_for(&self, ids: &[Uuid]) -> Result<Vec<wire::Action>> {
        self.wait_for_with(ids, WaitOpts::default(), std::future::pending())
            .await
    }

    /// [`Client::wait_for`] as `opts` says, until `cancel` completes (then
    /// [`Error::Cancelled`] names the actions still running). Returns the
    /// final states in the order of `ids`.
    pub async fn wait_for_with(
        &self,
        ids: &[Uuid],
        mut opts: WaitOpts,
        cancel: impl Future<Output = ()> + Send,
    ) -> Result<Vec<wire::Action>> {
        let mut cancel = std::pin::pin!(cancel);
        let mut running: Vec<Uuid> = Vec::new();
        for id in ids {
            if !running.contains(id) {
                running.push(*id);
            }
        }
        let mut w = Waiting {
            done: BTreeMap::new(),
            running,
        };
        if opts.stream && !w.running.is_empty() {
            match self.watch(&mut w, &mut opts, cancel.as_mut()).await {
                Ok(()) => {}
                Err(e @ (Error::ActionFailed { .. } | Error::Cancelled { .. })) => return Err(e),
                // The stream is unavailable or broke: polls take over.
                Err(e) => tracing::debug!(error = %e, "action stream unavailable; polling"),
            }
        }
        self.poll(&mut w, &mut opts, cancel.as_mut()).await?;
        Ok(ids
            .iter()
            .filter_map(|id| w.done.get(id).cloned())
            .collect())
    }

    /// Follows the actions' streams (one per batch) until every one is
    /// final or a stream ends or fails.
    async fn watch(
        &self,
        w: &mut Waiting,
        opts: &mut WaitOpts,
        mut cancel: Cancel<'_>,
    ) -> Result<()> {
        let mut streams = Vec::new();
        for chunk in w.running.clone().chunks(BATCH) {
            let res = self.stream(chunk).await?;
            streams.push(sse_actions(res).boxed());
        }
        let mut events = futures::stream::select_all(streams);
        while !w.running.is_empty() {
            let next = tokio::select! {
                _ = &mut cancel => return Err(Error::Cancelled { running: w.running.clone() }),
                next = events.next() => next,
            };
            match next {
                Some(Ok(a)) => w.seen(a, opts)?,
                Some(Err(e)) => return Err(e),
                None => break,
            }
        }
        Ok(())
    }

    /// Polls the running actions in batches until every one is final.
    async fn poll(
        &self,
        w: &mut Waiting,
        opts: &mut WaitOpts,
        mut cancel: Cancel<'_>,
    ) -> Result<()> {
        let mut polls: u32 = 0;
        while !w.running.is_empty() {
            let mut asked = w.running.clone();
            asked.sort();
            for chunk in asked.chunks(BATCH) {
                let got = self.actions_get(chunk).await?;
                let missing: Vec<Uuid> = chunk
                    .iter()
                    .filter(|id| !got.iter().any(|a| a.id == **id))
                    .copied()
                    .collect();
                if !missing.is_empty() {
                    return Err(Error::ActionsNotFound(missing));
                }
                for a in got {
                    w.seen(a, opts)?;
                }
            }
            if w.running.is_empty() {
                break;
            }
            let delay = poll_delay(opts, polls);
            polls += 1;
            tokio::select! {
                _ = &mut cancel => return Err(Error::Cancelled { running: w.running.clone() }),
                _ = tokio::time::sleep(delay) => {}
            }
        }
        Ok(())
    }
}

/// The interval before poll `n + 1`: `poll` for ten polls, then ×1.5 each
/// up to `poll_cap` (hcloud's CLI does the same).
fn poll_delay(opts: &WaitOpts, n: u32) -> Duration {
    let grown = n.saturating_sub(9).min(32);
    opts.poll
        .mul_f64(1.5f64.powi(i32::try_from(grown).unwrap_or(32)))
        .min(opts.poll_cap.max(opts.poll))
}

/// The `action` events of a Server-Sent Events answer; an `error` event
/// (or a broken body) is an error.
fn sse_actions(res: reqwest::Response) -> impl futures::Stream<Item = Result<wire::Action>> {
    let body = res.bytes_stream();
    futures::stream::unfold((body, String::new()), |(mut body, mut buf)| async move {
        loop {
            if let Some(end) = buf.find("\n\n") {
                let block: String = buf.drain(..end + 2).collect();
                let (mut event, mut data) = ("message", String::new());
                for line in block.lines() {
                    if let Some(e) = line.strip_prefix("event:") {
                        event = match e.trim() {
                            "action" => "action",
                            "error" => "error",
                            _ => "other",
                        };
                    } else if let Some(d) = line.strip_prefix("data:") {
                        data.push_str(d.trim_start());
                    }
                }
                match event {
                    "action" => {
                        let item = serde_json::from_str::<wire::Action>(&data)
                            .map_err(|e| Error::Decode(format!("an action event: {e}")));
                        return Some((item, (body, buf)));
                    }
                    "error" => {
                        return Some((
                            Err(Error::Decode(format!("the stream failed: {data}"))),
                            (body, buf),
                        ));
                    }
                    // Keep-alive comments and other events.
                    _ => continue,
                }
            }
            match body.next().await {
                Some(Ok(bytes)) => buf.push_str(&String::from_utf8_lossy(&bytes)),
                Some(Err(e)) => return Some((Err(Error::Transport(e)), (body, buf))),
                None => return None,
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn polls_start_at_500_ms_and_back_off_to_the_cap() {
        let o = WaitOpts::default();
        let d: Vec<u128> = (0..16).map(|n| poll_delay(&o, n).as_millis()).collect();
        assert!(d[..10].iter().all(|x| *x == 500), "{d:?}");
        assert_eq!(d[10], 750);
        assert!(d.windows(2).all(|w| w[0] <= w[1]), "{d:?}");
        assert_eq!(*d.last().unwrap(), 5000);
    }
}
