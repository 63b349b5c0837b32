-- Managed Kubernetes: clusters, their node pools and nodes. Every node is a
-- VM (vms.cluster_id set: hidden from /v1/vms) on the cluster's own private
-- network (networks.cluster_id set), with the control-plane endpoint's
-- address reserved in that network.

create table clusters (
    id uuid primary key,
    tenant_id text not null,
    name text not null,
    status text not null check (status in ('creating', 'running', 'updating', 'deleting', 'error')),
    labels jsonb not null default '{}' check (jsonb_typeof(labels) = 'object'),
    -- The validated, normalized request (meson_core::kaas::KaasSpec).
    spec jsonb not null,
    kubernetes_version text not null,
    update_policy text not null check (update_policy in ('NEVER_UPDATE', 'PATCH_UPDATE', 'ALWAYS_UPDATE')),
    -- The API server's address (a VIP on the nodes' network), port 6443.
    endpoint inet,
    -- ClusterSecrets as JSON, sealed with the configured key (AEAD, the
    -- cluster id as associated data). Never logged, never on the wire.
    secrets bytea,
    error_message text,
    created_at timestamptz not null default now(),
    updated_at timestamptz not null default now(),
    deleted_at timestamptz
);
create unique index clusters_tenant_name on clusters (tenant_id, name) where deleted_at is null;
create index clusters_tenant_id on clusters (tenant_id, id) where deleted_at is null;
create trigger clusters_updated_at before update on clusters
    for each row execute function set_updated_at();

create table node_pools (
    id uuid primary key,
    cluster_id uuid not null references clusters (id),
    name text not null,
    -- meson_core::kaas::PoolSpec; its node counts are the columns below.
    spec jsonb not null,
    autoscale boolean not null,
    min_nodes integer not null check (min_nodes >= 0),
    max_nodes integer not null check (max_nodes >= 1),
    desired_nodes integer not null,
    created_at timestamptz not null default now(),
    updated_at timestamptz not null default now(),
    deleted_at timestamptz,
    constraint node_pools_bounds check (min_nodes <= desired_nodes and desired_nodes <= max_nodes)
);
create unique index node_pools_cluster_name on node_pools (cluster_id, name) where deleted_at is null;
create trigger node_pools_updated_at before update on node_pools
    for each row execute function set_updated_at();

create table nodes (
    id uuid primary key,
    cluster_id uuid not null references clusters (id),
    -- Null for control-plane nodes.
    pool_id uuid references node_pools (id),
    role text not null check (role in ('control_plane', 'worker')),
    vm_id uuid not null unique references vms (id),
    name text not null,
    status text not null check (status in ('creating', 'not_ready', 'ready', 'deleting', 'creation_error')),
    error_message text,
    kubernetes_version text not null,
    -- SHA-256 of the secret in the node's phone-home URL, set when its
    -- cloud-init is rendered (the secret itself is never stored).
    phone_home_hash bytea,
    phoned_home_at timestamptz,
    created_at timestamptz not null default now(),
    updated_at timestamptz not null default now(),
    deleted_at timestamptz,
    constraint nodes_role_pool check ((role = 'worker') = (pool_id is not null))
);
create unique index nodes_cluster_name on nodes (cluster_id, name) where deleted_at is null;
create index nodes_cluster on nodes (cluster_id) where deleted_at is null;
create trigger nodes_updated_at before update on nodes
    for each row execute function set_updated_at();

alter table vms add column cluster_id uuid references clusters (id);
create index vms_cluster on vms (cluster_id) where cluster_id is not null;

alter table networks add column cluster_id uuid references clusters (id);
-- A cluster's network is named after the cluster; it never clashes with
-- the tenant's own network names.
drop index networks_tenant_name;
create unique index networks_tenant_name on networks (tenant_id, name)
    where deleted_at is null and cluster_id is null;

-- Addresses held in a network by something other than a VM's NIC (a
-- cluster's API endpoint VIP).
create table network_reservations (
    network_id uuid not null references networks (id),
    address inet not null,
    purpose text not null,
    created_at timestamptz not null default now(),
    primary key (network_id, address)
);

alter table action_resources drop constraint action_resources_resource_type_check;
alter table action_resources add constraint action_resources_resource_type_check
    check (resource_type in ('vm', 'volume', 'network', 'cluster', 'node_pool', 'node'));

-- Node VMs are named after their cluster; they never clash with the
-- tenant's own VM names.
drop index vms_tenant_name;
create unique index vms_tenant_name on vms (tenant_id, name)
    where deleted_at is null and cluster_id is null;
