//! Actions and the resources they touch.

use crate::{DbResult, Tx, corrupt};
use chrono::{DateTime, Utc};
use meson_core::action::{Action, ActionFailure, ActionStatus, ResourceType};
use meson_core::{ActionId, Error, TenantId};
use serde::Deserialize;
use sqlx::PgPool;
use sqlx::postgres::PgListener;
use uuid::Uuid;

struct ActionRow {
    id: Uuid,
    tenant_id: String,
    command: String,
    status: String,
    progress: i16,
    started: DateTime<Utc>,
    finished: Option<DateTime<Utc>>,
    error_code: Option<String>,
    error_message: Option<String>,
    resource_types: Vec<String>,
    resource_ids: Vec<Uuid>,
}

impl TryFrom<ActionRow> for Action {
    type Error = Error;
    fn try_from(r: ActionRow) -> Result<Self, Error> {
        let resources = r
            .resource_types
            .iter()
            .zip(r.resource_ids)
            .map(|(t, id)| {
                ResourceType::parse(t)
                    .map(|t| (t, id))
                    .ok_or_else(|| corrupt("resource type", t))
            })
            .collect::<Result<_, _>>()?;
        Ok(Action {
            id: ActionId(r.id),
            tenant: TenantId(r.tenant_id),
            command: r.command,
            status: ActionStatus::parse(&r.status)
                .ok_or_else(|| corrupt("action status", &r.status))?,
            progress: u8::try_from(r.progress).map_err(|_| corrupt("progress", r.progress))?,
            started: r.started,
            finished: r.finished,
            resources,
            error: r.error_code.map(|code| ActionFailure {
                code,
                message: r.error_message.unwrap_or_default(),
            }),
        })
    }
}

/// Inserts a running action touching `resources`.
pub async fn insert(tx: &mut Tx<'_>, a: &Action) -> Result<(), Error> {
    sqlx::query!(
        r#"insert into actions (id, tenant_id, command, status, progress, started)
           values ($1, $2, $3, 'running', 0, $4)"#,
        a.id.0,
        a.tenant.as_str(),
        a.command,
        a.started,
    )
    .execute(&mut **tx)
    .await
    .ctx("inserting an action")?;
    let types: Vec<&str> = a.resources.iter().map(|(t, _)| t.as_str()).collect();
    let ids: Vec<Uuid> = a.resources.iter().map(|(_, id)| *id).collect();
    sqlx::query!(
        r#"insert into action_resources (action_id, resource_type, resource_id)
           select $1, t, id from unnest($2::text[], $3::uuid[]) as r(t, id)"#,
        a.id.0,
        &types as &[&str],
        &ids,
    )
    .execute(&mut **tx)
    .await
    .ctx("inserting action resources")?;
    Ok(())
}

/// Actions by id (`tenant` = None: any tenant), in id order; unknown ids are skipped.
pub async fn get_many(
    pool: &PgPool,
    tenant: Option<&TenantId>,
    ids: &[ActionId],
) -> Result<Vec<Action>, Error> {
    let ids: Vec<Uuid> = ids.iter().map(|a| a.0).collect();
    sqlx::query_as!(
        ActionRow,
        r#"select a.id, a.tenant_id, a.command, a.status, a.progress, a.started, a.finished,
                  a.error_code, a.error_message,
                  coalesce(array_agg(r.resource_type order by r.resource_type, r.resource_id)
                           filter (where r.action_id is not null), '{}') as "resource_types!",
                  coalesce(array_agg(r.resource_id order by r.resource_type, r.resource_id)
                           filter (where r.action_id is not null), '{}') as "resource_ids!"
           from actions a left join action_resources r on r.action_id = a.id
           where a.id = any($1) and ($2::text is null or a.tenant_id = $2)
           group by a.id order by a.id"#,
        &ids,
        tenant.map(TenantId::as_str),
    )
    .fetch_all(pool)
    .await
    .ctx("fetching actions")?
    .into_iter()
    .map(Action::try_from)
    .collect()
}

/// A field actions can be sorted by (`sort=field[:asc|:desc]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActionSortField {
    Id,
    Command,
    Status,
    Progress,
    Started,
    Finished,
}

impl ActionSortField {
    pub const ALL: [ActionSortField; 6] = [
        ActionSortField::Id,
        ActionSortField::Command,
        ActionSortField::Status,
        ActionSortField::Progress,
        ActionSortField::Started,
        ActionSortField::Finished,
    ];

    /// The name in the query string, and the name the list query's `case` expects.
    pub fn as_str(self) -> &'static str {
        match self {
            ActionSortField::Id => "id",
            ActionSortField::Command => "command",
            ActionSortField::Status => "status",
            ActionSortField::Progress => "progress",
            ActionSortField::Started => "started",
            ActionSortField::Finished => "finished",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|f| f.as_str() == s)
    }
}

/// The ids of a tenant's actions that an abbreviation (lowercase hex
/// digits, at least 8) starts or ends, at most `limit` of them, in id order.
/// Both ends are read from an index: the prefix as a range of the
/// `(tenant_id, id)` one, the last 8 digits from `actions_tenant_tail`.
pub async fn abbreviated(
    pool: &PgPool,
    tenant: &TenantId,
    hex: &str,
    limit: i64,
) -> Result<Vec<ActionId>, Error> {
    let (lo, hi) = meson_core::id::IdRef::prefix_range(hex);
    let tail = &hex[hex.len().saturating_sub(8)..];
    let ids = sqlx::query_scalar!(
        r#"select id as "id!" from (
               select id from actions where tenant_id = $1 and id between $2 and $3
               union
               select id from actions
               where tenant_id = $1 and right(id::text, 8) = $4
                 and replace(id::text, '-', '') like '%' || $5
           ) m
           order by id
           limit $6"#,
        tenant.0,
        lo,
        hi,
        tail,
        hex,
        limit
    )
    .fetch_all(pool)
    .await
    .ctx("finding actions by an abbreviated id")?;
    Ok(ids.into_iter().map(ActionId).collect())
}

/// One sort key of a list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ActionSort {
    pub field: ActionSortField,
    pub descending: bool,
}

/// Which of a tenant's actions a list covers.
#[derive(Clone, Copy, Debug)]
pub enum ActionScope<'a> {
    /// The actions with these ids.
    Ids(&'a [ActionId]),
    /// The actions touching this resource.
    Resource(ResourceType, Uuid),
}

impl ActionScope<'_> {
    /// The scope as the list queries' parameters: ids, resource type, resource id.
    fn binds(&self) -> (Option<Vec<Uuid>>, Option<&'static str>, Option<Uuid>) {
        match self {
            ActionScope::Ids(ids) => (Some(ids.iter().map(|a| a.0).collect()), None, None),
            ActionScope::Resource(kind, id) => (None, Some(kind.as_str()), Some(*id)),
        }
    }
}

/// A page of a tenant's actions in `scope` whose status is one of `status`
/// (empty: any), ordered by `sort` and then by id.
pub async fn list(
    pool: &PgPool,
    tenant: &TenantId,
    scope: ActionScope<'_>,
    status: &[ActionStatus],
    sort: &[ActionSort],
    limit: i64,
    offset: i64,
) -> Result<Vec<Action>, Error> {
    let (ids, resource_type, resource_id) = scope.binds();
    let status: Vec<&str> = status.iter().map(|s| s.as_str()).collect();
    let sort_fields: Vec<&str> = sort.iter().map(|s| s.field.as_str()).collect();
    let sort_desc: Vec<bool> = sort.iter().map(|s| s.descending).collect();
    // Each sortable field becomes an integer rank (ties share one), so that the
    // sort keys can pick a field by name and flip its direction by sign inside
    // one static statement: no SQL is built from the request. Ranking costs a
    // sort per field over the matched actions, which are few: at most 25 ids,
    // or one resource's history.
    sqlx::query_as!(
        ActionRow,
        r#"with matched as (
               select a.id, a.tenant_id, a.command, a.status, a.progress, a.started, a.finished,
                      a.error_code, a.error_message
               from actions a
               where a.tenant_id = $1
                 and ($2::uuid[] is null or a.id = any($2))
                 and ($3::text is null or exists (
                         select 1 from action_resources r
                         where r.action_id = a.id and r.resource_type = $3
                           and r.resource_id = $4))
                 and (cardinality($5::text[]) = 0 or a.status = any($5))
           ), ranked as (
               select m.*,
                      dense_rank() over (order by m.id) as r_id,
                      dense_rank() over (order by m.command) as r_command,
                      dense_rank() over (order by m.status) as r_status,
                      dense_rank() over (order by m.progress) as r_progress,
                      dense_rank() over (order by m.started) as r_started,
                      dense_rank() over (order by m.finished) as r_finished
               from matched m
           )
           select a.id as "id!", a.tenant_id as "tenant_id!", a.command as "command!",
                  a.status as "status!", a.progress as "progress!", a.started as "started!",
                  a.finished as "finished?", a.error_code as "error_code?",
                  a.error_message as "error_message?",
                  array(select r.resource_type from action_resources r where r.action_id = a.id
                        order by r.resource_type, r.resource_id) as "resource_types!",
                  array(select r.resource_id from action_resources r where r.action_id = a.id
                        order by r.resource_type, r.resource_id) as "resource_ids!"
           from ranked a
           order by array(
                        select case s.field
                                   when 'id' then a.r_id
                                   when 'command' then a.r_command
                                   when 'status' then a.r_status
                                   when 'progress' then a.r_progress
                                   when 'started' then a.r_started
                                   when 'finished' then a.r_finished
                               end * case when s.descending then -1 else 1 end
                        from unnest($6::text[], $7::bool[]) with ordinality as s(field, descending, n)
                        order by s.n),
                    a.id
           limit $8 offset $9"#,
        tenant.as_str(),
        ids.as_deref(),
        resource_type,
        resource_id,
        &status as &[&str],
        &sort_fields as &[&str],
        &sort_desc,
        limit,
        offset,
    )
    .fetch_all(pool)
    .await
    .ctx("listing actions")?
    .into_iter()
    .map(Action::try_from)
    .collect()
}

/// How many actions [`list`] would return without a limit.
pub async fn count(
    pool: &PgPool,
    tenant: &TenantId,
    scope: ActionScope<'_>,
    status: &[ActionStatus],
) -> Result<i64, Error> {
    let (ids, resource_type, resource_id) = scope.binds();
    let status: Vec<&str> = status.iter().map(|s| s.as_str()).collect();
    sqlx::query_scalar!(
        r#"select count(*) as "n!"
           from actions a
           where a.tenant_id = $1
             and ($2::uuid[] is null or a.id = any($2))
             and ($3::text is null or exists (
                     select 1 from action_resources r
                     where r.action_id = a.id and r.resource_type = $3 and r.resource_id = $4))
             and (cardinality($5::text[]) = 0 or a.status = any($5))"#,
        tenant.as_str(),
        ids.as_deref(),
        resource_type,
        resource_id,
        &status as &[&str],
    )
    .fetch_one(pool)
    .await
    .ctx("counting actions")
}

/// Whether the tenant has, or had, this VM. Deleted VMs count: their rows stay
/// for the record, and so does the history of what was done to them.
/// Whether the tenant owns (or owned: deleted ones count) the resource.
pub async fn resource_known(
    pool: &PgPool,
    tenant: &TenantId,
    kind: ResourceType,
    id: Uuid,
) -> Result<bool, Error> {
    sqlx::query_scalar!(
        r#"select case $3
             when 'vm' then exists(select 1 from vms where id = $1 and tenant_id = $2)
             when 'volume' then exists(select 1 from volumes where id = $1 and tenant_id = $2)
             when 'network' then exists(select 1 from networks where id = $1 and tenant_id = $2)
             when 'cluster' then exists(select 1 from clusters where id = $1 and tenant_id = $2)
             when 'image' then exists(select 1 from images where id = $1 and tenant_id = $2)
             when 'backup' then exists(select 1 from backups where id = $1 and tenant_id = $2)
             else false end as "known!""#,
        id,
        tenant.as_str(),
        kind.as_str(),
    )
    .fetch_one(pool)
    .await
    .ctx("looking up a resource")
}

pub async fn get(pool: &PgPool, tenant: Option<&TenantId>, id: ActionId) -> Result<Action, Error> {
    get_many(pool, tenant, &[id])
        .await?
        .pop()
        .ok_or_else(|| Error::not_found("action", id))
}

/// Advances a running action's progress (never backwards).
pub async fn set_progress(tx: &mut Tx<'_>, id: ActionId, progress: u8) -> Result<(), Error> {
    sqlx::query!(
        r#"update actions set progress = greatest(progress, $2)
           where id = $1 and status = 'running'"#,
        id.0,
        i16::from(progress.min(99)),
    )
    .execute(&mut **tx)
    .await
    .ctx("updating action progress")?;
    Ok(())
}

/// The channel the `actions_notify` trigger announces changes on.
const NOTIFY_CHANNEL: &str = "meson_actions";

/// An action's state after a change, as the database announced it. Command,
/// start time and resources never change, so they are not part of it.
#[derive(Clone, Debug, PartialEq)]
pub struct ActionChange {
    pub id: ActionId,
    pub tenant: TenantId,
    pub status: ActionStatus,
    pub progress: u8,
    pub finished: Option<DateTime<Utc>>,
    pub error: Option<ActionFailure>,
}

/// What an [`ActionListener`] hears.
#[derive(Clone, Debug, PartialEq)]
pub enum ActionNotice {
    /// An action was inserted or changed; this is its new state.
    Changed(ActionChange),
    /// An action changed, but its state was too large for a notification: read it.
    Reread(ActionId),
    /// Notifications may have been lost (the connection was re-established, or
    /// one could not be decoded): read again whatever you are watching.
    Gap,
}

/// The JSON `actions_notify` sends; `partial` ones carry the id only.
#[derive(Deserialize)]
struct NotifyPayload {
    id: Uuid,
    #[serde(default)]
    partial: bool,
    tenant_id: Option<String>,
    status: Option<String>,
    progress: Option<i16>,
    finished: Option<DateTime<Utc>>,
    error_code: Option<String>,
    error_message: Option<String>,
}

impl ActionNotice {
    fn parse(payload: &str) -> Result<ActionNotice, Error> {
        let p: NotifyPayload = serde_json::from_str(payload)
            .map_err(|e| Error::internal_from("decoding an action notification", e))?;
        if p.partial {
            return Ok(ActionNotice::Reread(ActionId(p.id)));
        }
        let (Some(tenant), Some(status), Some(progress)) = (p.tenant_id, p.status, p.progress)
        else {
            return Err(corrupt("action notification", payload));
        };
        Ok(ActionNotice::Changed(ActionChange {
            id: ActionId(p.id),
            tenant: TenantId(tenant),
            status: ActionStatus::parse(&status)
                .ok_or_else(|| corrupt("action status", &status))?,
            progress: u8::try_from(progress).map_err(|_| corrupt("progress", progress))?,
            finished: p.finished,
            error: p.error_code.map(|code| ActionFailure {
                code,
                message: p.error_message.unwrap_or_default(),
            }),
        }))
    }
}

/// A connection listening for action changes (`LISTEN meson_actions`),
/// registered as watching: changes are announced only while some listener
/// is (see the `action_watchers` migration). It holds one pooled connection
/// for as long as it lives: keep one per process, and [`pause`] it while
/// nothing watches.
///
/// [`pause`]: ActionListener::pause
pub struct ActionListener {
    /// `None` only while being dropped.
    inner: Option<PgListener>,
    registered: bool,
}

impl Drop for ActionListener {
    /// The session goes back to the pool: its registration must not stay.
    fn drop(&mut self) {
        let (Some(mut inner), true) = (self.inner.take(), self.registered) else {
            return;
        };
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let unregistered =
                    sqlx::query!("delete from action_watchers where pid = pg_backend_pid()")
                        .execute(&mut inner)
                        .await;
                if let Err(e) = unregistered {
                    tracing::warn!(error = %e, "unregistering a dropped action listener");
                }
            });
        }
    }
}

impl ActionListener {
    /// Listens and registers; every change committed after this returns is
    /// announced to it.
    pub async fn connect(pool: &PgPool) -> Result<ActionListener, Error> {
        // Registrations of sessions that died only make writers notify.
        sqlx::query!(
            r#"delete from action_watchers w
               where not exists (select from pg_stat_activity a where a.pid = w.pid)"#
        )
        .execute(pool)
        .await
        .ctx("forgetting dead action watchers")?;
        let mut inner = PgListener::connect_with(pool)
            .await
            .ctx("connecting the action listener")?;
        inner
            .listen(NOTIFY_CHANNEL)
            .await
            .ctx("listening for action changes")?;
        let mut listener = ActionListener {
            inner: Some(inner),
            registered: false,
        };
        listener.resume().await?;
        Ok(listener)
    }

    /// Registers again after [`ActionListener::pause`]: every change
    /// committed after this returns is announced (and some before it).
    pub async fn resume(&mut self) -> Result<(), Error> {
        sqlx::query!(
            "insert into action_watchers (pid) values (pg_backend_pid()) on conflict do nothing"
        )
        .execute(self.session()?)
        .await
        .ctx("registering the action listener")?;
        self.registered = true;
        // Writers that looked at the registrations before this one
        // committed end before the gate opens.
        sqlx::query!("select meson_actions_gate_pass()")
            .execute(self.session()?)
            .await
            .ctx("passing the action gate")?;
        Ok(())
    }

    /// Unregisters: changes stop being announced (to this listener; others
    /// may still be registered), so writers skip the notification's cost.
    pub async fn pause(&mut self) -> Result<(), Error> {
        sqlx::query!("delete from action_watchers where pid = pg_backend_pid()")
            .execute(self.session()?)
            .await
            .ctx("unregistering the action listener")?;
        self.registered = false;
        Ok(())
    }

    fn session(&mut self) -> Result<&mut PgListener, Error> {
        self.inner.as_mut().ok_or_else(|| Error::Unavailable {
            message: "the action listener was dropped".into(),
        })
    }

    /// True unless paused.
    pub fn registered(&self) -> bool {
        self.registered
    }

    /// Waits for the next notice, in commit order. An error (the
    /// connection was lost, and its registration with it) means: drop the
    /// listener and connect a new one, then treat what was missed as a gap.
    pub async fn recv(&mut self) -> Result<ActionNotice, Error> {
        let Some(n) = self
            .session()?
            .try_recv()
            .await
            .ctx("receiving action notifications")?
        else {
            return Err(Error::Unavailable {
                message: "the action listener's connection was lost".into(),
            });
        };
        Ok(ActionNotice::parse(n.payload()).unwrap_or_else(|e| {
            tracing::warn!(error = %e, "unreadable action notification; treating it as a gap");
            ActionNotice::Gap
        }))
    }
}

#[cfg(test)]
mod tests {
    //! Database tests run multi-threaded: a dropped connection (or listener)
    //! goes back to the pool on a spawned task, which `TestDatabase`'s blocking
    //! drop would starve on a single-threaded runtime, and hang.

    use super::*;
    use crate::testing::TestDatabase;
    use meson_core::VmId;
    use std::time::Duration;

    fn tenant() -> TenantId {
        TenantId("t-actions".to_owned())
    }

    async fn insert_action(pool: &PgPool, command: &str, vm: VmId) -> Action {
        let a = Action {
            id: ActionId::new(),
            tenant: tenant(),
            command: command.to_owned(),
            status: ActionStatus::Running,
            progress: 0,
            started: Utc::now(),
            finished: None,
            resources: vec![(ResourceType::Vm, vm.0)],
            error: None,
        };
        let mut tx = crate::begin(pool).await.expect("begin");
        insert(&mut tx, &a).await.expect("insert");
        crate::commit(tx).await.expect("commit");
        a
    }

    async fn progress(pool: &PgPool, id: ActionId, p: u8) {
        let mut tx = crate::begin(pool).await.expect("begin");
        set_progress(&mut tx, id, p).await.expect("progress");
        crate::commit(tx).await.expect("commit");
    }

    /// Ends a running action the way a finishing job does
    /// (`jobs::finish_many`), without the job.
    async fn end(pool: &PgPool, id: ActionId, failure: Option<&ActionFailure>) {
        sqlx::query!(
            "update actions set status = case when $2::text is null then 'success' else 'error' end,
                                finished = now(), error_code = $2, error_message = $3,
                                progress = case when $2 is null then 100 else progress end
             where id = $1 and status = 'running'",
            id.0,
            failure.map(|f| f.code.as_str()),
            failure.map(|f| f.message.as_str()),
        )
        .execute(pool)
        .await
        .expect("finish");
    }

    async fn next(l: &mut ActionListener) -> ActionNotice {
        tokio::time::timeout(Duration::from_secs(5), l.recv())
            .await
            .expect("a notice within 5 s")
            .expect("notice")
    }

    fn state(n: &ActionNotice) -> (ActionStatus, u8) {
        match n {
            ActionNotice::Changed(c) => (c.status, c.progress),
            other => panic!("expected a change, got {other:?}"),
        }
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn every_change_is_announced_in_commit_order() {
        let db = TestDatabase::new().await;
        let mut l = ActionListener::connect(&db.pool).await.expect("listen");
        let a = insert_action(&db.pool, "create_vm", VmId::new()).await;
        progress(&db.pool, a.id, 10).await;
        progress(&db.pool, a.id, 10).await; // no change: no notice
        progress(&db.pool, a.id, 20).await;
        end(&db.pool, a.id, None).await;

        let first = next(&mut l).await;
        let ActionNotice::Changed(c) = &first else {
            panic!("{first:?}")
        };
        assert_eq!((c.id, &c.tenant), (a.id, &a.tenant));
        assert_eq!(state(&first), (ActionStatus::Running, 0));
        assert_eq!(state(&next(&mut l).await), (ActionStatus::Running, 10));
        assert_eq!(state(&next(&mut l).await), (ActionStatus::Running, 20));
        let last = next(&mut l).await;
        assert_eq!(state(&last), (ActionStatus::Success, 100));
        let ActionNotice::Changed(c) = last else {
            unreachable!()
        };
        // The announced state is exactly what a read returns.
        let read = get(&db.pool, Some(&a.tenant), a.id).await.expect("get");
        assert_eq!((c.finished, c.error), (read.finished, read.error));
        assert!(c.finished.is_some());
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn changes_are_announced_only_while_a_listener_is_registered() {
        let db = TestDatabase::new().await;
        let watchers = || async {
            sqlx::query_scalar!(r#"select count(*) as "n!" from action_watchers"#)
                .fetch_one(&db.pool)
                .await
                .expect("count")
        };
        let mut l = ActionListener::connect(&db.pool).await.expect("listen");
        assert!(l.registered());
        assert_eq!(watchers().await, 1);
        // A bare LISTEN (not registered) hears whatever is announced.
        let mut bare = PgListener::connect_with(&db.pool).await.expect("bare");
        bare.listen(NOTIFY_CHANNEL).await.expect("listen");

        let a = insert_action(&db.pool, "create_vm", VmId::new()).await;
        assert_eq!(state(&next(&mut l).await), (ActionStatus::Running, 0));
        let heard = bare.recv().await.expect("notice");
        assert_eq!(
            ActionNotice::parse(heard.payload()).map(|n| state(&n)).ok(),
            Some((ActionStatus::Running, 0))
        );

        l.pause().await.expect("pause");
        assert!(!l.registered());
        assert_eq!(watchers().await, 0);
        progress(&db.pool, a.id, 10).await; // nobody registered: not announced
        l.resume().await.expect("resume");
        assert_eq!(watchers().await, 1);
        progress(&db.pool, a.id, 20).await;
        // Notices arrive in commit order: had 10 been announced, it would
        // come first.
        assert_eq!(state(&next(&mut l).await), (ActionStatus::Running, 20));
        let heard = bare.recv().await.expect("notice");
        assert_eq!(
            ActionNotice::parse(heard.payload()).map(|n| state(&n)).ok(),
            Some((ActionStatus::Running, 20))
        );

        // A registration whose session died is forgotten by the next listener.
        drop(l);
        sqlx::query!("insert into action_watchers (pid) values (-1)")
            .execute(&db.pool)
            .await
            .expect("a dead registration");
        let l2 = ActionListener::connect(&db.pool).await.expect("listen");
        assert!(l2.registered());
        let pids: Vec<i32> = sqlx::query_scalar!("select pid from action_watchers")
            .fetch_all(&db.pool)
            .await
            .expect("pids");
        assert!(!pids.contains(&-1), "{pids:?}");
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn oversized_states_are_announced_by_id() {
        let db = TestDatabase::new().await;
        let mut l = ActionListener::connect(&db.pool).await.expect("listen");
        let a = insert_action(&db.pool, "create_vm", VmId::new()).await;
        let failure = ActionFailure {
            code: "boom".into(),
            message: "é".repeat(5000),
        };
        // pg_notify refuses 8000 bytes; the writer's transaction must not fail.
        end(&db.pool, a.id, Some(&failure)).await;
        assert!(matches!(next(&mut l).await, ActionNotice::Changed(_)));
        assert_eq!(next(&mut l).await, ActionNotice::Reread(a.id));
        let read = get(&db.pool, None, a.id).await.expect("get");
        assert_eq!(read.error, Some(failure));
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn final_actions_never_change_and_progress_never_goes_back() {
        let db = TestDatabase::new().await;
        let a = insert_action(&db.pool, "create_vm", VmId::new()).await;
        progress(&db.pool, a.id, 30).await;
        let back = sqlx::query!("update actions set progress = 10 where id = $1", a.id.0)
            .execute(&db.pool)
            .await;
        assert!(back.is_err(), "progress went back");
        end(&db.pool, a.id, None).await;
        let reopen = sqlx::query!(
            "update actions set status = 'running', finished = null, progress = 100 where id = $1",
            a.id.0
        )
        .execute(&db.pool)
        .await;
        assert!(reopen.is_err(), "a final action was reopened");
        let read = get(&db.pool, None, a.id).await.expect("get");
        assert_eq!((read.status, read.progress), (ActionStatus::Success, 100));
    }

    async fn ids(pool: &PgPool, scope: ActionScope<'_>, sort: &[ActionSort]) -> Vec<ActionId> {
        let page = list(pool, &tenant(), scope, &[], sort, 10, 0).await;
        page.expect("list").into_iter().map(|a| a.id).collect()
    }

    fn key(field: &str, descending: bool) -> ActionSort {
        ActionSort {
            field: ActionSortField::parse(field).expect("field"),
            descending,
        }
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn lists_filter_sort_and_page() {
        let db = TestDatabase::new().await;
        let pool = &db.pool;
        let (vm, other_vm) = (VmId::new(), VmId::new());
        let a = insert_action(pool, "create_vm", vm).await;
        let b = insert_action(pool, "delete_vm", vm).await;
        let c = insert_action(pool, "create_vm", vm).await;
        let d = insert_action(pool, "create_vm", other_vm).await;
        progress(pool, a.id, 50).await;
        progress(pool, b.id, 10).await;
        progress(pool, c.id, 10).await;
        end(pool, d.id, None).await;
        let t = tenant();
        let on_vm = ActionScope::Resource(ResourceType::Vm, vm.0);

        assert_eq!(ids(pool, on_vm, &[]).await, [a.id, b.id, c.id]);
        let by_command = [key("command", false), key("progress", true)];
        assert_eq!(ids(pool, on_vm, &by_command).await, [a.id, c.id, b.id]);
        let by_progress = [key("progress", false), key("id", true)];
        assert_eq!(ids(pool, on_vm, &by_progress).await, [c.id, b.id, a.id]);
        let newest = [key("started", true)];
        let page = list(pool, &t, on_vm, &[], &newest, 2, 1)
            .await
            .expect("list");
        let page: Vec<_> = page.into_iter().map(|a| a.id).collect();
        assert_eq!(page, [b.id, a.id]);
        assert_eq!(count(pool, &t, on_vm, &[]).await.expect("count"), 3);

        let all = [a.id, b.id, c.id, d.id];
        let done = list(
            pool,
            &t,
            ActionScope::Ids(&all),
            &[ActionStatus::Success],
            &[],
            10,
            0,
        );
        let done: Vec<_> = done
            .await
            .expect("list")
            .into_iter()
            .map(|a| a.id)
            .collect();
        assert_eq!(done, [d.id]);
        let done = count(pool, &t, ActionScope::Ids(&all), &[ActionStatus::Success]);
        assert_eq!(done.await.expect("count"), 1);
        // Descending puts the unfinished (null) ones first, as PostgreSQL does.
        let finished_last = [key("finished", true), key("id", false)];
        let sorted = ids(pool, ActionScope::Ids(&all), &finished_last).await;
        assert_eq!(sorted, [a.id, b.id, c.id, d.id]);

        let stranger = TenantId("someone-else".to_owned());
        let theirs = list(pool, &stranger, ActionScope::Ids(&all), &[], &[], 10, 0);
        assert!(theirs.await.expect("list").is_empty());
        // Only a VM row of the tenant makes a VM known, deleted or not.
        assert!(
            !resource_known(pool, &t, ResourceType::Vm, vm.0)
                .await
                .expect("known")
        );
        sqlx::query!(
            r#"insert into vms (id, tenant_id, name, status, spec, atomos_name, deleted_at)
               values ($1, $2, 'gone', 'deleting', '{}', 'vm-gone', now())"#,
            vm.0,
            t.as_str(),
        )
        .execute(pool)
        .await
        .expect("insert vm");
        assert!(
            resource_known(pool, &t, ResourceType::Vm, vm.0)
                .await
                .expect("known")
        );
        assert!(
            !resource_known(pool, &stranger, ResourceType::Vm, vm.0)
                .await
                .expect("known")
        );
    }
}
