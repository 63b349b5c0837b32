-- Organisations and their members. A tenant is an organisation, under the
-- same id. A JWT's tenant claim keeps naming its caller's organisation and
-- role; membership adds roles: a subject listed here holds its role in the
-- organisation whatever its token's claim says, and, as an owner or a
-- manager, in the organisation's sub-organisations too.

-- `manager`: manages an organisation's members and invitations (never its
-- owners), above an editor and below an owner.
alter table audit_log drop constraint audit_log_role_check;
alter table audit_log add constraint audit_log_role_check
    check (role in ('viewer', 'editor', 'manager', 'owner', 'admin'));
alter table api_tokens drop constraint api_tokens_role_check;
alter table api_tokens add constraint api_tokens_role_check
    check (role in ('viewer', 'editor', 'manager', 'owner'));

-- The organisations meson knows more of than an id: a name, and a parent.
-- An organisation without a row is a root one named by its id. A
-- sub-organisation's id is its parent's, a dot and its own name.
create table organizations (
    id text primary key check (length(id) between 1 and 128),
    parent_id text references organizations (id),
    name text not null check (char_length(name) between 1 and 64),
    created_by text not null,
    created_at timestamptz not null default now(),
    check (parent_id is null or left(id, length(parent_id) + 1) = parent_id || '.')
);
create index organizations_parent on organizations (parent_id) where parent_id is not null;
alter table organizations enable row level security;
alter table organizations force row level security;
create policy tenant_isolation on organizations using (meson_tenant_visible(id));

create table members (
    tenant_id text not null check (length(tenant_id) between 1 and 128),
    subject text not null check (char_length(subject) between 1 and 256),
    email text check (char_length(email) between 3 and 254),
    role text not null check (role in ('viewer', 'editor', 'manager', 'owner')),
    added_by text not null,
    created_at timestamptz not null default now(),
    updated_at timestamptz not null default now(),
    primary key (tenant_id, subject)
);
create trigger members_updated_at before update on members
    for each row execute function set_updated_at();
-- Whose memberships a subject has, across organisations.
create index members_subject on members (subject);
alter table members enable row level security;
alter table members force row level security;
create policy tenant_isolation on members using (meson_tenant_visible(tenant_id));

-- An organisation that has owners keeps one: the last cannot leave, be
-- removed or lose the role. The writers take the organisation's member
-- lock first (`meson_members_lock`), so two owners cannot remove each
-- other at once; this is the wall behind them.
create function meson_members_lock(tenant text) returns void
    language sql volatile
    as $$ select pg_advisory_xact_lock(hashtextextended('meson.members:' || tenant, 0)) $$;

create function members_keep_an_owner() returns trigger
    language plpgsql as $$
begin
    if old.role = 'owner' and (tg_op = 'DELETE' or new.role <> 'owner')
       and not exists (select 1 from members m
                       where m.tenant_id = old.tenant_id and m.role = 'owner'
                         and m.subject <> old.subject) then
        raise exception 'organisation % would have no owner left', old.tenant_id
            using errcode = 'check_violation', constraint = 'members_last_owner';
    end if;
    return case tg_op when 'DELETE' then old else new end;
end $$;
create trigger members_keep_an_owner before update of role or delete on members
    for each row execute function members_keep_an_owner();

-- Invitations by email: meson hands the inviter a secret (shown once,
-- stored as its SHA-256) to pass on; the IdP subject whose verified email
-- is the invitation's accepts it with that secret and becomes a member.
create table invitations (
    id uuid primary key,
    tenant_id text not null check (length(tenant_id) between 1 and 128),
    email text not null check (char_length(email) between 3 and 254),
    role text not null check (role in ('viewer', 'editor', 'manager', 'owner')),
    secret_hash bytea not null unique,
    invited_by text not null,
    created_at timestamptz not null default now(),
    expires_at timestamptz not null,
    accepted_at timestamptz,
    accepted_by text,
    revoked_at timestamptz,
    revoked_by text,
    check ((accepted_at is null) = (accepted_by is null)),
    check ((revoked_at is null) = (revoked_by is null)),
    check (accepted_at is null or revoked_at is null)
);
alter table invitations enable row level security;
alter table invitations force row level security;
create policy tenant_isolation on invitations using (meson_tenant_visible(tenant_id));
create index invitations_tenant on invitations (tenant_id, created_at desc, id);
-- One open invitation per address and organisation.
create unique index invitations_open on invitations (tenant_id, lower(email))
    where accepted_at is null and revoked_at is null;
