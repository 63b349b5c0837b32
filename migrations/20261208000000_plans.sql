-- Plans: named quota sets an operator puts tenants on. A tenant's quota is
-- its own override if set, else its plan's figure if set, else the
-- deployment's default (MESON_QUOTA_*), in that order. `tenant_limits`
-- is the first two layers, which every quota check reads; the defaults
-- come from meson's configuration.

create table plans (
    name text primary key check (name ~ '^[a-z0-9][a-z0-9-]{0,62}$' and name not in ('default', 'none')),
    description text not null default '' check (length(description) <= 200),
    vms bigint check (vms >= 0),
    vcpus bigint check (vcpus >= 0),
    ram_mib bigint check (ram_mib >= 0),
    storage_gb bigint check (storage_gb >= 0),
    clusters bigint check (clusters >= 0),
    nodes bigint check (nodes >= 0),
    images_gb bigint check (images_gb >= 0),
    updated_by text not null,
    created_at timestamptz not null default now(),
    updated_at timestamptz not null default now()
);
create trigger plans_updated_at before update on plans
    for each row execute function set_updated_at();

-- A plan in use cannot be deleted.
alter table tenant_quotas add column plan text references plans (name) on update cascade;
create index tenant_quotas_plan on tenant_quotas (plan) where plan is not null;

create view tenant_limits with (security_invoker = true) as
    select t.tenant_id, t.plan,
           coalesce(t.vms, p.vms) as vms,
           coalesce(t.vcpus, p.vcpus) as vcpus,
           coalesce(t.ram_mib, p.ram_mib) as ram_mib,
           coalesce(t.storage_gb, p.storage_gb) as storage_gb,
           coalesce(t.clusters, p.clusters) as clusters,
           coalesce(t.nodes, p.nodes) as nodes,
           coalesce(t.images_gb, p.images_gb) as images_gb
    from tenant_quotas t left join plans p on p.name = t.plan;
