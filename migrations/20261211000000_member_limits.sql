-- Per-member limits: a member of an organisation may be held to fewer VMs,
-- vCPUs and MiB of RAM than its organisation (`members.max_*`; null: no
-- limit of its own). What a member holds is what the VMs it created hold
-- (`vms.created_by`: the subject of the request that made the VM), kept
-- in `member_usage` by a trigger in the transaction of each change, as
-- `tenant_usage` is; the creates lock the member's row and apply the
-- quota rule (`meson_quota_over`) to it. VMs made before this migration,
-- and a cluster's nodes, are no member's.

alter table vms add column created_by text;
alter table members
    add column max_vms bigint check (max_vms >= 0),
    add column max_vcpus bigint check (max_vcpus >= 0),
    add column max_ram_mib bigint check (max_ram_mib >= 0);

create table member_usage (
    tenant_id text not null,
    subject text not null,
    vms bigint not null default 0,
    vcpus bigint not null default 0,
    ram_mib bigint not null default 0,
    primary key (tenant_id, subject)
);
alter table member_usage enable row level security;
alter table member_usage force row level security;
create policy tenant_isolation on member_usage using (meson_tenant_visible(tenant_id));

-- What a VM counts against its creator: VMs, vCPUs, MiB of RAM.
create function meson_member_vm_usage(v vms) returns bigint[] language sql stable as $$
    select (meson_vm_usage(v))[1:3]
$$;

create function meson_member_usage_add(t text, s text, d bigint[]) returns void
    language plpgsql as $$
begin
    if s is null or d = array[0, 0, 0]::bigint[] then
        return;
    end if;
    insert into member_usage as u (tenant_id, subject, vms, vcpus, ram_mib)
    values (t, s, d[1], d[2], d[3])
    on conflict (tenant_id, subject) do update set
        vms = u.vms + excluded.vms, vcpus = u.vcpus + excluded.vcpus,
        ram_mib = u.ram_mib + excluded.ram_mib;
end;
$$;

create function member_usage_track() returns trigger language plpgsql as $$
declare
    was bigint[];
begin
    if tg_op <> 'INSERT' then
        was := meson_member_vm_usage(old);
        perform meson_member_usage_add(old.tenant_id, old.created_by,
                                       array[-was[1], -was[2], -was[3]]);
    end if;
    if tg_op <> 'DELETE' then
        perform meson_member_usage_add(new.tenant_id, new.created_by,
                                       meson_member_vm_usage(new));
    end if;
    return null;
end;
$$;
create trigger vms_member_usage_insert after insert on vms
    for each row when (new.created_by is not null) execute function member_usage_track();
create trigger vms_member_usage_delete after delete on vms
    for each row when (old.created_by is not null) execute function member_usage_track();
create trigger vms_member_usage_update
    after update of spec, deleted_at, cluster_id, tenant_id, created_by on vms
    for each row when (old.created_by is not null or new.created_by is not null)
    execute function member_usage_track();

-- What a member holds, counted from its VMs (the triggers' check).
create function meson_member_usage_recount(t text, s text) returns bigint[]
    language sql stable as $$
    select array[coalesce(sum(u[1]), 0), coalesce(sum(u[2]), 0), coalesce(sum(u[3]), 0)]::bigint[]
    from (select meson_member_vm_usage(v) as u from vms v
          where v.tenant_id = t and v.created_by = s and v.deleted_at is null) x
$$;
