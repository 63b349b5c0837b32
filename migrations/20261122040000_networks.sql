-- Private networks: a tenant's CIDR with a DHCP range (or meson's own IPAM
-- when dhcp is false), realized lazily on each AtomOS host that runs one of
-- its VMs, and the VMs attached to them.

create table networks (
    id uuid primary key,
    tenant_id text not null,
    name text not null,
    status text not null check (status in ('available', 'deleting')),
    labels jsonb not null default '{}' check (jsonb_typeof(labels) = 'object'),
    cidr cidr not null check (family(cidr) = 4),
    gateway inet not null check (gateway << cidr),
    dhcp boolean not null,
    -- The addresses handed out (by AtomOS's DHCP, or by meson when dhcp is false).
    range_start inet not null check (range_start << cidr),
    range_last inet not null check (range_last << cidr),
    created_at timestamptz not null default now(),
    updated_at timestamptz not null default now(),
    deleted_at timestamptz,
    constraint networks_range_ordered check (range_start <= range_last)
);
create unique index networks_tenant_name on networks (tenant_id, name) where deleted_at is null;
create index networks_tenant_id on networks (tenant_id, id) where deleted_at is null;
create trigger networks_updated_at before update on networks
    for each row execute function set_updated_at();

-- Where a network exists on AtomOS: one row per host it is made on. The row
-- is written before the network is created there (atomos_id still null), so
-- a crash in between leaves a trace the delete workflow follows by name.
create table network_hosts (
    network_id uuid not null references networks (id),
    target_id uuid not null references atomos_targets (id),
    atomos_id text,
    created_at timestamptz not null default now(),
    primary key (network_id, target_id)
);

-- A VM's NIC on a network, with the MAC its guest matches it by. `address` is set when meson's IPAM handed it out
-- (dhcp false); an address is unique in its network until the row goes, so
-- it is reused only after the VM that held it is gone.
create table vm_networks (
    vm_id uuid not null references vms (id),
    network_id uuid not null references networks (id),
    position smallint not null check (position >= 0),
    mac macaddr not null,
    address inet,
    created_at timestamptz not null default now(),
    primary key (vm_id, network_id),
    unique (vm_id, position),
    unique (network_id, address),
    unique (network_id, mac)
);
create index vm_networks_network on vm_networks (network_id);

-- Actions may now touch networks.
alter table action_resources drop constraint action_resources_resource_type_check;
alter table action_resources add constraint action_resources_resource_type_check
    check (resource_type in ('vm', 'volume', 'network'));
