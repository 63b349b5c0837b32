-- Ten jobs' lives with the claim and the completion batched as River does:
-- ten insert transactions, one transaction claiming ten, one completing them.
insert into raw_jobs (kind, args) values ('noop', '{}');
insert into raw_jobs (kind, args) values ('noop', '{}');
insert into raw_jobs (kind, args) values ('noop', '{}');
insert into raw_jobs (kind, args) values ('noop', '{}');
insert into raw_jobs (kind, args) values ('noop', '{}');
insert into raw_jobs (kind, args) values ('noop', '{}');
insert into raw_jobs (kind, args) values ('noop', '{}');
insert into raw_jobs (kind, args) values ('noop', '{}');
insert into raw_jobs (kind, args) values ('noop', '{}');
insert into raw_jobs (kind, args) values ('noop', '{}');
with picked as materialized (
  select id from raw_jobs where state = 'available' and run_at <= now()
  order by run_at, id limit 10 for update skip locked),
claimed as (
  update raw_jobs j set state = 'running', attempt = j.attempt + 1,
                        lease_expires_at = now() + interval '30 seconds'
  from picked where j.id = picked.id returning j.id)
select coalesce(array_agg(id), '{}') as ids from claimed \gset
update raw_jobs set state = 'succeeded', finalized_at = now(), lease_expires_at = null
where id = any(:ids::bigint[]);
