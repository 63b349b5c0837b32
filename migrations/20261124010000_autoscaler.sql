-- The clusters' autoscalers: meson's own secrets (the autoscaler CA,
-- sealed with MESON_SECRETS_KEY) and which client certificate of each
-- cluster is current (issuing a new one revokes the one before).

create table service_secrets (
    name text primary key,
    sealed bytea not null,
    created_at timestamptz not null default now()
);

alter table clusters add column autoscaler_serial text;
