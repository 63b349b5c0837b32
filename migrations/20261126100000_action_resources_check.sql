-- An action's resources are visible with their action (the policy's USING
-- is unchanged). A new row is checked the same way, but by a volatile
-- function, which sees the rows the statement has written so far: a VM's
-- create writes its action and the action's resources in one statement,
-- whose own snapshot does not yet hold the action.
create function meson_action_visible(action uuid) returns boolean
    language plpgsql volatile
    as $$ begin return exists (select 1 from actions a where a.id = action); end $$;

drop policy tenant_isolation on action_resources;
create policy tenant_isolation on action_resources
    using (meson_system_scope()
           or exists (select 1 from actions a where a.id = action_resources.action_id))
    with check (meson_system_scope() or meson_action_visible(action_id));
