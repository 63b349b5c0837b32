-- One lock order for a VM's usage rows: the tenant's, then the member's.
--
-- A VM create locks `tenant_usage` in its own statement before its insert
-- fires the member trigger (`member_usage`). A delete or an update has no
-- such statement: its triggers take the rows, in the order of their names,
-- and `vms_member_usage_*` sorted before `vms_usage`, so a delete took the
-- member's row, then the tenant's, while a create by the same member took
-- them the other way round: PostgreSQL found the deadlock and failed one of
-- them. Renamed, the member triggers fire after `vms_usage` on every path.
alter trigger vms_member_usage_insert on vms rename to vms_usage_member_insert;
alter trigger vms_member_usage_delete on vms rename to vms_usage_member_delete;
alter trigger vms_member_usage_update on vms rename to vms_usage_member_update;
