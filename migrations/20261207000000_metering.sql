-- Metering: what each tenant used, second by second, as durable intervals
-- written by triggers in the same transaction as the state change that
-- starts or ends them, so a crash can neither lose nor double-count a
-- second. Costs are computed from the intervals and the prices in force at
-- the time; a month's statement is written once the month is over and is
-- never changed after.
--
-- What is metered (meter = the resource's type):
--   vm       1 per running VM, at the VM's own hourly price (its host's
--            quote, recorded at placement and re-quoted on a resize)
--   volume   GB of a volume that exists (available or attached; a VM's
--            cloud-init disk is not metered)
--   cluster  1 per running cluster (its control plane's fee; its nodes are
--            VMs and metered as such)
--   image    GB of an available image
--   backup   GB of an available backup
-- Quantities are per hour: a 20 GB volume for 90 minutes is 30 GB-hours.

-- The metering clock: the database's, unless a test froze it (a one-row
-- table that production never writes), so that a simulated month can be
-- driven through real processes that all read the same clock.
create table meson_clock (
    only_row boolean primary key default true check (only_row),
    frozen_at timestamptz not null
);

create function meson_clock() returns timestamptz language sql stable as $$
    select coalesce((select frozen_at from meson_clock), now())
$$;

create table usage_intervals (
    id bigint generated always as identity primary key,
    tenant_id text not null,
    resource_type text not null check (resource_type in ('vm', 'volume', 'cluster', 'image', 'backup')),
    resource_id uuid not null,
    resource_name text not null,
    -- A node VM's cluster, so a cluster's cost includes its nodes.
    cluster_id uuid,
    quantity numeric not null check (quantity > 0),
    -- Per unit and hour when the resource carries its own price (a VM's
    -- quote); null takes the price list's.
    unit_price numeric check (unit_price >= 0),
    currency text check ((unit_price is null) = (currency is null)),
    provider text,
    region text,
    labels jsonb not null default '{}',
    started_at timestamptz not null,
    ended_at timestamptz,
    check (ended_at is null or ended_at >= started_at)
);
alter table usage_intervals enable row level security;
alter table usage_intervals force row level security;
create policy tenant_isolation on usage_intervals using (meson_tenant_visible(tenant_id));
create unique index usage_intervals_open on usage_intervals (resource_type, resource_id)
    where ended_at is null;
create index usage_intervals_tenant on usage_intervals (tenant_id, started_at);
create index usage_intervals_ended on usage_intervals (ended_at);

-- An interval is written twice at most: opened, then ended. Nothing else
-- changes it, and nothing deletes it.
create function usage_intervals_guard() returns trigger language plpgsql as $$
begin
    if tg_op = 'DELETE' then
        raise exception 'usage intervals are never deleted';
    end if;
    if old.ended_at is not null
       or (to_jsonb(new) - 'ended_at') is distinct from (to_jsonb(old) - 'ended_at') then
        raise exception 'a usage interval is only ever ended';
    end if;
    return new;
end;
$$;
create trigger usage_intervals_guard before update or delete on usage_intervals
    for each row execute function usage_intervals_guard();

-- What a row is metered as now, or null when it is not metered.
create type meson_meter as (
    tenant_id text,
    name text,
    cluster_id uuid,
    quantity numeric,
    unit_price numeric,
    currency text,
    provider text,
    region text,
    labels jsonb
);

create function meson_meter_of(tbl name, r record) returns meson_meter
language plpgsql stable as $$
declare
    v vms;
    x volumes;
    c clusters;
    i images;
    b backups;
    owner vms;
begin
    -- Each branch is planned only when taken.
    if tbl = 'vms' then
        v := r::vms;
        if v.deleted_at is null and v.status = 'running' and v.price_hourly is not null then
            return row(v.tenant_id, v.name, v.cluster_id, 1, v.price_hourly::numeric,
                       coalesce(v.currency, 'EUR'), v.provider, v.region, v.labels)::meson_meter;
        end if;
    elsif tbl = 'volumes' then
        x := r::volumes;
        if x.deleted_at is null and x.status in ('available', 'attached') and x.kind <> 'cloudinit' then
            select * into owner from vms where id = x.vm_id;
            return row(x.tenant_id, x.name, owner.cluster_id, x.size_gb, null, null,
                       coalesce(x.provider, owner.provider), coalesce(x.region, owner.region),
                       x.labels)::meson_meter;
        end if;
    elsif tbl = 'clusters' then
        c := r::clusters;
        if c.deleted_at is null and c.status in ('running', 'updating') then
            return row(c.tenant_id, c.name, c.id, 1, null, null,
                       c.spec->>'provider', c.spec->>'region', c.labels)::meson_meter;
        end if;
    elsif tbl = 'images' then
        i := r::images;
        if i.deleted_at is null and i.status = 'available' then
            return row(i.tenant_id, i.name, null, i.size_gb, null, null,
                       i.provider, i.region, i.labels)::meson_meter;
        end if;
    elsif tbl = 'backups' then
        b := r::backups;
        if b.deleted_at is null and b.status = 'available' then
            select * into owner from vms where id = b.vm_id;
            return row(b.tenant_id, b.name, null, b.size_gb, null, null,
                       owner.provider, owner.region, b.labels)::meson_meter;
        end if;
    end if;
    return null;
end;
$$;

-- The metered type of each table's rows.
create function meson_meter_type(tbl name) returns text language sql immutable as $$
    select case tbl when 'vms' then 'vm' when 'volumes' then 'volume' when 'clusters' then 'cluster'
                    when 'images' then 'image' when 'backups' then 'backup' end
$$;

-- Ends the row's open interval and opens the next when what it is metered
-- as changed. Each interval starts where the previous ended (never before:
-- the clock of a transaction is the time it began, which may be earlier
-- than the commit that wrote the previous change).
create function usage_track_interval() returns trigger language plpgsql as $$
declare
    was meson_meter;
    now_ meson_meter;
    kind text := meson_meter_type(tg_table_name);
    id_ uuid;
    at timestamptz := meson_clock();
    ended timestamptz;
begin
    if tg_op <> 'INSERT' then
        was := meson_meter_of(tg_table_name, old);
        id_ := old.id;
    end if;
    if tg_op <> 'DELETE' then
        now_ := meson_meter_of(tg_table_name, new);
        id_ := new.id;
    end if;
    if was is not distinct from now_ then
        return null;
    end if;
    update usage_intervals set ended_at = greatest(at, started_at)
        where resource_type = kind and resource_id = id_ and ended_at is null
        returning ended_at into ended;
    if now_.tenant_id is not null then
        insert into usage_intervals (tenant_id, resource_type, resource_id, resource_name, cluster_id,
                                     quantity, unit_price, currency, provider, region, labels, started_at)
        values (now_.tenant_id, kind, id_, now_.name, now_.cluster_id, now_.quantity,
                now_.unit_price, now_.currency, now_.provider, now_.region,
                coalesce(now_.labels, '{}'), greatest(at, ended));
    end if;
    return null;
end;
$$;

create trigger vms_metering after insert or delete or update of status, deleted_at, price_hourly,
    currency, labels, tenant_id on vms for each row execute function usage_track_interval();
create trigger volumes_metering after insert or delete or update of status, deleted_at, size_gb,
    labels, tenant_id on volumes for each row execute function usage_track_interval();
create trigger clusters_metering after insert or delete or update of status, deleted_at,
    labels, tenant_id on clusters for each row execute function usage_track_interval();
create trigger images_metering after insert or delete or update of status, deleted_at, size_gb,
    labels, tenant_id on images for each row execute function usage_track_interval();
create trigger backups_metering after insert or delete or update of status, deleted_at, size_gb,
    labels, tenant_id on backups for each row execute function usage_track_interval();

-- What meson has already: metered from now on.
insert into usage_intervals (tenant_id, resource_type, resource_id, resource_name, cluster_id,
                             quantity, unit_price, currency, provider, region, labels, started_at)
select m.tenant_id, s.kind, s.id, m.name, m.cluster_id, m.quantity, m.unit_price, m.currency,
       m.provider, m.region, coalesce(m.labels, '{}'), now()
from (select 'vm' as kind, id, meson_meter_of('vms', v) as m from vms v
      union all select 'volume', id, meson_meter_of('volumes', x) from volumes x
      union all select 'cluster', id, meson_meter_of('clusters', c) from clusters c
      union all select 'image', id, meson_meter_of('images', i) from images i
      union all select 'backup', id, meson_meter_of('backups', b) from backups b) s,
     lateral (select (s.m).*) m
where m.tenant_id is not null;

-- The price list: per unit and hour, per meter, for a provider or for
-- every provider ('*'), from a time on. A price is never edited: a new row
-- takes over from its effective_from, so the past keeps its prices.
create table prices (
    meter text not null check (meter in ('volume', 'cluster', 'image', 'backup')),
    provider text not null default '*' check (length(provider) between 1 and 64),
    unit_price numeric not null check (unit_price >= 0),
    currency text not null check (currency ~ '^[A-Z]{3}$'),
    effective_from timestamptz not null,
    primary key (meter, provider, effective_from)
);
-- EUR per GB-hour (about 0.044, 0.022 and 0.022 per GB-month) and per
-- cluster-hour.
insert into prices (meter, unit_price, currency, effective_from) values
    ('volume', 0.00006, 'EUR', '1970-01-01T00:00:00Z'),
    ('image', 0.00003, 'EUR', '1970-01-01T00:00:00Z'),
    ('backup', 0.00003, 'EUR', '1970-01-01T00:00:00Z'),
    ('cluster', 0.05, 'EUR', '1970-01-01T00:00:00Z');

-- Each price with the time it stopped being in force.
create view price_periods as
    select meter, provider, unit_price, currency, effective_from,
           coalesce(lead(effective_from) over (partition by meter, provider order by effective_from),
                    'infinity') as until
    from prices;

-- The one definition of cost: every metered piece of tenant `t`'s (every
-- tenant's for null) usage within [a, b), clipped to it and split where a
-- price changed, with its cost = quantity × hours × price. Open intervals
-- run to the metering clock.
create function meson_usage_pieces(t text, a timestamptz, b timestamptz)
returns table (tenant_id text, resource_type text, resource_id uuid, resource_name text,
               cluster_id uuid, labels jsonb, provider text, region text, quantity numeric,
               started timestamptz, ended timestamptz, unit_price numeric, currency text,
               cost numeric)
language sql stable as $$
    with iv as (
        select i.*, greatest(i.started_at, a) as s,
               least(coalesce(i.ended_at, meson_clock()), b) as e
        from usage_intervals i
        where (t is null or i.tenant_id = t)
          and i.started_at < b and (i.ended_at is null or i.ended_at > a)
    ), priced as (
        select iv.*, iv.s as ps, iv.e as pe, iv.unit_price as price, iv.currency as cur
        from iv where iv.unit_price is not null
        union all
        select iv.*, greatest(iv.s, p.effective_from), least(iv.e, p.until), p.unit_price, p.currency
        from iv
        join price_periods p
          on p.meter = iv.resource_type
         and p.provider = coalesce((select q.provider from prices q
                                    where q.meter = iv.resource_type and q.provider = iv.provider
                                    limit 1), '*')
         and p.effective_from < iv.e and p.until > iv.s
        where iv.unit_price is null
    )
    select tenant_id, resource_type, resource_id, resource_name, cluster_id, labels, provider,
           region, quantity, ps, pe, price, cur,
           quantity * price * extract(epoch from pe - ps) / 3600
    from priced
    where pe > ps
$$;

-- Monthly statements: written once a month (UTC) is over, one per tenant
-- and currency, with a line per resource; never changed after.
create table statements (
    id uuid primary key,
    tenant_id text not null,
    period_start timestamptz not null,
    period_end timestamptz not null,
    currency text not null,
    total numeric not null,
    closed_at timestamptz not null,
    unique (tenant_id, period_start, currency)
);
alter table statements enable row level security;
alter table statements force row level security;
create policy tenant_isolation on statements using (meson_tenant_visible(tenant_id));

create table statement_lines (
    statement_id uuid not null references statements (id),
    resource_type text not null,
    resource_id uuid not null,
    resource_name text not null,
    cluster_id uuid,
    -- Unit-hours (GB-hours for storage).
    quantity numeric not null,
    cost numeric not null,
    primary key (statement_id, resource_type, resource_id)
);
alter table statement_lines enable row level security;
alter table statement_lines force row level security;
create policy tenant_isolation on statement_lines using (
    exists (select 1 from statements s where s.id = statement_id));

-- The months whose statements are written, so a pass knows where it is.
create table closed_months (
    period_start timestamptz primary key,
    closed_at timestamptz not null
);

create function statements_frozen() returns trigger language plpgsql as $$
begin
    raise exception 'a closed statement never changes';
end;
$$;
create trigger statements_frozen before update or delete on statements
    for each row execute function statements_frozen();
create trigger statement_lines_frozen before update or delete on statement_lines
    for each row execute function statements_frozen();
create trigger closed_months_frozen before update or delete on closed_months
    for each row execute function statements_frozen();

-- The start of the month (UTC) after the one that holds `t`, or `t`'s own.
create function meson_month_of(t timestamptz, months int default 0) returns timestamptz
language sql immutable as $$
    select (date_trunc('month', t at time zone 'UTC') + make_interval(months => months)) at time zone 'UTC'
$$;

-- Writes the statements of every month that ended at least `grace` ago
-- and has none yet, oldest first, each month in one go: a statement per
-- tenant and currency with a line per resource, from the same pieces as
-- any usage query. Returns how many months it closed.
create function meson_close_statements(grace interval) returns integer language plpgsql as $$
declare
    clock timestamptz := meson_clock();
    due timestamptz := meson_month_of(clock - grace);
    m timestamptz;
    closed integer := 0;
begin
    -- One closer at a time; a second waits, then finds the work done.
    perform pg_advisory_xact_lock(hashtext('meson_close_statements'));
    select meson_month_of(max(period_start), 1) into m from closed_months;
    if m is null then
        select meson_month_of(min(started_at)) into m from usage_intervals;
    end if;
    while m is not null and m < due loop
        -- Two statements: rows a statement inserts are not visible to the
        -- row-level security check of its own other parts.
        insert into statements (id, tenant_id, period_start, period_end, currency, total, closed_at)
        select gen_random_uuid(), p.tenant_id, m, meson_month_of(m, 1), p.currency,
               round(sum(p.cost), 2), clock
        from meson_usage_pieces(null, m, meson_month_of(m, 1)) p
        group by p.tenant_id, p.currency;
        insert into statement_lines (statement_id, resource_type, resource_id, resource_name,
                                     cluster_id, quantity, cost)
        select s.id, l.resource_type, l.resource_id, l.resource_name, l.cluster_id,
               l.quantity, l.cost
        from (select p.tenant_id, p.currency, p.resource_type, p.resource_id,
                     (array_agg(p.resource_name order by p.ended desc))[1] as resource_name,
                     (array_agg(p.cluster_id order by p.ended desc))[1] as cluster_id,
                     sum(p.quantity * extract(epoch from p.ended - p.started) / 3600) as quantity,
                     sum(p.cost) as cost
              from meson_usage_pieces(null, m, meson_month_of(m, 1)) p
              group by p.tenant_id, p.currency, p.resource_type, p.resource_id) l
        join statements s
          on s.tenant_id = l.tenant_id and s.currency = l.currency and s.period_start = m;
        insert into closed_months (period_start, closed_at) values (m, clock);
        closed := closed + 1;
        m := meson_month_of(m, 1);
    end loop;
    return closed;
end;
$$;
