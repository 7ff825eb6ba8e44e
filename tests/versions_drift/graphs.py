"""Graphs a deploy swaps under a paused graph task (issue #43): `before_b` stops at a
breakpoint before its node `b`; in `renamed_c` that node is called `c`; `before_b_watched`
is `before_b` with one more interrupt point elsewhere (drift that does not touch `b`);
`b_then_c` keeps `b` (and its breakpoint) but sends it on to `c`: `b` itself changed (its
edges), not gone."""

from __future__ import annotations

from tests.durable.graphs import State, chain, first, mark


def b(state: State) -> dict:
    mark(state, "b")
    return {"trail": state["trail"] + ",b"}


def c(state: State) -> dict:
    mark(state, "c")
    return {"trail": state["trail"] + ",c"}


before_b = chain(State, ("first", first), ("b", b)).copy(update={"interrupt_before_nodes": ["b"]})
renamed_c = chain(State, ("first", first), ("c", c)).copy(update={"interrupt_before_nodes": ["c"]})
before_b_watched = before_b.copy(update={"interrupt_after_nodes": ["__start__"]})
b_then_c = chain(State, ("first", first), ("b", b), ("c", c)).copy(
    update={"interrupt_before_nodes": ["b"]}
)
