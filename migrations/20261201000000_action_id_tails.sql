-- An action may be named by the last 8 hex digits of its id, as mesonctl's
-- tables print it (the random part of a UUIDv7); a prefix already has the
-- (tenant_id, id) index.
create index actions_tenant_tail on actions (tenant_id, right(id::text, 8));
