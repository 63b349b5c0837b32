-- Standalone volumes: made by `POST /v1/volumes` (not by a VM), placed on
-- one AtomOS host, attached to at most one VM at a time (named at the VM's
-- create) and outliving it. A VM's own volumes keep `vm_id` (their owner);
-- a standalone volume has none, and `attached_vm_id` while attached.

alter table volumes
    add column labels jsonb not null default '{}' check (jsonb_typeof(labels) = 'object'),
    add column bootable boolean not null default false,
    add column readonly boolean not null default false,
    -- Where a standalone volume lives (a VM's volumes live on their VM's host).
    add column target_id uuid references atomos_targets (id),
    add column provider text,
    add column region text,
    add column attached_vm_id uuid references vms (id),
    add constraint volumes_placement_complete check (
        (target_id is null) = (provider is null) and (target_id is null) = (region is null)),
    -- Only standalone volumes are attached; they hold data.
    add constraint volumes_attached_standalone check (attached_vm_id is null or vm_id is null),
    add constraint volumes_standalone_data check (vm_id is not null or kind = 'data'),
    add constraint volumes_attached_status check ((status = 'attached') = (attached_vm_id is not null));

alter table volumes drop constraint volumes_status_check;
alter table volumes add constraint volumes_status_check
    check (status in ('creating', 'available', 'attached', 'deleting', 'error'));

-- Standalone volume names are unique per tenant (a VM's are per VM).
create unique index volumes_tenant_name on volumes (tenant_id, name)
    where deleted_at is null and vm_id is null;
create index volumes_attached on volumes (attached_vm_id)
    where deleted_at is null and attached_vm_id is not null;
create index volumes_tenant_id on volumes (tenant_id, id) where deleted_at is null;

-- A live standalone volume counts its size against storage_gb (a VM's own
-- volumes count through its spec).
create function meson_volume_usage(v volumes) returns bigint[] language plpgsql immutable as $$
begin
    return case when v.deleted_at is null and v.vm_id is null
                then array[0, 0, 0, v.size_gb, 0, 0]
                else array[0, 0, 0, 0, 0, 0] end::bigint[];
end;
$$;

create or replace function usage_track() returns trigger language plpgsql as $$
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
        elsif tg_table_name = 'volumes' then
            was := meson_volume_usage(old::volumes);
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
        elsif tg_table_name = 'volumes' then
            now_ := meson_volume_usage(new::volumes);
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

create trigger volumes_usage after insert or delete or update of size_gb, deleted_at, vm_id, tenant_id
    on volumes for each row execute function usage_track();
