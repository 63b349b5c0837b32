-- The end of a raw run: the few jobs no claim found, claimed and finished.
with picked as materialized (
  select id from raw_jobs where state = 'available' and run_at <= now()
  order by run_at, id for update skip locked)
update raw_jobs j set state = 'succeeded', attempt = j.attempt + 1, finalized_at = now()
from picked where j.id = picked.id;
