//! Actions: read one or many, list a VM's, and watch them change live.

use super::{App, Page};
use crate::auth::Principal;
use meson_core::action::{Action, ActionStatus, ResourceType};
use meson_core::id::IdRef;
use meson_core::{ActionId, Error, Result, TenantId};
use meson_db::PgPool;
use meson_db::actions::{
    ActionChange, ActionListener, ActionNotice, ActionScope, ActionSort, ActionSortField,
};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{broadcast, mpsc, oneshot, watch};

/// What a stream is answered while the action feed has no listener: the
/// database is unreachable (the feed reconnects on its own), so the client
/// is told when to retry, as for any outage.
fn feed_unavailable() -> Error {
    Error::Outage {
        what: meson_db::outage::WHAT,
        retry_after: 1,
        source: None,
    }
}

/// How long an open stream waits for the database to answer again (a
/// failover) before it ends with an error event.
const REREAD_PATIENCE: Duration = Duration::from_secs(60);

/// How long the action feed stays registered as watching once its last
/// stream closed: streams that come and go keep it registered.
const UNWATCHED_PAUSE: Duration = Duration::from_secs(10);

/// Hetzner's limit: more ids per request may be silently dropped there; here they are refused.
pub const MAX_IDS: usize = 25;

/// A VM's actions, newest first, unless the caller sorts otherwise.
const VM_ACTIONS_DEFAULT_SORT: [ActionSort; 2] = [
    ActionSort {
        field: ActionSortField::Started,
        descending: true,
    },
    ActionSort {
        field: ActionSortField::Id,
        descending: true,
    },
];

/// One page of a VM's actions and how many there are in all.
pub struct ActionPage {
    pub actions: Vec<Action>,
    pub total: u64,
}

/// Checks a request's ids (present, at most [`MAX_IDS`]) and drops repeats,
/// keeping the caller's order.
fn distinct_ids<T: PartialEq + Clone>(ids: &[T]) -> Result<Vec<T>> {
    if ids.is_empty() {
        return Err(Error::invalid(
            "id",
            "at least one id is required, e.g. ?id=<action id>",
        ));
    }
    if ids.len() > MAX_IDS {
        return Err(Error::invalid(
            "id",
            format!("at most {MAX_IDS} ids per request"),
        ));
    }
    let mut out: Vec<T> = Vec::with_capacity(ids.len());
    for id in ids {
        if !out.contains(id) {
            out.push(id.clone());
        }
    }
    Ok(out)
}

impl App {
    pub async fn action_get(&self, p: &Principal, id: ActionId) -> Result<Action> {
        meson_db::actions::get(&self.pool, Some(&p.tenant), id).await
    }

    /// The caller's actions among `ids` whose status is in `status` (empty: any),
    /// ordered by `sort` then id; unknown ids are skipped, as Hetzner does.
    /// An abbreviated id stands for every one of the caller's actions it
    /// matches, so a client can tell a unique abbreviation from an
    /// ambiguous one.
    pub async fn action_list(
        &self,
        p: &Principal,
        ids: &[IdRef],
        status: &[ActionStatus],
        sort: &[ActionSort],
    ) -> Result<Vec<Action>> {
        let ids = self.expand_ids(p, ids).await?;
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let limit = i64::try_from(ids.len()).unwrap_or(i64::MAX);
        meson_db::actions::list(
            &self.pool,
            &p.tenant,
            ActionScope::Ids(&ids),
            status,
            sort,
            limit,
            0,
        )
        .await
    }

    /// The ids a request names: whole ones as given, abbreviations expanded
    /// into the caller's actions they match; repeats dropped, the caller's
    /// order kept, at most [`MAX_IDS`] in all.
    async fn expand_ids(&self, p: &Principal, refs: &[IdRef]) -> Result<Vec<ActionId>> {
        let mut whole = Vec::with_capacity(refs.len());
        for r in distinct_ids(refs)? {
            match r {
                IdRef::Full(id) => whole.push(ActionId(id)),
                IdRef::Abbrev(hex) => {
                    let limit = i64::try_from(MAX_IDS + 1).unwrap_or(i64::MAX);
                    let found =
                        meson_db::actions::abbreviated(&self.pool, &p.tenant, &hex, limit).await?;
                    if found.len() > MAX_IDS {
                        return Err(Error::invalid(
                            "id",
                            format!(
                                "'{hex}' matches more than {MAX_IDS} actions: give more of \
                                 the id's digits"
                            ),
                        ));
                    }
                    whole.extend(found);
                }
            }
        }
        if whole.is_empty() {
            // Abbreviations that fit none of the caller's actions: skipped,
            // as unknown ids are.
            return Ok(whole);
        }
        distinct_ids(&whole)
    }

    /// A page of the actions that touched one of the caller's resources
    /// (deleted ones included: their history stays), newest first by default.
    pub async fn action_list_for(
        &self,
        p: &Principal,
        kind: ResourceType,
        id: uuid::Uuid,
        status: &[ActionStatus],
        sort: &[ActionSort],
        page: &Page,
    ) -> Result<ActionPage> {
        super::list::by_number(page, "a resource's actions")?;
        if !meson_db::actions::resource_known(&self.pool, &p.tenant, kind, id).await? {
            return Err(Error::not_found(kind.as_str(), id));
        }
        let sort = if sort.is_empty() {
            &VM_ACTIONS_DEFAULT_SORT[..]
        } else {
            sort
        };
        let scope = ActionScope::Resource(kind, id);
        let actions = meson_db::actions::list(
            &self.pool,
            &p.tenant,
            scope,
            status,
            sort,
            i64::from(page.per_page),
            page.offset(),
        )
        .await?;
        let total = meson_db::actions::count(&self.pool, &p.tenant, scope, status).await?;
        Ok(ActionPage {
            actions,
            total: u64::try_from(total).unwrap_or(0),
        })
    }

    /// Starts watching the caller's actions `ids`; every one must exist.
    ///
    /// `notices` must come from the action feed *before* this call: the
    /// current states are read after it, so a change committed in between is
    /// either in what is read or among the notices (or both: then it is
    /// recognised as not newer and skipped). Nothing falls in the gap.
    ///
    /// `resume`: the [`ActionWatch::position`] a client last received
    /// (SSE's `Last-Event-ID`), when it reconnects to the same ids: states
    /// it already has are not sent again. One that does not fit the ids is
    /// ignored (every current state is sent).
    pub async fn action_watch(
        &self,
        p: &Principal,
        ids: &[ActionId],
        notices: broadcast::Receiver<Arc<ActionNotice>>,
        resume: Option<&str>,
    ) -> Result<ActionWatch> {
        let ids = distinct_ids(ids)?;
        let mut found = meson_db::actions::get_many(&self.pool, Some(&p.tenant), &ids).await?;
        let mut sent = Vec::with_capacity(ids.len());
        for id in &ids {
            let at = found
                .iter()
                .position(|a| a.id == *id)
                .ok_or_else(|| Error::not_found("action", id))?;
            sent.push(found.swap_remove(at));
        }
        let delivered = resume
            .and_then(|r| parse_position(r, sent.len()))
            .unwrap_or_else(|| vec![None; sent.len()]);
        // What the client has, it is not sent again (states only advance).
        let queue = sent
            .iter()
            .zip(&delivered)
            .filter(|(a, had)| had.is_none_or(|had| state_rank(a.status, a.progress) > had))
            .map(|(a, _)| a.clone())
            .collect();
        Ok(ActionWatch {
            pool: self.pool.clone(),
            tenant: p.tenant.clone(),
            notices,
            delivered,
            states: WatchedStates { queue, sent },
        })
    }

    /// Runs this process's one action listener until `shutdown`: every
    /// notice goes to `feed`, in commit order. After (re)connecting it sends a
    /// `Gap`, so that watchers re-read what they may have missed while no
    /// connection was listening.
    pub async fn action_feed_run(
        &self,
        feed: broadcast::Sender<Arc<ActionNotice>>,
        mut watching: mpsc::Receiver<oneshot::Sender<Result<()>>>,
        mut shutdown: watch::Receiver<bool>,
    ) {
        const FIRST_RETRY: Duration = Duration::from_millis(100);
        const MAX_RETRY: Duration = Duration::from_secs(10);
        let mut retry = FIRST_RETRY;
        loop {
            let connected = tokio::select! {
                r = ActionListener::connect(&self.pool) => r,
                _ = shutdown.wait_for(|stop| *stop) => return,
            };
            match connected {
                Ok(mut listener) => {
                    retry = FIRST_RETRY;
                    match self
                        .feed_while_connected(&mut listener, &feed, &mut watching, &mut shutdown)
                        .await
                    {
                        Ok(()) => return,
                        Err(e) => tracing::warn!(error = ?e, "action listener lost; reconnecting"),
                    }
                }
                Err(e) => {
                    tracing::warn!(error = ?e, retry_ms = retry.as_millis() as u64, "action listener cannot connect");
                }
            }
            let wait = tokio::time::sleep(retry);
            tokio::pin!(wait);
            loop {
                tokio::select! {
                    () = &mut wait => break,
                    Some(reply) = watching.recv() => {
                        let _ = reply.send(Err(feed_unavailable()));
                    }
                    _ = shutdown.wait_for(|stop| *stop) => return,
                }
            }
            retry = (retry * 2).min(MAX_RETRY);
        }
    }

    /// Feeds `feed` from a connected `listener` until shutdown (`Ok`) or
    /// until the listener fails. The listener is registered while streams
    /// are open, and unregistered once none was for [`UNWATCHED_PAUSE`].
    async fn feed_while_connected(
        &self,
        listener: &mut ActionListener,
        feed: &broadcast::Sender<Arc<ActionNotice>>,
        watching: &mut mpsc::Receiver<oneshot::Sender<Result<()>>>,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Result<()> {
        if feed.receiver_count() == 0 {
            listener.pause().await?;
        }
        // Streams re-read what they watch: changes may have been missed
        // while the listener was away. No receivers is not an error.
        let _ = feed.send(Arc::new(ActionNotice::Gap));
        let mut tick = tokio::time::interval(UNWATCHED_PAUSE / 4);
        let mut unwatched_since: Option<tokio::time::Instant> = None;
        enum Next {
            Notice(Result<ActionNotice>),
            Watching(oneshot::Sender<Result<()>>),
            Tick,
            Stop,
        }
        loop {
            let next = tokio::select! {
                n = listener.recv() => Next::Notice(n),
                Some(reply) = watching.recv() => Next::Watching(reply),
                _ = tick.tick() => Next::Tick,
                _ = shutdown.wait_for(|stop| *stop) => Next::Stop,
            };
            match next {
                Next::Notice(n) => {
                    let _ = feed.send(Arc::new(n?));
                }
                Next::Watching(reply) => {
                    unwatched_since = None;
                    if !listener.registered()
                        && let Err(e) = listener.resume().await
                    {
                        let _ = reply.send(Err(feed_unavailable()));
                        return Err(e);
                    }
                    let _ = reply.send(Ok(()));
                }
                Next::Tick => {
                    if !listener.registered() || feed.receiver_count() > 0 {
                        unwatched_since = None;
                    } else if let Some(since) = unwatched_since {
                        if since.elapsed() >= UNWATCHED_PAUSE {
                            listener.pause().await?;
                            unwatched_since = None;
                        }
                    } else {
                        unwatched_since = Some(tokio::time::Instant::now());
                    }
                }
                Next::Stop => return Ok(()),
            }
        }
    }
}

/// A live view of some actions: their current states, then each change, in
/// commit order, until every one is final.
pub struct ActionWatch {
    pool: PgPool,
    tenant: TenantId,
    notices: broadcast::Receiver<Arc<ActionNotice>>,
    states: WatchedStates,
    /// The rank of the last state returned of each watched action.
    delivered: Vec<Option<(bool, u8)>>,
}

impl ActionWatch {
    /// The next state to send, or `None` once every watched action is final
    /// and its final state was returned.
    pub async fn next(&mut self) -> Result<Option<Action>> {
        loop {
            if let Some(a) = self.states.queue.pop_front() {
                if let Some(at) = self.states.sent.iter().position(|s| s.id == a.id) {
                    self.delivered[at] = Some(state_rank(a.status, a.progress));
                }
                return Ok(Some(a));
            }
            if self.states.all_final() {
                return Ok(None);
            }
            match self.notices.recv().await {
                Ok(notice) => match &*notice {
                    ActionNotice::Changed(c) => self.states.apply_change(&self.tenant, c),
                    ActionNotice::Reread(id) if self.states.watches(*id) => {
                        self.reread(&[*id]).await?
                    }
                    ActionNotice::Reread(_) => {}
                    ActionNotice::Gap => self.reread_all().await?,
                },
                Err(broadcast::error::RecvError::Lagged(missed)) => {
                    // Some changes are gone for good; the table still has the
                    // latest state, which is what matters from here on.
                    tracing::debug!(missed, "action watcher lagged; re-reading its actions");
                    self.reread_all().await?;
                }
                Err(broadcast::error::RecvError::Closed) => {
                    return Err(Error::Unavailable {
                        message: "the action feed stopped".into(),
                    });
                }
            }
        }
    }

    /// What the client has been sent: for each watched action, in order,
    /// the rank of its last state (`37` running at 37%, `f100` final at
    /// 100%, `-` nothing yet), joined by dots. SSE sends it as each event's
    /// id, and a reconnecting client hands it back as `Last-Event-ID`.
    pub fn position(&self) -> String {
        format_position(&self.delivered)
    }

    /// True when the client has every state there will be: each watched
    /// action is final, and it was sent (now or before it reconnected).
    pub fn finished(&self) -> bool {
        self.states.queue.is_empty() && self.states.all_final()
    }

    async fn reread_all(&mut self) -> Result<()> {
        let ids: Vec<ActionId> = self.states.sent.iter().map(|a| a.id).collect();
        self.reread(&ids).await
    }

    /// Re-reads `ids`; while the database is unreachable (the feed lost
    /// its connection for the same reason), tries again for up to
    /// [`REREAD_PATIENCE`], so that an open stream rides out a failover.
    async fn reread(&mut self, ids: &[ActionId]) -> Result<()> {
        let deadline = tokio::time::Instant::now() + REREAD_PATIENCE;
        let mut pause = Duration::from_millis(100);
        loop {
            // A stream's body is polled outside the request's scope: take it again.
            let scope = meson_db::scope::Scope::Tenant(self.tenant.clone());
            let read = meson_db::actions::get_many(&self.pool, Some(&self.tenant), ids);
            match meson_db::scope::run(scope, read).await {
                Ok(actions) => {
                    for a in actions {
                        self.states.apply_state(a);
                    }
                    return Ok(());
                }
                Err(Error::Outage { .. }) if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(2));
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// The last state sent of each watched action, and the states still to send.
struct WatchedStates {
    sent: Vec<Action>,
    queue: VecDeque<Action>,
}

/// [`ActionWatch::position`]'s text.
fn format_position(delivered: &[Option<(bool, u8)>]) -> String {
    let ranks: Vec<String> = delivered
        .iter()
        .map(|d| match d {
            None => "-".to_owned(),
            Some((true, p)) => format!("f{p}"),
            Some((false, p)) => p.to_string(),
        })
        .collect();
    ranks.join(".")
}

/// A [`ActionWatch::position`] for `n` watched actions; `None` if it is not
/// one.
fn parse_position(raw: &str, n: usize) -> Option<Vec<Option<(bool, u8)>>> {
    let ranks: Vec<Option<(bool, u8)>> = raw
        .split('.')
        .map(|r| match r {
            "-" => Some(None),
            _ => {
                let (fin, digits) = match r.strip_prefix('f') {
                    Some(d) => (true, d),
                    None => (false, r),
                };
                if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                let p: u8 = digits.parse().ok()?;
                (p <= 100).then_some(Some((fin, p)))
            }
        })
        .collect::<Option<_>>()?;
    (ranks.len() == n).then_some(ranks)
}

/// Orders an action's states. The table guarantees that progress never goes
/// back and that a final state never changes, so every real change raises
/// this, and a notice that does not is one already sent (or read).
fn state_rank(status: ActionStatus, progress: u8) -> (bool, u8) {
    (status != ActionStatus::Running, progress)
}

impl WatchedStates {
    fn watches(&self, id: ActionId) -> bool {
        self.sent.iter().any(|a| a.id == id)
    }

    fn all_final(&self) -> bool {
        self.sent.iter().all(|a| a.status != ActionStatus::Running)
    }

    /// Queues a watched action's change if it is newer than what was sent.
    fn apply_change(&mut self, tenant: &TenantId, c: &ActionChange) {
        let Some(a) = self.sent.iter_mut().find(|a| a.id == c.id) else {
            return;
        };
        // Ids were checked against the tenant at subscription; this keeps it so
        // whatever the feed carries.
        if &c.tenant != tenant
            || state_rank(c.status, c.progress) <= state_rank(a.status, a.progress)
        {
            return;
        }
        a.status = c.status;
        a.progress = c.progress;
        a.finished = c.finished;
        a.error = c.error.clone();
        self.queue.push_back(a.clone());
    }

    /// Queues a state read from the table if it is newer than what was sent.
    fn apply_state(&mut self, fresh: Action) {
        let Some(a) = self.sent.iter_mut().find(|a| a.id == fresh.id) else {
            return;
        };
        if state_rank(fresh.status, fresh.progress) > state_rank(a.status, a.progress) {
            *a = fresh;
            self.queue.push_back(a.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use meson_core::action::ActionFailure;

    fn action(progress: u8) -> Action {
        Action {
            id: ActionId::new(),
            tenant: TenantId("t".into()),
            command: "create_vm".into(),
            status: ActionStatus::Running,
            progress,
            started: chrono::Utc::now(),
            finished: None,
            resources: vec![],
            error: None,
        }
    }

    fn change(a: &Action, status: ActionStatus, progress: u8) -> ActionChange {
        ActionChange {
            id: a.id,
            tenant: a.tenant.clone(),
            status,
            progress,
            finished: (status != ActionStatus::Running).then(chrono::Utc::now),
            error: (status == ActionStatus::Error).then(|| ActionFailure {
                code: "boom".into(),
                message: "it broke".into(),
            }),
        }
    }

    fn progress_queued(s: &mut WatchedStates) -> Vec<(ActionStatus, u8)> {
        s.queue.drain(..).map(|a| (a.status, a.progress)).collect()
    }

    #[test]
    fn changes_are_queued_once_in_order_and_stale_ones_skipped() {
        let a = action(20);
        let t = a.tenant.clone();
        let mut s = WatchedStates {
            sent: vec![a.clone()],
            queue: VecDeque::new(),
        };
        s.apply_change(&t, &change(&a, ActionStatus::Running, 10)); // before the read
        s.apply_change(&t, &change(&a, ActionStatus::Running, 20)); // the read itself
        s.apply_change(&t, &change(&a, ActionStatus::Running, 30));
        s.apply_change(&t, &change(&a, ActionStatus::Running, 40));
        assert!(!s.all_final());
        s.apply_change(&t, &change(&a, ActionStatus::Error, 40));
        s.apply_change(&t, &change(&a, ActionStatus::Error, 40));
        assert_eq!(
            progress_queued(&mut s),
            [
                (ActionStatus::Running, 30),
                (ActionStatus::Running, 40),
                (ActionStatus::Error, 40)
            ]
        );
        assert!(s.all_final());
        assert_eq!(
            s.sent[0].error.as_ref().map(|e| e.code.as_str()),
            Some("boom")
        );
    }

    #[test]
    fn other_tenants_and_unwatched_actions_are_ignored() {
        let a = action(0);
        let mut s = WatchedStates {
            sent: vec![a.clone()],
            queue: VecDeque::new(),
        };
        let mut foreign = change(&a, ActionStatus::Running, 50);
        foreign.tenant = TenantId("intruder".into());
        s.apply_change(&a.tenant, &foreign);
        s.apply_change(&a.tenant, &change(&action(0), ActionStatus::Running, 50));
        assert!(s.queue.is_empty());
        assert_eq!(s.sent[0].progress, 0);
    }

    #[test]
    fn rereads_queue_only_newer_states() {
        let a = action(30);
        let mut s = WatchedStates {
            sent: vec![a.clone()],
            queue: VecDeque::new(),
        };
        s.apply_state(a.clone());
        assert!(s.queue.is_empty());
        let mut done = a.clone();
        done.status = ActionStatus::Success;
        done.progress = 100;
        s.apply_state(done);
        assert_eq!(progress_queued(&mut s), [(ActionStatus::Success, 100)]);
    }

    #[test]
    fn a_position_reads_back_as_written_and_anything_else_is_ignored() {
        let ranks = vec![None, Some((false, 0)), Some((false, 37)), Some((true, 100))];
        let text = format_position(&ranks);
        assert_eq!(text, "-.0.37.f100");
        assert_eq!(parse_position(&text, 4), Some(ranks));
        // Another number of ids, or anything but ranks, is no position.
        for bad in [
            "-.0.37",
            "-.0.37.f100.1",
            "",
            "x.0.1.2",
            "101.0.1.2",
            "f.0.1.2",
            "+1.0.1.2",
            "1..2.3",
            "ff1.0.1.2",
            "1 .0.1.2",
            "\u{0}.0.1.2",
            "99999999999.0.1.2",
        ] {
            assert_eq!(parse_position(bad, 4), None, "{bad:?}");
        }
    }

    #[test]
    fn ids_are_required_bounded_and_deduplicated() {
        assert!(distinct_ids::<ActionId>(&[]).is_err());
        let many: Vec<ActionId> = (0..=MAX_IDS).map(|_| ActionId::new()).collect();
        assert!(distinct_ids(&many).is_err());
        let (a, b) = (ActionId::new(), ActionId::new());
        assert_eq!(distinct_ids(&[b, a, b]).expect("valid"), [b, a]);
    }
}
