"""Schemathesis hooks (loaded through SCHEMATHESIS_HOOKS by test_schemathesis.py): every
generated request that has a body is sent again with another Content-Type a client may use on
a JSON operation, each operation's cases taking the types in turn, up to PER_TYPE bodies per
type and operation in a schemathesis run: every operation meets every type with that many
different bodies, positive and negative (which type reads a body is decided before any
field of it is, so more bodies of one operation exercise no other path; re-sending all of them
was half of the largest shards' requests). django-ninja parses an API body as JSON whatever
its Content-Type, so each of these is a way in; none may answer 5xx."""

from __future__ import annotations

from collections import Counter
from typing import Any

import schemathesis
from schemathesis.core import NOT_SET
from schemathesis.core.failures import ServerError

# "" sends the header empty: Django (like a request with no Content-Type) reads it as none.
OTHER_CONTENT_TYPES = (
    "text/plain",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=harness",
    "",
)
PER_TYPE = 25
# Bodies sent so far per operation: which content type the next one is sent again with.
_sent: Counter[str] = Counter()


@schemathesis.check
def no_server_error_in_any_content_type(ctx: Any, response: Any, case: Any) -> None:
    if case.body is NOT_SET:
        return
    turn = _sent[case.operation.label]
    if turn >= PER_TYPE * len(OTHER_CONTENT_TYPES):
        return
    _sent[case.operation.label] += 1
    content_type = OTHER_CONTENT_TYPES[turn % len(OTHER_CONTENT_TYPES)]
    headers = case.headers.copy()
    headers["Content-Type"] = content_type
    variant = case.derive(headers=headers, keep_auth=True)
    ctx.internals.record_case(parent_id=case.id, case=variant)
    kwargs = dict(ctx.internals.transport_kwargs or {})
    answered = case.operation.schema.transport.send(variant, **kwargs)
    ctx.internals.record_response(case_id=variant.id, response=answered)
    if answered.status_code >= 500:
        raise ServerError(
            operation=case.operation.label,
            status_code=answered.status_code,
            message=f"the same body with `Content-Type: {content_type}` answered "
            f"{answered.status_code}",
        )
