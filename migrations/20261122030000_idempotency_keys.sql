-- Idempotency-Key records of the public API's POSTs, per tenant. A row with a
-- null status is a request still in flight; with a status, the stored response
-- a retry replays. Rows older than 24 h are treated as absent and pruned.
create table idempotency_keys (
    tenant_id        text        not null,
    key              text        not null check (length(key) between 1 and 255),
    request_hash     bytea       not null check (length(request_hash) = 32),
    status           smallint    null check (status between 100 and 599),
    response_body    bytea       null,
    response_headers jsonb       not null default '{}',
    created_at       timestamptz not null default now(),
    primary key (tenant_id, key),
    check ((status is null) = (response_body is null))
);

-- Pruning finds expired keys by age.
create index idempotency_keys_created_at on idempotency_keys (created_at);
