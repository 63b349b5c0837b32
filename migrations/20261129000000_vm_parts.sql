-- A VM's volumes and NICs as its read answers them (`GET /v1/vms/{id}`),
-- kept by triggers as they change, so that the read fetches one row instead
-- of aggregating both tables for every request: per read, the aggregation
-- cost PostgreSQL three times the VM's own lookup.
--
-- The triggers run per statement, in the writing transaction: a change and
-- its VM's parts commit together or not at all. A refresh locks the VM's
-- row here before it aggregates, and aggregates in a snapshot taken after
-- the lock (a VM's first row is written as aggregated; a transaction that
-- meets another's first row waits for it, then aggregates again): of two transactions changing the same VM's volumes, the second
-- waits for the first and then sees its changes (an aggregate computed
-- before the wait would write the first one's changes back out). VMs are
-- locked in id order, so two statements refreshing the same VMs cannot
-- deadlock on them.

create table vm_parts (
    vm_id uuid primary key references vms (id) on delete cascade,
    tenant_id text not null,
    -- As `meson_db::volumes::VolumeRow`s: the VM's own volumes (boot,
    -- cloud-init, data, each by name), then those attached to it.
    volumes json not null default '[]',
    -- As `meson_db::networks::AttachmentRow`s, by position.
    nics json not null default '[]'
);
alter table vm_parts enable row level security;
alter table vm_parts force row level security;
create policy tenant_isolation on vm_parts using (meson_tenant_visible(tenant_id));

-- A VM's volumes as its read answers them: its own (boot, cloud-init, data,
-- each by name), then those attached to it.
--
-- These functions' statements are PL/pgSQL's, planned once per session
-- (SQL functions are planned at every call), and each of their lookups is
-- one equality an index answers, sequential scans off: a session that first
-- ran them on near-empty tables kept a plan that read all the volumes for
-- every change (the `or` of two columns became a filter over the whole
-- table, or the whole index), and a fresh database's creates went from 6 to
-- 60 ms within seconds, in the bench, until autovacuum's next analyze.
create function meson_vm_volumes(vm uuid) returns json language plpgsql stable
    set enable_seqscan = off as $$
begin
    return coalesce((
        select json_agg(x order by x.vm_id is distinct from vm,
                        array_position(array['boot', 'cloudinit', 'data'], x.kind), x.name)
        from (select o.id, o.tenant_id, o.vm_id, o.name, o.kind, o.size_gb,
                     o.atomos_name, o.atomos_id, o.status, o.labels,
                     o.bootable, o.readonly, o.target_id, ot.name as host,
                     o.provider, o.region, o.attached_vm_id, o.created_at
              from volumes o left join atomos_targets ot on ot.id = o.target_id
              where o.id = any(array(
                  select v.id from volumes v where v.vm_id = vm and v.deleted_at is null
                  union all
                  select v.id from volumes v
                  where v.attached_vm_id = vm and v.deleted_at is null))) x), '[]');
end;
$$;

-- A VM's NICs as its read answers them, by position.
create function meson_vm_nics(vm uuid) returns json language plpgsql stable
    set enable_seqscan = off as $$
begin
    return coalesce((
        select json_agg(json_build_object('vm_id', n.vm_id,
                        'network_id', n.network_id, 'position', n.position,
                        'mac', text(n.mac), 'address', host(n.address))
                        order by n.position)
        from vm_networks n where n.vm_id = vm), '[]');
end;
$$;

-- Recomputes the parts of each VM in `ids` (nulls and repeats ignored; a VM
-- the session cannot see, or that is gone, is skipped, and so are cluster
-- nodes, which that read does not answer).
create function meson_refresh_vm_parts(ids uuid[]) returns void language plpgsql
    set enable_seqscan = off as $$
declare
    vm uuid;
begin
    for vm in select distinct x from unnest(ids) x where x is not null order by x loop
        perform 1 from vm_parts where vm_id = vm for update;
        if not found then
            -- The VM's first parts (its create): nobody else holds them yet.
            insert into vm_parts (vm_id, tenant_id, volumes, nics)
                select v.id, v.tenant_id, meson_vm_volumes(vm), meson_vm_nics(vm)
                from vms v where v.id = vm and v.cluster_id is null
                on conflict (vm_id) do nothing;
            if found then
                continue;
            end if;
            -- Another transaction wrote them first (or the VM is not kept):
            -- aggregated again below once that one has ended.
            perform 1 from vm_parts where vm_id = vm for update;
            if not found then
                continue;
            end if;
        end if;
        update vm_parts set volumes = meson_vm_volumes(vm), nics = meson_vm_nics(vm)
        where vm_id = vm;
    end loop;
end;
$$;

-- After a statement on volumes or vm_networks: the VMs its rows belonged
-- or were attached to, before and after (`attached_vm_id` is the volumes'
-- only: a NIC's reads null).
create function meson_vm_parts_changed() returns trigger language plpgsql as $$
declare
    ids uuid[] := '{}';
begin
    if tg_op in ('UPDATE', 'DELETE') then
        ids := ids || array(select (to_jsonb(r) ->> c)::uuid
                            from old_rows r, unnest(array['vm_id', 'attached_vm_id']) c);
    end if;
    if tg_op in ('INSERT', 'UPDATE') then
        ids := ids || array(select (to_jsonb(r) ->> c)::uuid
                            from new_rows r, unnest(array['vm_id', 'attached_vm_id']) c);
    end if;
    perform meson_refresh_vm_parts(ids);
    return null;
end;
$$;

do $$
declare
    t text;
begin
    foreach t in array array['volumes', 'vm_networks'] loop
        execute format('create trigger %1$s_vm_parts_insert after insert on %1$I
                            referencing new table as new_rows
                            for each statement execute function meson_vm_parts_changed()', t);
        execute format('create trigger %1$s_vm_parts_update after update on %1$I
                            referencing old table as old_rows new table as new_rows
                            for each statement execute function meson_vm_parts_changed()', t);
        execute format('create trigger %1$s_vm_parts_delete after delete on %1$I
                            referencing old table as old_rows
                            for each statement execute function meson_vm_parts_changed()', t);
    end loop;
end;
$$;

-- The VMs stored before this migration.
select set_config('meson.tenant', '*', true);
select meson_refresh_vm_parts(array(
    select distinct vm_id from volumes where vm_id is not null
    union select distinct attached_vm_id from volumes where attached_vm_id is not null
    union select distinct vm_id from vm_networks));
