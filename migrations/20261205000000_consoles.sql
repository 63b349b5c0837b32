-- Consoles: a VM's screen over VNC, relayed by meson. A request hands out
-- a one-time WebSocket URL (its token stored as a hash) and a VNC password
-- valid for a short while; the first connection with both uses it up and
-- becomes the console's only session. The password is kept only until the
-- session begins or the request expires: VNC authentication needs it in
-- the clear to check the client's answer.

create table consoles (
    id uuid primary key,
    tenant_id text not null,
    vm_id uuid not null references vms (id),
    -- Who asked for it, as the audit log names callers.
    subject text not null,
    role text not null,
    token_hash bytea not null,
    password text,
    status text not null
        check (status in ('requested', 'open', 'closed', 'expired', 'revoked')),
    created_at timestamptz not null default now(),
    expires_at timestamptz not null,
    opened_at timestamptz,
    -- Renewed by the process relaying an open session; a session not
    -- renewed for a while lost its relay (the process stopped).
    seen_at timestamptz,
    closed_at timestamptz,
    close_reason text,
    -- Bytes relayed from the client to the VM, and back.
    bytes_in bigint not null default 0,
    bytes_out bigint not null default 0,
    check (status = 'requested' or password is null)
);
alter table consoles enable row level security;
alter table consoles force row level security;
create policy tenant_isolation on consoles using (meson_tenant_visible(tenant_id));
create index consoles_tenant on consoles (tenant_id, created_at desc, id);
create index consoles_vm on consoles (vm_id, created_at desc);
create index consoles_live on consoles (vm_id) where status = 'open';

-- Consoles as they are now: a request past its expiry is expired, an open
-- session whose relay stopped renewing it (30 s: six heartbeats) is
-- closed, whether or not a sweep wrote so yet. Every read goes through it;
-- the sweep writes what it shows.
create view consoles_now with (security_invoker = true) as
select c.id, c.tenant_id, c.vm_id, c.subject, c.role, c.created_at, c.expires_at,
       c.opened_at, c.seen_at, c.closed_at, c.bytes_in, c.bytes_out,
       case
           when c.status = 'requested' and c.expires_at <= now() then 'expired'
           when c.status = 'open'
                and coalesce(c.seen_at, c.opened_at, c.created_at) < now() - interval '30 seconds'
               then 'closed'
           else c.status
       end as status,
       case
           when c.status = 'open'
                and coalesce(c.seen_at, c.opened_at, c.created_at) < now() - interval '30 seconds'
               then 'the meson process relaying it stopped'
           else c.close_reason
       end as close_reason
from consoles c;
