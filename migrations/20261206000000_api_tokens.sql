-- API tokens issued by meson: a tenant's automation authenticates with a
-- secret meson made (shown once; stored as its SHA-256), with a role no
-- higher than its creator's. Revoked or expired tokens are refused at
-- once: every request reads its token's row.

create table api_tokens (
    id uuid primary key,
    tenant_id text not null,
    name text not null check (char_length(name) between 1 and 64),
    role text not null check (role in ('viewer', 'editor', 'owner')),
    -- The secret's first characters, shown to tell tokens apart.
    prefix text not null,
    secret_hash bytea not null unique,
    created_by text not null,
    created_at timestamptz not null default now(),
    expires_at timestamptz,
    revoked_at timestamptz,
    revoked_by text,
    -- Renewed at most once a minute.
    last_used_at timestamptz
);
alter table api_tokens enable row level security;
alter table api_tokens force row level security;
create policy tenant_isolation on api_tokens using (meson_tenant_visible(tenant_id));
create index api_tokens_tenant on api_tokens (tenant_id, created_at desc, id);
-- A live token's name is its tenant's only one.
create unique index api_tokens_name on api_tokens (tenant_id, name) where revoked_at is null;
