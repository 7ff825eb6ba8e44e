"""What the suite watches: task rows, the ledger, horses, injections and their recovery."""

from __future__ import annotations

import json
import time
from collections import Counter
from typing import Any

from bench.chaos.results import FaultResult, Injection, progress_since


class ChaosWatch:
    """Observing the suite's tasks: their rows, the ledger, the horses running them, and the
    injections waiting to recover."""

    def rows(self, task_ids: list[str]) -> dict[str, dict[str, Any]]:
        from django.db.models import Max

        from tasks.models import Task

        try:
            found = Task.objects.filter(id__in=task_ids).annotate(seq=Max("checkpoints__seq"))
            return {
                str(t.id): {"status": t.status, "lease_epoch": t.lease_epoch, "seq": t.seq or 0}
                for t in found
            }
        except Exception:  # the database is being restarted: nothing seen this time
            from django.db import connections

            connections.close_all()
            return {}

    def ledger(self) -> Counter:
        path = self.ledger_dir / "ledger.jsonl"
        if not path.exists():
            return Counter()
        return Counter(
            json.loads(line)["key"] for line in path.read_text().splitlines() if line.strip()
        )

    def watch(self, result: FaultResult, *, timeout: float) -> None:
        """Poll until every task of the fault has succeeded (or `timeout`), noting when each
        injection recovered, and acting as the operator on the way: a call whose outcome was
        lost is marked done or run again after a look at the ledger; a second review of an
        approved call is approved again (and counted)."""
        deadline = time.monotonic() + timeout
        while True:
            rows = self.rows(result.tasks)
            now = time.monotonic()
            for injection in result.injections:
                row = rows.get(injection.task_id)
                if injection.recovered_after is None and row and injection.recovered(row):
                    injection.recovered_after = now - injection.at
            self.operate(result)
            done = rows and all(
                rows.get(t, {}).get("status") in ("succeeded", "failed", "canceled")
                for t in result.tasks
            )
            if (done and all(i.recovered_after is not None for i in result.injections)) or (
                now > deadline
            ):
                return
            time.sleep(0.1)

    def horse_of(self, task_id: str) -> int | None:
        from tasks.models import Task

        worker_id = Task.objects.values_list("worker_id", flat=True).get(id=task_id)
        return int(worker_id.rsplit(":", 1)[1]) if worker_id else None

    def in_call(self, task_id: str, tool: str, index: int = 0) -> bool:
        """The `index`-th call of `tool` was proposed and has not finished."""
        from tasks.models import TaskEvent

        proposed = [
            c["call_id"]
            for e in TaskEvent.objects.filter(task_id=task_id, type="model_decision").order_by("id")
            for c in e.payload["calls"]
            if c["tool"] == tool
        ]
        if len(proposed) <= index:
            return False
        return not TaskEvent.objects.filter(
            task_id=task_id, type="tool_finished", payload__call_id=proposed[index]
        ).exists()

    def inject(self, result: FaultResult, task_id: str, *, recovered=None) -> None:
        row = self.rows([task_id])[task_id]
        result.injections.append(
            Injection(
                task_id=task_id, at=time.monotonic(), recovered=recovered or progress_since(row)
            )
        )
        result.injected += 1
