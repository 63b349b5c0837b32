-- One meson job enqueued in its own transaction: the statement
-- meson_db::jobs::enqueue runs (its insert trigger notifies only while a
-- worker sleeps).
insert into jobs (kind, args, priority, max_attempts, concurrency_key, action_id, tenant_id,
                  trace_context)
values (:kind, '{}', 2, 10, null, null, null, null)
on conflict (concurrency_key)
  where state in ('available', 'running') and concurrency_key is not null
do nothing
returning id;
