-- Sub-organisations: an organisation's quotas are carved out of its
-- parent's. What a sub-organisation may hold counts as held by its parent
-- (in `tenant_usage`, beside the parent's own resources): so the quota rule
-- that guards every create refuses a parent that would exceed its quota
-- with its own resources and what it gave away, and refuses a carve that
-- does not fit. A sub-organisation's quotas are explicit (its
-- `tenant_quotas` row; a null counts as nothing carved).

create function meson_quota_row(q tenant_quotas) returns bigint[] language sql immutable as $$
    select array[coalesce(q.vms, 0), coalesce(q.vcpus, 0), coalesce(q.ram_mib, 0),
                 coalesce(q.storage_gb, 0), coalesce(q.clusters, 0), coalesce(q.nodes, 0),
                 coalesce(q.images_gb, 0)]::bigint[]
$$;

-- Keeps a parent's usage in step with its sub-organisations' quotas.
create function meson_carve() returns trigger language plpgsql as $$
declare
    parent text;
begin
    if tg_op <> 'INSERT' then
        select o.parent_id into parent from organizations o where o.id = old.tenant_id;
        if parent is not null then
            perform meson_usage_add(parent, meson_usage_neg(meson_quota_row(old)));
        end if;
    end if;
    if tg_op <> 'DELETE' then
        select o.parent_id into parent from organizations o where o.id = new.tenant_id;
        if parent is not null then
            perform meson_usage_add(parent, meson_quota_row(new));
        end if;
    end if;
    return null;
end;
$$;
create trigger tenant_quotas_carve after insert or update or delete on tenant_quotas
    for each row execute function meson_carve();

-- The recount counts the carve as the triggers do.
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
          where b.tenant_id = t and b.deleted_at is null
          union all
          select meson_quota_row(q) from tenant_quotas q
          join organizations o on o.id = q.tenant_id
          where o.parent_id = t) s
$$;
