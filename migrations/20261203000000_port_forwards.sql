-- Port forwards: a public port on the AtomOS host of a private network's VM,
-- relayed by the host's NAT to a port of that VM (the network daemon's
-- /portforward). A forward lives on its VM's host; the host's address is
-- its public address.

create table port_forwards (
    id uuid primary key,
    tenant_id text not null,
    network_id uuid not null references networks (id),
    vm_id uuid not null references vms (id),
    protocol text not null check (protocol in ('tcp', 'udp')),
    public_port integer not null check (public_port between 1 and 65535),
    private_port integer not null check (private_port between 1 and 65535),
    status text not null check (status in ('creating', 'active', 'deleting', 'error')),
    target_id uuid not null references atomos_targets (id),
    -- Whether it holds its public port: from its request on, until it is
    -- found not forwarding (`error`: its create failed, or its host lost
    -- it); a forward in error being deleted holds none either.
    port_held boolean not null default true,
    error_message text,
    created_at timestamptz not null default now(),
    updated_at timestamptz not null default now(),
    deleted_at timestamptz
);
alter table port_forwards enable row level security;
alter table port_forwards force row level security;
create policy tenant_isolation on port_forwards using (meson_tenant_visible(tenant_id));
create index port_forwards_network on port_forwards (network_id, created_at, id) where deleted_at is null;
create index port_forwards_vm on port_forwards (vm_id) where deleted_at is null;
-- A public port is one forward's on its host, whatever the tenant.
create unique index port_forwards_public_port on port_forwards (target_id, protocol, public_port)
    where deleted_at is null and port_held;
create trigger port_forwards_updated_at before update on port_forwards
    for each row execute function set_updated_at();

alter table action_resources drop constraint action_resources_resource_type_check;
alter table action_resources add constraint action_resources_resource_type_check
    check (resource_type in ('vm', 'volume', 'network', 'cluster', 'node_pool', 'node', 'image',
                             'port_forward'));
