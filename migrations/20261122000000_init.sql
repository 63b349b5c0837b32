-- meson's initial schema: AtomOS targets, VMs and volumes, actions, and the
-- job queue with its workflow step log. Append-only: never edit an applied
-- migration, add a new timestamped file instead.

create function set_updated_at() returns trigger language plpgsql as $$
begin
    new.updated_at := now();
    return new;
end;
$$;

-- An AtomOS target: one endpoint set of the daemons (compute, storage,
-- network, auth), with where it is and who runs it.
create table atomos_targets (
    id uuid primary key,
    name text not null unique,
    host text not null,
    compute_port integer not null check (compute_port between 1 and 65535),
    storage_port integer not null check (storage_port between 1 and 65535),
    network_port integer not null check (network_port between 1 and 65535),
    auth_port integer not null check (auth_port between 1 and 65535),
    provider text not null,
    region text not null,
    continent text not null,
    enabled boolean not null default true,
    created_at timestamptz not null default now(),
    updated_at timestamptz not null default now()
);
create trigger atomos_targets_updated_at before update on atomos_targets
    for each row execute function set_updated_at();

create table vms (
    id uuid primary key,
    tenant_id text not null,
    name text not null,
    status text not null check (status in
        ('initializing', 'starting', 'running', 'stopping', 'off', 'deleting', 'error')),
    labels jsonb not null default '{}' check (jsonb_typeof(labels) = 'object'),
    -- The validated, normalized request (meson_core::vm::VmSpec).
    spec jsonb not null,
    -- The VM's name on AtomOS; encodes its id so workflows find what they made.
    atomos_name text not null unique,
    atomos_id text,
    target_id uuid references atomos_targets (id),
    provider text,
    region text,
    ipv4 inet,
    price_hourly double precision check (price_hourly >= 0),
    price_monthly double precision check (price_monthly >= 0),
    currency text,
    created_at timestamptz not null default now(),
    updated_at timestamptz not null default now(),
    deleted_at timestamptz,
    -- Placement is all or nothing.
    constraint vms_placement_complete check (
        (target_id is null) = (provider is null) and (target_id is null) = (region is null)
    )
);
create unique index vms_tenant_name on vms (tenant_id, name) where deleted_at is null;
create index vms_tenant_id on vms (tenant_id, id) where deleted_at is null;
create trigger vms_updated_at before update on vms
    for each row execute function set_updated_at();

create table volumes (
    id uuid primary key,
    tenant_id text not null,
    vm_id uuid references vms (id),
    name text not null,
    kind text not null check (kind in ('boot', 'cloudinit', 'data')),
    size_gb integer not null check (size_gb > 0),
    -- Where it lives on AtomOS, once created.
    atomos_name text not null unique,
    atomos_id text,
    status text not null check (status in ('creating', 'available', 'deleting', 'error')),
    created_at timestamptz not null default now(),
    updated_at timestamptz not null default now(),
    deleted_at timestamptz
);
create index volumes_vm on volumes (vm_id) where deleted_at is null;
create trigger volumes_updated_at before update on volumes
    for each row execute function set_updated_at();

create table actions (
    id uuid primary key,
    tenant_id text not null,
    command text not null,
    status text not null check (status in ('running', 'success', 'error')),
    progress smallint not null default 0 check (progress between 0 and 100),
    started timestamptz not null default now(),
    finished timestamptz,
    error_code text,
    error_message text,
    constraint actions_finished_iff_final check ((status = 'running') = (finished is null)),
    constraint actions_error_iff_failed check ((status = 'error') = (error_code is not null)),
    constraint actions_success_is_complete check (status <> 'success' or progress = 100)
);
create index actions_tenant on actions (tenant_id, id);

create table action_resources (
    action_id uuid not null references actions (id) on delete cascade,
    resource_type text not null check (resource_type in ('vm', 'volume')),
    resource_id uuid not null,
    primary key (action_id, resource_type, resource_id)
);
create index action_resources_resource on action_resources (resource_type, resource_id);

-- The job queue. A job runs one workflow; its steps are logged below.
create table jobs (
    id bigint generated always as identity primary key,
    kind text not null check (length(kind) between 1 and 64),
    args jsonb not null,
    state text not null default 'available' check (state in
        ('available', 'running', 'succeeded', 'failed', 'cancelled')),
    priority smallint not null default 2 check (priority between 1 and 4),
    run_at timestamptz not null default now(),
    attempt integer not null default 0 check (attempt >= 0),
    max_attempts integer not null default 20 check (max_attempts > 0),
    lease_expires_at timestamptz,
    locked_by text,
    -- Serializes mutations of one resource: at most one live job per key.
    concurrency_key text,
    action_id uuid references actions (id),
    tenant_id text,
    -- Set when the workflow failed for good and is running its undos.
    failure jsonb,
    errors jsonb not null default '[]' check (jsonb_typeof(errors) = 'array'),
    created_at timestamptz not null default now(),
    updated_at timestamptz not null default now(),
    finalized_at timestamptz,
    constraint jobs_finalized_iff_final check (
        (state in ('succeeded', 'failed', 'cancelled')) = (finalized_at is not null)),
    constraint jobs_lease_iff_running check ((state = 'running') = (lease_expires_at is not null))
);
create unique index jobs_concurrency_key on jobs (concurrency_key)
    where state in ('available', 'running') and concurrency_key is not null;
create index jobs_claim_available on jobs (priority, run_at, id) where state = 'available';
create index jobs_claim_expired on jobs (lease_expires_at) where state = 'running';
create index jobs_action on jobs (action_id);
create trigger jobs_updated_at before update on jobs
    for each row execute function set_updated_at();

-- Wake workers when work becomes available; polling is the fallback.
create function jobs_notify() returns trigger language plpgsql as $$
begin
    perform pg_notify('meson_jobs', new.kind);
    return null;
end;
$$;
create trigger jobs_notify_insert after insert on jobs
    for each row when (new.state = 'available') execute function jobs_notify();
create trigger jobs_notify_update after update of state on jobs
    for each row when (new.state = 'available' and old.state <> 'available')
    execute function jobs_notify();

-- The saga log: one row per completed step (and per completed undo).
create table workflow_steps (
    job_id bigint not null references jobs (id) on delete cascade,
    step text not null,
    direction text not null check (direction in ('do', 'undo')),
    output jsonb not null default 'null',
    attempt integer not null,
    finished_at timestamptz not null default now(),
    primary key (job_id, step, direction)
);
