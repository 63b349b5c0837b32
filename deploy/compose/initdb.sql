-- Run once by the postgres image, as its superuser, when the compose volume
-- is first initialised. meson connects as an ordinary role owning its
-- database: a superuser (or a BYPASSRLS role) would pass around the
-- row-level security that keeps tenants apart, and meson warns about it.
-- The password is a demo value.
CREATE ROLE meson LOGIN PASSWORD 'meson' NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS;
CREATE DATABASE meson OWNER meson;
