-- `owner`: a tenant's own administrator (an editor who also reads its
-- tenant's audit log) acts, and is audited, under that role.
alter table audit_log drop constraint audit_log_role_check;
alter table audit_log add constraint audit_log_role_check
    check (role in ('viewer', 'editor', 'owner', 'admin'));
