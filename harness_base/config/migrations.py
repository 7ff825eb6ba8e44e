"""`migrations:` in harness.yaml (issue #43): functions an operator registers to carry a task
paused under old code over to the new code, which a `version_drift` review can apply by name.

    migrations:
      ticket-priority: myteam.migrations:add_priority
      graph-rename: {function: myteam.migrations.rename_node, description: "review -> check"}

A function takes the old checkpoint's state as JSON (`state`: the loop's AgentState, with
`pending` calls and `messages`; or a graph's `values` and `next`) and the review's `drift`,
and returns the state to go on from."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StringConstraints

from harness_base.config.fields import Strict

MigrationName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")]
# `package.module:function` or `package.module.function`.
MigrationRef = Annotated[
    str,
    StringConstraints(
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*[.:][A-Za-z_][A-Za-z0-9_]*$"
    ),
]


class MigrationEntry(Strict):
    function: MigrationRef
    description: str = Field(default="", max_length=500)


def migration_entry(ref: str | MigrationEntry) -> MigrationEntry:
    """A `migrations` value as an entry (a bare reference has no description)."""
    return ref if isinstance(ref, MigrationEntry) else MigrationEntry(function=ref)
