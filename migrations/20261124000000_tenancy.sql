-- Tenancy's second wall, quotas and the audit log.
--
-- Row-level security: every row of a tenant's resource is visible only to a
-- session whose `meson.tenant` setting names that tenant, or is `*` (the
-- workers, the migrator, and the API's operator routes). An unset or empty
-- setting sees nothing: a code path that forgets its scope fails closed.
-- FORCE makes the policies bind the tables' owner too, which is the role
-- meson connects as; only superusers and BYPASSRLS roles pass around them
-- (mesond warns at start when it connects as one).

create function meson_tenant_visible(tenant text) returns boolean
    language sql stable parallel safe
    as $$ select coalesce(current_setting('meson.tenant', true) in ('*', tenant), false) $$;

create function meson_system_scope() returns boolean
    language sql stable parallel safe
    as $$ select coalesce(current_setting('meson.tenant', true) = '*', false) $$;

-- Resources that carry their tenant.
alter table vms enable row level security;
alter table vms force row level security;
create policy tenant_isolation on vms using (meson_tenant_visible(tenant_id));

alter table volumes enable row level security;
alter table volumes force row level security;
create policy tenant_isolation on volumes using (meson_tenant_visible(tenant_id));

alter table actions enable row level security;
alter table actions force row level security;
create policy tenant_isolation on actions using (meson_tenant_visible(tenant_id));

alter table idempotency_keys enable row level security;
alter table idempotency_keys force row level security;
create policy tenant_isolation on idempotency_keys using (meson_tenant_visible(tenant_id));

alter table networks enable row level security;
alter table networks force row level security;
create policy tenant_isolation on networks using (meson_tenant_visible(tenant_id));

alter table clusters enable row level security;
alter table clusters force row level security;
create policy tenant_isolation on clusters using (meson_tenant_visible(tenant_id));

-- Rows that belong to a tenant through their parent: visible when the parent
-- is (the parent's own policy applies inside the subquery).
alter table action_resources enable row level security;
alter table action_resources force row level security;
create policy tenant_isolation on action_resources using (
    meson_system_scope()
    or exists (select 1 from actions a where a.id = action_resources.action_id));

alter table network_hosts enable row level security;
alter table network_hosts force row level security;
create policy tenant_isolation on network_hosts using (
    meson_system_scope()
    or exists (select 1 from networks n where n.id = network_hosts.network_id));

alter table network_reservations enable row level security;
alter table network_reservations force row level security;
create policy tenant_isolation on network_reservations using (
    meson_system_scope()
    or exists (select 1 from networks n where n.id = network_reservations.network_id));

alter table vm_networks enable row level security;
alter table vm_networks force row level security;
create policy tenant_isolation on vm_networks using (
    meson_system_scope()
    or exists (select 1 from vms v where v.id = vm_networks.vm_id));

alter table node_pools enable row level security;
alter table node_pools force row level security;
create policy tenant_isolation on node_pools using (
    meson_system_scope()
    or exists (select 1 from clusters c where c.id = node_pools.cluster_id));

alter table nodes enable row level security;
alter table nodes force row level security;
create policy tenant_isolation on nodes using (
    meson_system_scope()
    or exists (select 1 from clusters c where c.id = nodes.cluster_id));

-- A tenant's quotas where they differ from the defaults meson is configured
-- with (a null column takes the default).
create table tenant_quotas (
    tenant_id text primary key check (length(tenant_id) between 1 and 128),
    vms bigint check (vms >= 0),
    vcpus bigint check (vcpus >= 0),
    ram_mib bigint check (ram_mib >= 0),
    storage_gb bigint check (storage_gb >= 0),
    clusters bigint check (clusters >= 0),
    nodes bigint check (nodes >= 0),
    updated_by text not null,
    created_at timestamptz not null default now(),
    updated_at timestamptz not null default now()
);
create trigger tenant_quotas_updated_at before update on tenant_quotas
    for each row execute function set_updated_at();
alter table tenant_quotas enable row level security;
alter table tenant_quotas force row level security;
create policy tenant_isolation on tenant_quotas using (meson_tenant_visible(tenant_id));

-- Who did what to which resource, when, from which request. Append-only: the
-- application never updates or deletes a row (retention pruning aside).
create table audit_log (
    id bigint generated always as identity primary key,
    at timestamptz not null default now(),
    tenant_id text not null,
    subject text not null,
    role text not null check (role in ('viewer', 'editor', 'admin')),
    operation text not null,
    method text not null,
    path text not null,
    resource_type text,
    resource_id text,
    action_id uuid,
    status smallint not null check (status between 100 and 599),
    correlation_id text not null
);
create index audit_log_tenant on audit_log (tenant_id, id);
create index audit_log_resource on audit_log (resource_id, id) where resource_id is not null;
create index audit_log_at on audit_log (at);
alter table audit_log enable row level security;
alter table audit_log force row level security;
create policy tenant_isolation on audit_log using (meson_tenant_visible(tenant_id));

create function audit_log_append_only() returns trigger language plpgsql as $$
begin
    raise exception 'the audit log is append-only' using errcode = 'check_violation';
end;
$$;
create trigger audit_log_append_only before update on audit_log
    for each row execute function audit_log_append_only();
