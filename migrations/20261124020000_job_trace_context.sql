-- The W3C trace context of the request that enqueued a job
-- ({"traceparent": ..., "tracestate": ...}), so that the worker's spans join
-- the request's trace. Null when traces are not exported.
alter table jobs add column trace_context jsonb;
