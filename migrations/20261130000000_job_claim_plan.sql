-- The queue's claim and completion as functions whose plans do not depend
-- on the planner's statistics.
--
-- Both statements were prepared by each worker connection, and their plans
-- followed the estimates:
-- - The claim found the jobs it picked again by joining them to `jobs`.
--   The due pick's `limit` is an expression (the claim's size less the
--   expired leases taken), which the planner counts as a tenth of the due
--   jobs: with a backlog of 5,000 due jobs it expected 500 picks and hashed
--   the whole table, finished jobs included, to update 32 (15 ms a claim at
--   50,000 rows, against 0.3).
-- - The completion joined its list of jobs to the running ones, which the
--   planner read through the running jobs' partial index, every entry of it
--   live or dead (1.4 ms a batch in the bench, against 0.1).
-- - A session that planned either while the table was near-empty kept
--   sequential scans and hash joins as the table grew, until the next
--   analyze: in the bench's fresh database, the queue ran at a third of
--   its speed.
-- Here every job is found by its primary key: the claim gathers its picks
-- into an array, the completion looks each job up by id; sequential scans
-- and hash and merge joins are off for their statements, which PL/pgSQL
-- plans once per session.

create function meson_claim_jobs(kinds text[], n bigint, worker text, lease_secs float8)
    returns table (id bigint, kind text, args jsonb, attempt integer, max_attempts integer,
                   action_id uuid, failure jsonb, waited_secs float8, trace_context jsonb,
                   steps jsonb)
    language plpgsql volatile
    set enable_seqscan = off set enable_hashjoin = off set enable_mergejoin = off as $$
#variable_conflict use_column
begin
    return query
    with expired as materialized (
        select e.id from jobs e
        where e.state = 'running' and e.lease_expires_at < now() and e.kind = any(kinds)
        order by e.lease_expires_at
        limit n
        for update skip locked
    ), available as materialized (
        select a.id from jobs a
        where a.state = 'available' and a.run_at <= now() and a.kind = any(kinds)
        order by a.priority, a.run_at, a.id
        limit n - (select count(*) from expired)
        for update skip locked
    )
    update jobs j
    set state = 'running', attempt = j.attempt + 1, locked_by = worker,
        lease_expires_at = now() + make_interval(secs => lease_secs)
    where j.id = any(array(select x.id from expired x union all select y.id from available y))
    returning j.id, j.kind, j.args, j.attempt, j.max_attempts, j.action_id, j.failure,
              greatest(extract(epoch from (now() - j.run_at)), 0)::float8,
              j.trace_context,
              (select coalesce(jsonb_agg(jsonb_build_array(s.step, s.direction, s.output)
                                         order by s.finished_at), '[]'::jsonb)
               from workflow_steps s where s.job_id = j.id);
end;
$$;

-- Finishes the jobs `ids` still held by `attempts` (`succeeded`, or
-- `failed` where `codes` has a code) and their running actions; returns
-- the jobs finished, with their action's command and duration when one was
-- still running. Jobs are locked in the order given (callers sort by id).
-- A job is locked before its attempt and state are looked at, so that both
-- are read from its latest version; the lookup's `limit` keeps the state's
-- condition out of it (pushed down, it made the running jobs' partial index
-- as cheap as the primary key to the planner, and it read the whole index
-- for each job).
create function meson_finish_jobs(ids bigint[], attempts integer[], codes text[],
                                  messages text[])
    returns table (id bigint, command text, seconds float8)
    language plpgsql volatile
    set enable_seqscan = off set enable_hashjoin = off set enable_mergejoin = off as $$
#variable_conflict use_column
begin
    return query
    with mine as materialized (
        select l.id, u.code, u.message
        from unnest(ids, attempts, codes, messages) as u(id, attempt, code, message)
        cross join lateral (select x.id, x.attempt, x.state from jobs x
                            where x.id = u.id limit 1 for update) l
        where l.attempt = u.attempt and l.state = 'running'
    ), done as (
        update jobs j
        set state = case when m.code is null then 'succeeded' else 'failed' end,
            finalized_at = now(), lease_expires_at = null
        from mine m where j.id = m.id
        returning j.id, j.action_id, m.code, m.message
    ), ended as (
        update actions a
        set status = case when d.code is null then 'success' else 'error' end,
            finished = now(), error_code = d.code, error_message = d.message,
            progress = case when d.code is null then 100 else a.progress end
        from done d
        where a.id = d.action_id and a.status = 'running'
        returning a.id, a.command, extract(epoch from (a.finished - a.started))::float8 as seconds
    )
    select d.id, e.command, e.seconds
    from done d left join ended e on e.id = d.action_id;
end;
$$;
