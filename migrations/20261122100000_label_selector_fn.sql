-- Whether `labels` satisfies a Kubernetes label selector given as the JSON
-- array meson_core::selector builds ([{op, key, values}], ops in, not_in,
-- exists, not_exists); every list with a label_selector uses it.
create function meson_selector_matches(labels jsonb, selector jsonb) returns boolean
language sql immutable parallel safe as $$
    select not exists (
        select 1 from jsonb_array_elements(selector) c
        where not coalesce(case c->>'op'
            when 'in' then (c->'values') ? (labels->>(c->>'key'))
            when 'not_in' then not coalesce((c->'values') ? (labels->>(c->>'key')), false)
            when 'exists' then labels ? (c->>'key')
            when 'not_exists' then not (labels ? (c->>'key'))
        end, false))
$$;
