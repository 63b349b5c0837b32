"""schemathesis hooks for tests/schemathesis/run."""

import hashlib

import schemathesis


@schemathesis.hook
def before_call(context, case, kwargs):
    """Makes a generated `Idempotency-Key` depend on the request it comes with.

    Hypothesis shrinks generated header values to a handful ("0", "00", ...),
    and a key reused with another request answers 409 before the request is
    read, so most POSTs would never reach their handler. Deriving the key
    from the generated one and the request keeps replays (same key, same
    request) and malformed keys, and drops the accidental conflicts; the
    e2e tests cover real conflicts.
    """
    headers = case.headers or {}
    key = headers.get("Idempotency-Key")
    if not isinstance(key, str) or not key or len(key) > 200:
        return
    if not all(0x20 <= ord(c) <= 0x7E for c in key):
        return
    request = repr((case.method, case.formatted_path, case.query, case.body)).encode()
    headers["Idempotency-Key"] = f"{key}-{hashlib.sha256(request).hexdigest()[:16]}"
    case.headers = headers
