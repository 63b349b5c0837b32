-- Quota usage is defined once, here: the per-row rules the usage triggers
-- apply (meson_vm_usage, meson_cluster_usage, meson_pool_usage,
-- meson_volume_usage), a recount that sums the same rules from scratch, and
-- the rule that decides which quotas a request would exceed. meson's code
-- only formats a refusal from what these answer.

-- What a VM of this spec holds: (vms, vcpus, ram_mib, storage_gb, clusters,
-- nodes). A spec without a figure counts 0 for it.
create function meson_vm_spec_usage(spec jsonb) returns bigint[] language plpgsql immutable as $$
begin
    return array[
        1,
        coalesce((spec->'cpu'->>'cores')::bigint * (spec->'cpu'->>'threads_per_core')::bigint, 0),
        coalesce((spec->>'memory_mib')::bigint, 0),
        coalesce((spec->>'boot_volume_gb')::bigint, 0)
            + coalesce((select sum((x->>'size_gb')::bigint)
                        from jsonb_array_elements(spec->'volumes') x), 0),
        0, 0]::bigint[];
end;
$$;

-- A live VM that is not a cluster's node counts its spec.
create or replace function meson_vm_usage(v vms) returns bigint[] language plpgsql stable as $$
begin
    return case when v.deleted_at is null and v.cluster_id is null
                then meson_vm_spec_usage(v.spec)
                else array[0, 0, 0, 0, 0, 0] end::bigint[];
end;
$$;

-- A tenant's usage counted from scratch by the triggers' own rules: what
-- tenant_usage must always hold.
create function meson_usage_recount(t text) returns bigint[] language sql stable as $$
    select array[coalesce(sum(u[1]), 0), coalesce(sum(u[2]), 0), coalesce(sum(u[3]), 0),
                 coalesce(sum(u[4]), 0), coalesce(sum(u[5]), 0), coalesce(sum(u[6]), 0)]::bigint[]
    from (select meson_vm_usage(v) as u from vms v
          where v.tenant_id = t and v.deleted_at is null
          union all
          select meson_cluster_usage(c) from clusters c
          where c.tenant_id = t and c.deleted_at is null
          union all
          select meson_volume_usage(x) from volumes x
          where x.tenant_id = t and x.deleted_at is null) s
$$;

-- The quota rule: the resources (1-based, in the order above) that a
-- request adding `more` to `held` takes over `quota`. Only what a request
-- adds to can be exceeded (a tenant over a lowered quota may still shrink);
-- a quota of i64::MAX is unlimited.
create function meson_quota_over(held bigint[], quota bigint[], more bigint[])
returns int[] language sql immutable as $$
    select coalesce(array_agg(i order by i), '{}')::int[]
    from generate_subscripts(held, 1) as i
    where more[i] > 0 and quota[i] < 9223372036854775807 and held[i] > quota[i] - more[i]
$$;
