-- What each tenant holds, kept by triggers as its resources change, so that
-- a quota check reads one row instead of summing every VM's and cluster's
-- spec under the tenant's lock (which made creates slower the more a tenant
-- held, and serialised them behind that sum). The counts follow the
-- definition meson_db::quotas::recount computes from scratch: VMs that are
-- not cluster nodes, by their specs; live clusters; and their nodes at the
-- control plane's size plus every live pool's desired_nodes. Deleting
-- resources count until they are gone (deleted_at set).

create table tenant_usage (
    tenant_id text primary key,
    vms bigint not null default 0,
    vcpus bigint not null default 0,
    ram_mib bigint not null default 0,
    storage_gb bigint not null default 0,
    clusters bigint not null default 0,
    nodes bigint not null default 0
);
alter table tenant_usage enable row level security;
alter table tenant_usage force row level security;
create policy tenant_isolation on tenant_usage using (meson_tenant_visible(tenant_id));

-- Usage as (vms, vcpus, ram_mib, storage_gb, clusters, nodes). A spec
-- without a figure counts 0 for it, as the sums of a recount do.
create function meson_vm_usage(v vms) returns bigint[] language plpgsql stable as $$
begin
    return case when v.deleted_at is null and v.cluster_id is null then array[
        1,
        coalesce((v.spec->'cpu'->>'cores')::bigint
                 * (v.spec->'cpu'->>'threads_per_core')::bigint, 0),
        coalesce((v.spec->>'memory_mib')::bigint, 0),
        coalesce((v.spec->>'boot_volume_gb')::bigint, 0)
            + coalesce((select sum((x->>'size_gb')::bigint)
                        from jsonb_array_elements(v.spec->'volumes') x), 0),
        0, 0]
    else array[0, 0, 0, 0, 0, 0] end::bigint[];
end;
$$;

-- n nodes of a node group's `specs` (cpu, ram_mib, storage_gb).
create function meson_nodes_usage(n bigint, s jsonb) returns bigint[] language plpgsql immutable as $$
begin
    return array[0, coalesce(n * (s->>'cpu')::bigint, 0),
                 coalesce(n * (s->>'ram_mib')::bigint, 0),
                 coalesce(n * (s->>'storage_gb')::bigint, 0), 0, coalesce(n, 0)]::bigint[];
end;
$$;

create function meson_usage_sum(a bigint[], b bigint[]) returns bigint[] language plpgsql immutable as $$
begin
    return array[a[1] + b[1], a[2] + b[2], a[3] + b[3], a[4] + b[4], a[5] + b[5], a[6] + b[6]];
end;
$$;

-- A pool counts while it and its cluster are live.
create function meson_pool_usage(p node_pools) returns bigint[] language plpgsql stable as $$
begin
    return case when p.deleted_at is null
                     and exists (select 1 from clusters c
                                 where c.id = p.cluster_id and c.deleted_at is null)
                then meson_nodes_usage(p.desired_nodes, p.spec->'specs')
                else array[0, 0, 0, 0, 0, 0] end::bigint[];
end;
$$;

-- A live cluster counts itself, its control plane and its live pools.
create function meson_cluster_usage(c clusters) returns bigint[] language plpgsql stable as $$
begin
    return case when c.deleted_at is null then
        meson_usage_sum(
            meson_usage_sum(array[0, 0, 0, 0, 1, 0]::bigint[],
                            meson_nodes_usage((c.spec->'control_plane'->>'nodes')::bigint,
                                              c.spec->'control_plane'->'specs')),
            coalesce((select array[0, sum(u[2]), sum(u[3]), sum(u[4]), 0, sum(u[6])]::bigint[]
                      from (select meson_nodes_usage(p.desired_nodes, p.spec->'specs') as u
                            from node_pools p
                            where p.cluster_id = c.id and p.deleted_at is null) x
                      having count(*) > 0),
                     array[0, 0, 0, 0, 0, 0]::bigint[]))
    else array[0, 0, 0, 0, 0, 0] end::bigint[];
end;
$$;

-- Adds `d` to a tenant's usage (nothing when it is all zeros).
create function meson_usage_add(t text, d bigint[]) returns void language plpgsql as $$
begin
    if d = array[0, 0, 0, 0, 0, 0]::bigint[] then
        return;
    end if;
    insert into tenant_usage as u (tenant_id, vms, vcpus, ram_mib, storage_gb, clusters, nodes)
    values (t, d[1], d[2], d[3], d[4], d[5], d[6])
    on conflict (tenant_id) do update set
        vms = u.vms + excluded.vms, vcpus = u.vcpus + excluded.vcpus,
        ram_mib = u.ram_mib + excluded.ram_mib, storage_gb = u.storage_gb + excluded.storage_gb,
        clusters = u.clusters + excluded.clusters, nodes = u.nodes + excluded.nodes;
end;
$$;

create function meson_usage_neg(a bigint[]) returns bigint[] language plpgsql immutable as $$
begin
    return array[-a[1], -a[2], -a[3], -a[4], -a[5], -a[6]];
end;
$$;

-- After a row changes: its tenant's usage moves by new's share minus old's.
create function usage_track() returns trigger language plpgsql as $$
declare
    was bigint[] := array[0, 0, 0, 0, 0, 0];
    now_ bigint[] := array[0, 0, 0, 0, 0, 0];
    old_tenant text;
    new_tenant text;
begin
    if tg_op <> 'INSERT' then
        if tg_table_name = 'vms' then
            was := meson_vm_usage(old::vms);
            old_tenant := old.tenant_id;
        elsif tg_table_name = 'clusters' then
            was := meson_cluster_usage(old::clusters);
            old_tenant := old.tenant_id;
        else
            was := meson_pool_usage(old::node_pools);
            select tenant_id into old_tenant from clusters where id = old.cluster_id;
        end if;
    end if;
    if tg_op <> 'DELETE' then
        if tg_table_name = 'vms' then
            now_ := meson_vm_usage(new::vms);
            new_tenant := new.tenant_id;
        elsif tg_table_name = 'clusters' then
            now_ := meson_cluster_usage(new::clusters);
            new_tenant := new.tenant_id;
        else
            now_ := meson_pool_usage(new::node_pools);
            select tenant_id into new_tenant from clusters where id = new.cluster_id;
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

create trigger vms_usage after insert or delete or update of spec, deleted_at, cluster_id, tenant_id
    on vms for each row execute function usage_track();
create trigger clusters_usage after insert or delete or update of spec, deleted_at, tenant_id
    on clusters for each row execute function usage_track();
create trigger node_pools_usage after insert or delete or update of spec, deleted_at, desired_nodes, cluster_id
    on node_pools for each row execute function usage_track();

-- What is there already (the migrator sees every tenant).
select set_config('meson.tenant', '*', true);
insert into tenant_usage (tenant_id, vms, vcpus, ram_mib, storage_gb, clusters, nodes)
select tenant_id, sum(u[1]), sum(u[2]), sum(u[3]), sum(u[4]), sum(u[5]), sum(u[6])
from (select tenant_id, meson_vm_usage(v) as u from vms v
      union all
      select tenant_id, meson_cluster_usage(c) from clusters c) x
group by tenant_id;

-- A cluster's network is found by its cluster (every cluster read joins it).
create index networks_cluster on networks (cluster_id) where cluster_id is not null;

-- A tenant's own VMs (cluster nodes apart) in id order: the default list
-- order, whose pages (deep ones included) an index-only scan finds.
create index vms_tenant_standalone on vms (tenant_id, id)
    where deleted_at is null and cluster_id is null;
