-- Announce action changes only while some process has a stream watching.
-- A notifying commit takes a cluster-wide lock (PostgreSQL serialises every
-- commit that sends a notification, WAL flush included), so a NOTIFY for
-- every action change caps the rate of every write that starts or moves an
-- action (a VM's create, each workflow step) at one commit per WAL flush,
-- across all tenants. Instead, a process registers its listening session
-- here while it has streams open, and changes notify only while some
-- process is registered.
--
-- The lost announcement (a change committed just after a stream read its
-- actions, by a writer that checked the registrations before they were
-- written) is closed by a gate, as for the job queue: the trigger takes an
-- advisory lock shared (held to commit) before it looks at the
-- registrations; a process registers, commits, then takes the gate
-- exclusively for a moment (meson_actions_gate_pass()), which it gets once
-- every writer that might have looked before the registration has ended.
-- Streams read their actions' states only after that. The look needs a
-- fresh snapshot, which only READ COMMITTED gives a trigger, so other
-- isolation levels always notify.
--
-- Unlogged: registrations belong to live sessions, which a crash or a
-- failover ends anyway; processes clean up the rows of sessions that died.
create unlogged table action_watchers (
    -- The backend of the process's listening session.
    pid integer primary key,
    since timestamptz not null default now()
);

-- The gate's advisory-lock key: hashtextextended('meson.action_watchers', 0).
create function meson_actions_gate() returns bigint language sql immutable parallel safe
    as 'select -2436264502118712939::bigint';

-- Waits until every writer that may have missed the caller's (committed)
-- registration has ended.
create function meson_actions_gate_pass() returns void language sql volatile
    as 'select pg_advisory_xact_lock(meson_actions_gate())';

create or replace function actions_notify() returns trigger language plpgsql as $$
declare
    payload text;
begin
    perform pg_advisory_xact_lock_shared(meson_actions_gate());
    if not exists (select from action_watchers)
       and current_setting('transaction_isolation') = 'read committed' then
        return null;
    end if;
    payload := json_build_object(
        'id', new.id,
        'tenant_id', new.tenant_id,
        'status', new.status,
        'progress', new.progress,
        'finished', new.finished,
        'error_code', new.error_code,
        'error_message', new.error_message)::text;
    -- pg_notify fails from 8000 bytes on, and would take the writer's
    -- transaction with it. A state that large (a long error message) is
    -- announced by id only; listeners read it from the table.
    if octet_length(payload) > 4000 then
        payload := json_build_object('id', new.id, 'partial', true)::text;
    end if;
    perform pg_notify('meson_actions', payload);
    return null;
end;
$$;
