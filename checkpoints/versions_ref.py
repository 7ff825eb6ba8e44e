"""Checkpoint.versions by reference: a run's `versions` dict (agent.versions) is the same on
every checkpoint it writes (~370 bytes, two or three rows a step), so its body is stored once,
as a VersionBody named by its sha256 (written with the run's other bodies, in its first
durable write), and a checkpoint's column holds {"harness": {"version"}, "ref": sha256}: the
harness version stays inline for the SQL check of a rolling deploy's handback
(agent.jobs). Reading the column gives the whole dict back (VersionsField.from_db_value, the
bodies cached by their hash: a body never changes), so every reader (templates, API, drift,
fork, recovery, the SDK runners) sees what it always saw.

Only a `StoredVersions` (what agent.versions.versions_current returns, whose body the run
writes) is stored by reference; any other dict (a fork's copy of a checkpoint read back, a
checkpoint written before this) is stored whole, as before."""

from __future__ import annotations

import copy
from typing import Any

from django.db import models

from checkpoints.lru import BoundedCache
from tasks.canonical import canonical_hash

REF_KEY = "ref"
_bodies: BoundedCache[str, dict[str, Any]] = BoundedCache(256)


class StoredVersions(dict[str, Any]):
    """A run's versions whose body is stored as the VersionBody `ref` (its canonical hash).
    Known to this process from now on: its checkpoints read back (a page, the API) need no
    query for it."""

    def __init__(self, versions: dict[str, Any]) -> None:
        super().__init__(versions)
        self.ref = canonical_hash(dict(versions))
        _bodies.put(self.ref, copy.deepcopy(dict(versions)))

    def compact(self) -> dict[str, Any]:
        """The column's value: the reference, and the harness version inline."""
        harness = self.get("harness")
        inline = {"version": harness.get("version")} if isinstance(harness, dict) else {}
        return {"harness": inline, REF_KEY: self.ref}


def versions_resolved(value: Any) -> Any:
    """A column's value whole: a reference replaced by its body (a copy: callers may change
    it); anything else, or a reference whose body is missing, as it is."""
    if not isinstance(value, dict) or not isinstance(value.get(REF_KEY), str):
        return value
    ref = value[REF_KEY]
    body = _bodies.get(ref)
    if body is None:
        from checkpoints.models import VersionBody

        found = VersionBody.objects.filter(sha256=ref).values_list("body", flat=True).first()
        if not isinstance(found, dict):
            return value
        _bodies.put(ref, found)
        body = found
    return copy.deepcopy(body)


class VersionsField(models.JSONField):
    """A JSONField storing a StoredVersions by reference and reading references back whole."""

    def get_prep_value(self, value: Any) -> Any:
        if isinstance(value, StoredVersions):
            value = value.compact()
        return super().get_prep_value(value)

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        return versions_resolved(super().from_db_value(value, expression, connection))
