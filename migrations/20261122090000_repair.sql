-- Node auto-repair: when each node's VM first ran, so that a node that
-- never phones home is found once MESON_NODE_STARTUP_TIMEOUT_S has passed
-- since its VM started running (not since the node row was written: a
-- node may wait long for its turn in a big cluster's create).
alter table nodes add column running_since timestamptz;

-- Every workflow that brings a node up moves it out of `creating` when
-- AtomOS reports its VM running (meson_db::clusters::node_booted), or when
-- it phones home first. Recording the moment here keeps every such
-- workflow, present and future, from having to remember to.
create function nodes_running_since() returns trigger language plpgsql as $$
begin
    if old.status = 'creating' and new.status in ('not_ready', 'ready')
       and new.running_since is null then
        new.running_since := now();
    end if;
    return new;
end;
$$;
create trigger nodes_running_since before update of status on nodes
    for each row execute function nodes_running_since();

-- Nodes that ran before this migration: their last change is the best guess.
update nodes set running_since = updated_at
    where status in ('not_ready', 'ready') and running_since is null;
