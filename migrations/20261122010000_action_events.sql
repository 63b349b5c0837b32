-- Live action events: every change of an action is announced on the
-- `meson_actions` channel, so that API processes push it to their streams
-- (GET /v1/actions/stream) without polling. PostgreSQL delivers notifications
-- at commit, in commit order, which is the order streams must keep.

-- Streams order an action's states by (final, progress) and read command,
-- started and resources once. Make what they rely on a property of the table
-- rather than a habit of the code that writes it: identity never changes,
-- progress never goes back, and a final action (success, error) never changes
-- again, so `finished` is set exactly once.
create function actions_guard() returns trigger language plpgsql as $$
begin
    if old.status <> 'running' then
        raise exception 'action % is % and can no longer change', old.id, old.status
            using errcode = 'check_violation';
    end if;
    if new.id <> old.id or new.tenant_id <> old.tenant_id or new.command <> old.command
        or new.started <> old.started then
        raise exception 'the identity of action % cannot change', old.id
            using errcode = 'check_violation';
    end if;
    if new.progress < old.progress then
        raise exception 'the progress of action % cannot go back from % to %',
            old.id, old.progress, new.progress
            using errcode = 'check_violation';
    end if;
    return new;
end;
$$;
create trigger actions_guard before update on actions
    for each row when (old.* is distinct from new.*) execute function actions_guard();

-- The payload is the action's mutable state, so that listeners build every
-- event from its notification: re-reading the row instead would merge changes
-- that commit close together.
create function actions_notify() returns trigger language plpgsql as $$
declare
    payload text := json_build_object(
        'id', new.id,
        'tenant_id', new.tenant_id,
        'status', new.status,
        'progress', new.progress,
        'finished', new.finished,
        'error_code', new.error_code,
        'error_message', new.error_message)::text;
begin
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
create trigger actions_notify_insert after insert on actions
    for each row execute function actions_notify();
-- No-op updates (progress set to what it already was) announce nothing.
create trigger actions_notify_update after update on actions
    for each row when (old.* is distinct from new.*) execute function actions_notify();
