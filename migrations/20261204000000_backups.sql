-- Backups: crash-consistent copies of a VM's volumes, kept on the VM's
-- AtomOS host (the compute daemon's /backup), taken on request or daily by
-- the VM's backup policy. They outlive their VM and count their size
-- against images_gb, as images do.

-- A VM's automatic backups: {"window_start": 0..23, "window_end": 0..23,
-- "keep": 1..31}; null while disabled.
alter table vms add column backup_policy jsonb
    check (backup_policy is null or jsonb_typeof(backup_policy) = 'object');
create index vms_backup_policy on vms (id) where backup_policy is not null and deleted_at is null;

create table backups (
    id uuid primary key,
    tenant_id text not null,
    vm_id uuid not null references vms (id),
    vm_name text not null,
    name text not null,
    labels jsonb not null default '{}' check (jsonb_typeof(labels) = 'object'),
    kind text not null check (kind in ('manual', 'automatic')),
    status text not null check (status in ('creating', 'available', 'deleting', 'error')),
    target_id uuid not null references atomos_targets (id),
    -- GB: the VM's volumes' sizes when requested, the copies' once taken.
    size_gb integer not null check (size_gb > 0),
    -- [{"volume": id|null, "source": AtomOS id, "kind": "boot"|"data", "size_gb": n}]
    volumes jsonb not null default '[]' check (jsonb_typeof(volumes) = 'array'),
    -- The VM's spec when the backup was requested (a restore into a new VM
    -- makes one like it).
    spec jsonb not null,
    error_message text,
    created_at timestamptz not null default now(),
    expires_at timestamptz,
    updated_at timestamptz not null default now(),
    deleted_at timestamptz
);
alter table backups enable row level security;
alter table backups force row level security;
create policy tenant_isolation on backups using (meson_tenant_visible(tenant_id));
create index backups_tenant_id on backups (tenant_id, id) where deleted_at is null;
create index backups_vm on backups (vm_id, created_at) where deleted_at is null;
create index backups_target_creating on backups (target_id) where status = 'creating';
create index backups_expiry on backups (expires_at) where expires_at is not null and deleted_at is null;
create trigger backups_updated_at before update on backups
    for each row execute function set_updated_at();

alter table action_resources drop constraint action_resources_resource_type_check;
alter table action_resources add constraint action_resources_resource_type_check
    check (resource_type in ('vm', 'volume', 'network', 'cluster', 'node_pool', 'node', 'image',
                             'port_forward', 'backup'));

-- A live backup counts its size against images_gb, until it is gone.
create function meson_backup_usage(b backups) returns bigint[] language plpgsql immutable as $$
begin
    return case when b.deleted_at is null
                then array[0, 0, 0, 0, 0, 0, b.size_gb]
                else array[0, 0, 0, 0, 0, 0, 0] end::bigint[];
end;
$$;

create or replace function meson_row_usage(tbl name, r record) returns bigint[] language plpgsql stable as $$
begin
    -- Each branch is planned only when taken (a case would cast every row
    -- to every table's type).
    if tbl = 'vms' then
        return meson_vm_usage(r::vms);
    elsif tbl = 'clusters' then
        return meson_cluster_usage(r::clusters);
    elsif tbl = 'volumes' then
        return meson_volume_usage(r::volumes);
    elsif tbl = 'images' then
        return meson_image_usage(r::images);
    elsif tbl = 'backups' then
        return meson_backup_usage(r::backups);
    end if;
    return meson_pool_usage(r::node_pools);
end;
$$;

create trigger backups_usage after insert or delete or update of size_gb, deleted_at, tenant_id
    on backups for each row execute function usage_track();

create or replace function meson_usage_recount(t text) returns bigint[] language sql stable as $$
    select array[coalesce(sum(u[1]), 0), coalesce(sum(u[2]), 0), coalesce(sum(u[3]), 0),
                 coalesce(sum(u[4]), 0), coalesce(sum(u[5]), 0), coalesce(sum(u[6]), 0),
                 coalesce(sum(u[7]), 0)]::bigint[]
    from (select meson_vm_usage(v) as u from vms v
          where v.tenant_id = t and v.deleted_at is null
          union all
          select meson_cluster_usage(c) from clusters c
          where c.tenant_id = t and c.deleted_at is null
          union all
          select meson_volume_usage(x) from volumes x
          where x.tenant_id = t and x.deleted_at is null
          union all
          select meson_image_usage(i) from images i
          where i.tenant_id = t and i.deleted_at is null
          union all
          select meson_backup_usage(b) from backups b
          where b.tenant_id = t and b.deleted_at is null) s
$$;
