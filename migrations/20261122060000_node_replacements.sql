-- A node made to replace another (upgrade, repair, replace): a retried
-- workflow finds the replacement it already made instead of making another.
alter table nodes add column replaces uuid references nodes (id);
create unique index nodes_replaces on nodes (replaces) where replaces is not null and deleted_at is null;
