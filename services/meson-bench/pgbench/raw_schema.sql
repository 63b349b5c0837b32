-- The raw ceiling's queue: the shape of a real job table (bigint identity,
-- jsonb arguments, a partial index on what is claimable), nothing else.
create table raw_jobs (
    id bigint generated always as identity primary key,
    kind text not null,
    args jsonb not null,
    state text not null default 'available',
    run_at timestamptz not null default now(),
    attempt integer not null default 0,
    lease_expires_at timestamptz,
    finalized_at timestamptz
);
create index raw_jobs_available on raw_jobs (run_at, id) where state = 'available';
