-- Images: a tenant's boot disks to create VMs from, each a volume on one
-- AtomOS host, made as a snapshot of a VM's boot volume or imported from a
-- URL. They count their size against a seventh quota, images_gb, so every
-- usage function below now answers seven figures:
-- (vms, vcpus, ram_mib, storage_gb, clusters, nodes, images_gb).

create table images (
    id uuid primary key,
    tenant_id text not null,
    name text not null,
    labels jsonb not null default '{}' check (jsonb_typeof(labels) = 'object'),
    status text not null check (status in ('creating', 'available', 'deleting', 'error')),
    -- {"type": "snapshot", "vm": id} or {"type": "url", "url": …, "checksum": …|null}
    source jsonb not null check (source->>'type' in ('snapshot', 'url')),
    size_gb integer not null check (size_gb > 0),
    -- Where it lives, once placed.
    target_id uuid references atomos_targets (id),
    provider text,
    region text,
    atomos_name text not null,
    atomos_id text,
    sha256 text,
    error_message text,
    created_at timestamptz not null default now(),
    deleted_at timestamptz,
    constraint images_placement_complete check (
        (target_id is null) = (provider is null) and (target_id is null) = (region is null))
);
alter table images enable row level security;
alter table images force row level security;
create policy tenant_isolation on images using (meson_tenant_visible(tenant_id));
create unique index images_tenant_name on images (tenant_id, name) where deleted_at is null;
create index images_tenant_id on images (tenant_id, id) where deleted_at is null;

alter table action_resources drop constraint action_resources_resource_type_check;
alter table action_resources add constraint action_resources_resource_type_check
    check (resource_type in ('vm', 'volume', 'network', 'cluster', 'node_pool', 'node', 'image'));

alter table tenant_usage add column images_gb bigint not null default 0;
alter table tenant_quotas add column images_gb bigint check (images_gb >= 0);

create or replace function meson_vm_spec_usage(spec jsonb) returns bigint[] language plpgsql immutable as $$
begin
    return array[
        1,
        coalesce((spec->'cpu'->>'cores')::bigint * (spec->'cpu'->>'threads_per_core')::bigint, 0),
        coalesce((spec->>'memory_mib')::bigint, 0),
        coalesce((spec->>'boot_volume_gb')::bigint, 0)
            + coalesce((select sum((x->>'size_gb')::bigint)
                        from jsonb_array_elements(spec->'volumes') x), 0),
        0, 0, 0]::bigint[];
end;
$$;

create or replace function meson_vm_usage(v vms) returns bigint[] language plpgsql stable as $$
begin
    return case when v.deleted_at is null and v.cluster_id is null
                then meson_vm_spec_usage(v.spec)
                else array[0, 0, 0, 0, 0, 0, 0] end::bigint[];
end;
$$;

create or replace function meson_nodes_usage(n bigint, s jsonb) returns bigint[] language plpgsql immutable as $$
begin
    return array[0, coalesce(n * (s->>'cpu')::bigint, 0),
                 coalesce(n * (s->>'ram_mib')::bigint, 0),
                 coalesce(n * (s->>'storage_gb')::bigint, 0), 0, coalesce(n, 0), 0]::bigint[];
end;
$$;

create or replace function meson_usage_sum(a bigint[], b bigint[]) returns bigint[] language plpgsql immutable as $$
begin
    return array[a[1] + b[1], a[2] + b[2], a[3] + b[3], a[4] + b[4], a[5] + b[5], a[6] + b[6],
                 a[7] + b[7]];
end;
$$;

create or replace function meson_usage_neg(a bigint[]) returns bigint[] language plpgsql immutable as $$
begin
    return array[-a[1], -a[2], -a[3], -a[4], -a[5], -a[6], -a[7]];
end;
$$;

create or replace function meson_pool_usage(p node_pools) returns bigint[] language plpgsql stable as $$
begin
    return case when p.deleted_at is null
                     and exists (select 1 from clusters c
                                 where c.id = p.cluster_id and c.deleted_at is null)
                then meson_nodes_usage(p.desired_nodes, p.spec->'specs')
                else array[0, 0, 0, 0, 0, 0, 0] end::bigint[];
end;
$$;

create or replace function meson_cluster_usage(c clusters) returns bigint[] language plpgsql stable as $$
begin
    return case when c.deleted_at is null then
        meson_usage_sum(
            meson_usage_sum(array[0, 0, 0, 0, 1, 0, 0]::bigint[],
                            meson_nodes_usage((c.spec->'control_plane'->>'nodes')::bigint,
                                              c.spec->'control_plane'->'specs')),
            coalesce((select array[0, sum(u[2]), sum(u[3]), sum(u[4]), 0, sum(u[6]), 0]::bigint[]
                      from (select meson_nodes_usage(p.desired_nodes, p.spec->'specs') as u
                            from node_pools p
                            where p.cluster_id = c.id and p.deleted_at is null) x
                      having count(*) > 0),
                     array[0, 0, 0, 0, 0, 0, 0]::bigint[]))
    else array[0, 0, 0, 0, 0, 0, 0] end::bigint[];
end;
$$;

create or replace function meson_volume_usage(v volumes) returns bigint[] language plpgsql immutable as $$
begin
    return case when v.deleted_at is null and v.vm_id is null
                then array[0, 0, 0, v.size_gb, 0, 0, 0]
                else array[0, 0, 0, 0, 0, 0, 0] end::bigint[];
end;
$$;

-- A live image counts its size against images_gb, until it is gone.
create function meson_image_usage(i images) returns bigint[] language plpgsql immutable as $$
begin
    return case when i.deleted_at is null
                then array[0, 0, 0, 0, 0, 0, i.size_gb]
                else array[0, 0, 0, 0, 0, 0, 0] end::bigint[];
end;
$$;

create or replace function meson_usage_add(t text, d bigint[]) returns void language plpgsql as $$
begin
    if d = array[0, 0, 0, 0, 0, 0, 0]::bigint[] then
        return;
    end if;
    insert into tenant_usage as u (tenant_id, vms, vcpus, ram_mib, storage_gb, clusters, nodes,
                                   images_gb)
    values (t, d[1], d[2], d[3], d[4], d[5], d[6], d[7])
    on conflict (tenant_id) do update set
        vms = u.vms + excluded.vms, vcpus = u.vcpus + excluded.vcpus,
        ram_mib = u.ram_mib + excluded.ram_mib, storage_gb = u.storage_gb + excluded.storage_gb,
        clusters = u.clusters + excluded.clusters, nodes = u.nodes + excluded.nodes,
        images_gb = u.images_gb + excluded.images_gb;
end;
$$;

-- A row's share of its tenant's usage, by its table.
create function meson_row_usage(tbl name, r record) returns bigint[] language plpgsql stable as $$
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
    end if;
    return meson_pool_usage(r::node_pools);
end;
$$;

create or replace function usage_track() returns trigger language plpgsql as $$
declare
    was bigint[] := array[0, 0, 0, 0, 0, 0, 0];
    now_ bigint[] := array[0, 0, 0, 0, 0, 0, 0];
    old_tenant text;
    new_tenant text;
begin
    if tg_op <> 'INSERT' then
        was := meson_row_usage(tg_table_name, old);
        if tg_table_name = 'node_pools' then
            select tenant_id into old_tenant from clusters where id = old.cluster_id;
        else
            old_tenant := old.tenant_id;
        end if;
    end if;
    if tg_op <> 'DELETE' then
        now_ := meson_row_usage(tg_table_name, new);
        if tg_table_name = 'node_pools' then
            select tenant_id into new_tenant from clusters where id = new.cluster_id;
        else
            new_tenant := new.tenant_id;
        end if;
    end if;
    if old_tenant is not null and new_tenant is not null and old_tenant = new_tenant then
        perform meson_usage_add(new_tenant, meson_usage_sum(now_, meson_usage_neg(was)));
    else
        if old_tenant is not null then
            perform meson_usage_add(old_tenant, meson_usage_neg(was));
        end if;
        if new_tenant is not null then
            perform meson_usage_add(new_tenant, now_);
        end if;
    end if;
    return null;
end;
$$;

create trigger images_usage after insert or delete or update of size_gb, deleted_at, tenant_id
    on images for each row execute function usage_track();

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
          where i.tenant_id = t and i.deleted_at is null) s
$$;
