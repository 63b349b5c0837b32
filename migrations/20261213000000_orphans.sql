-- VMs a host holds that meson has no row for: made after the backup a
-- restored database was taken from, or made outside meson. The
-- reconciler writes what each host reports; the VMs whose names carry a
-- tenant meson knows are adopted back into it, the rest wait here for an
-- operator's decision (adopt into a tenant, or delete from the host).
-- Nothing here is a tenant's: only the system scope sees it.
create table orphans (
    id uuid primary key,
    target_id uuid not null references atomos_targets (id),
    -- The host's id and name of the VM.
    atomos_id text not null,
    atomos_name text not null,
    -- The tenant the name's tag names (meson_core::naming), among those
    -- meson knows.
    tenant_id text,
    state text not null,
    vcpus integer not null check (vcpus >= 0),
    ram_mib bigint not null check (ram_mib >= 0),
    ipv4 inet,
    -- The VM's volumes as its host's storage lists them:
    -- [{atomos_id, name, size_gb, bootable, readonly, cloudinit}].
    volumes jsonb not null default '[]' check (jsonb_typeof(volumes) = 'array'),
    -- Why it was not adopted by itself.
    reason text not null,
    -- An operator's decision, carried out by the reconciler's next pass.
    decision text check (decision in ('adopt', 'delete')),
    adopt_tenant text,
    adopt_name text,
    decided_by text,
    decided_at timestamptz,
    -- What stopped the decision last time it was tried.
    error_message text,
    first_seen timestamptz not null default now(),
    last_seen timestamptz not null default now(),
    constraint orphans_one_per_vm unique (target_id, atomos_id),
    constraint orphans_adopt_names_tenant check ((decision = 'adopt') = (adopt_tenant is not null))
);
create index orphans_first_seen on orphans (first_seen, id);

alter table orphans enable row level security;
alter table orphans force row level security;
create policy system_only on orphans using (meson_system_scope());
