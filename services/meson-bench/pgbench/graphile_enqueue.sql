-- One graphile-worker job enqueued in its own transaction, its documented way.
select graphile_worker.add_job('noop', '{}'::json);
