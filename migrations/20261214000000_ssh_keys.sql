-- SSH keys a tenant keeps at meson, to name at a VM's create instead of
-- pasting the key each time. A key's name and its fingerprint are each
-- its tenant's only one among live keys; a deleted key keeps its row
-- (deleted_at) for the audit log's sake.

create table ssh_keys (
    id uuid primary key,
    tenant_id text not null,
    name text not null check (char_length(name) between 1 and 63),
    -- The OpenSSH line as given (type, base64 key, comment), trimmed.
    public_key text not null check (char_length(public_key) <= 16384),
    -- SHA256:<unpadded base64 of the key blob's SHA-256>, as ssh-keygen -l.
    fingerprint text not null,
    labels jsonb not null default '{}',
    created_at timestamptz not null default now(),
    deleted_at timestamptz
);
alter table ssh_keys enable row level security;
alter table ssh_keys force row level security;
create policy tenant_isolation on ssh_keys using (meson_tenant_visible(tenant_id));
create unique index ssh_keys_tenant_name on ssh_keys (tenant_id, name) where deleted_at is null;
create unique index ssh_keys_tenant_fingerprint on ssh_keys (tenant_id, fingerprint)
    where deleted_at is null;
create index ssh_keys_tenant_created on ssh_keys (tenant_id, created_at, id) where deleted_at is null;
