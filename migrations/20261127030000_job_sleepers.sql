-- Wake only sleeping workers. A notifying commit takes a cluster-wide lock
-- (PostgreSQL serialises every commit that sends a notification, WAL flush
-- included), so a NOTIFY per enqueued job caps the producers' commit rate.
-- A worker that drains the queue registers here before it sleeps, and an
-- enqueue notifies only while some worker is registered; a busy worker is
-- not registered and polls the queue between jobs anyway.
--
-- The lost wakeup (a job committed just after a worker's last look, by a
-- producer that checked the registrations before they were written) is
-- closed by the gate, an advisory lock: the trigger takes it shared (held to
-- commit) before it looks at the registrations; a worker registers, commits,
-- then takes the gate exclusively for a moment (meson_jobs_gate_passed()),
-- which it only gets once every producer that might have looked before its
-- registration has ended; and only then looks at the queue one last time.
-- A producer that looked after the registration committed saw it and
-- notifies. The look needs a fresh snapshot, which only READ COMMITTED
-- gives a trigger, so other isolation levels always notify.
--
-- Unlogged: registrations belong to live sessions, which a crash or a
-- failover ends anyway; workers clean up the rows of sessions that died.
create unlogged table job_sleepers (
    worker text primary key,
    -- The backend of the worker's listening session.
    pid integer not null,
    since timestamptz not null default now()
);

-- The gate's advisory-lock key: hashtextextended('meson.job_sleepers', 0).
create function meson_jobs_gate() returns bigint language sql immutable parallel safe
    as 'select 3359495657231127025::bigint';

-- True once no producer that may have missed the caller's (committed)
-- registration is still running: the caller then looks at the queue again.
-- Never waits: false while a producer holds the gate; ask again later.
create function meson_jobs_gate_passed() returns boolean language sql volatile
    as 'select pg_try_advisory_xact_lock(meson_jobs_gate())';

create or replace function jobs_notify() returns trigger language plpgsql as $$
begin
    perform pg_advisory_xact_lock_shared(meson_jobs_gate());
    if exists (select from job_sleepers)
       or current_setting('transaction_isolation') <> 'read committed' then
        perform pg_notify('meson_jobs', new.kind);
    end if;
    return null;
end;
$$;

-- Jobs of an action are looked up by it; most jobs of the queue's hot path
-- have none, and need no index entry (on insert and on every state change).
drop index jobs_action;
create index jobs_action on jobs (action_id) where action_id is not null;
