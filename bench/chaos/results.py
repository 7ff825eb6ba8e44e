"""A fault's bookkeeping: its injections, what recovery means for each, the results of its
run, and the fault's own definition."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bench.chaos.suite import Chaos


@dataclass
class Injection:
    """One fault injected into one task's run: recovered once `recovered(row)` holds."""

    task_id: str
    at: float  # time.monotonic()
    recovered: Callable[[dict[str, Any]], bool]
    recovered_after: float | None = None


@dataclass
class FaultResult:
    name: str
    title: str
    bound_s: float
    bound_text: str
    injected: int = 0
    tasks: list[str] = field(default_factory=list)
    keys: dict[str, list[str]] = field(default_factory=dict)  # task id -> ledger keys expected
    approvals: list[str] = field(default_factory=list)  # review ids approved by the scenario
    injections: list[Injection] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    def recoveries(self) -> list[float]:
        return [
            i.recovered_after if i.recovered_after is not None else float("inf")
            for i in self.injections
        ]


def progress_since(row: dict[str, Any]) -> Callable[[dict[str, Any]], bool]:
    """Recovered: a new lease (redispatched), a new checkpoint (the run carried on), or the
    task paused for a person or finished."""
    epoch, seq = row["lease_epoch"], row["seq"]

    def recovered(now: dict[str, Any]) -> bool:
        return (
            now["lease_epoch"] > epoch
            or now["seq"] > seq
            or now["status"] in ("waiting_review", "succeeded")
        )

    return recovered


def hosts_unavailable() -> str:
    from bench.hosts import unavailable

    return unavailable()


@dataclass
class Fault:
    name: str
    title: str
    bound_s: float
    bound_text: str
    run: Callable[[Chaos, FaultResult, int], None]
    full: int
    short: int
    batch: int
    hosts: bool = False  # needs worker hosts (bench/hosts/: root, network namespaces)
