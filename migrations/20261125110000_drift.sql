-- Drift detection. The reconciler compares every standalone VM meson
-- records running or off with its host's inventory and records what it
-- finds: a VM found off that meson did not stop is `off`, one its host no
-- longer has is `error`; `error_message` says which (cleared when meson
-- next changes the VM's state).
alter table vms add column error_message text;

-- A cluster every node of which is unhealthy is `degraded` (not
-- `running`) until they recover.
alter table clusters drop constraint clusters_status_check;
alter table clusters add constraint clusters_status_check
    check (status in ('creating', 'running', 'updating', 'deleting', 'error', 'degraded'));
