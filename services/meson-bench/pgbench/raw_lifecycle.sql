-- One job's life, unbatched, durable: three transactions (insert, claim
-- one with SKIP LOCKED, mark it done). The queue's physical floor: what
-- PostgreSQL itself costs per job when nothing is shared between jobs.
-- A claim can find nothing (every visible job is locked by another
-- client's claim); like a worker, the client then polls again next time,
-- and the run ends by finishing what is left.
insert into raw_jobs (kind, args) values ('noop', '{}');
with picked as materialized (
  select id from raw_jobs where state = 'available' and run_at <= now()
  order by run_at, id limit 1 for update skip locked),
claimed as (
  update raw_jobs j set state = 'running', attempt = j.attempt + 1,
                        lease_expires_at = now() + interval '30 seconds'
  from picked where j.id = picked.id returning j.id)
select coalesce((select id from claimed), 0) as id \gset
update raw_jobs set state = 'succeeded', finalized_at = now(), lease_expires_at = null
where id = :id;
