-- Capacity promised to VMs placed on a host but not registered there yet.
-- AtomOS's `canallocate` answers for one VM against what the host holds
-- now; placements made at the same time would each be told "yes" for the
-- same free cores. A placement therefore asks each host for its VM plus
-- every reservation still pending there, and writes its own reservation
-- (under a per-host lock) in the transaction that records the placement.
-- A reservation goes once the VM is registered (AtomOS counts it then),
-- when the placement is undone, and when the VM is deleted or fails.
create table host_reservations (
    vm_id uuid primary key references vms (id),
    target_id uuid not null references atomos_targets (id),
    vcpus integer not null check (vcpus >= 0),
    ram_mib bigint not null check (ram_mib >= 0),
    created_at timestamptz not null default now()
);
create index host_reservations_target on host_reservations (target_id);
