-- A cluster's node keeps no `vm_parts` row. Its VM is written as a plain
-- VM's is (with its volumes, which wrote its parts) and then tied to its
-- cluster, so the row written first stayed, and every change to the node's
-- volumes refreshed it: four refreshes a node while a cluster is made, a
-- third of PostgreSQL's time in a 301-node cluster's creation. A refresh
-- now drops the row of a VM that has become a node.
create or replace function meson_refresh_vm_parts(ids uuid[]) returns void language plpgsql
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
        delete from vm_parts p using vms v
        where p.vm_id = vm and v.id = vm and v.cluster_id is not null;
        if found then
            continue;
        end if;
        update vm_parts set volumes = meson_vm_volumes(vm), nics = meson_vm_nics(vm)
        where vm_id = vm;
    end loop;
end;
$$;

select set_config('meson.tenant', '*', true);
delete from vm_parts p using vms v where v.id = p.vm_id and v.cluster_id is not null;
