-- Pruning finds finished jobs by age.
create index jobs_finalized on jobs (finalized_at) where finalized_at is not null;
