"""The suite's client and operator: tasks created and reviews decided over the REST API."""

from __future__ import annotations

import contextlib
import json
from typing import Any

from bench.chaos.clocks import ChaosError
from bench.chaos.results import FaultResult


class ChaosOperator:
    """The API as a client would use it, and the operator who answers the reviews a fault opens."""

    def post(self, path: str, body: dict[str, Any]) -> Any:
        return self.api.post(path, json.dumps(body), content_type="application/json")

    def task_create(
        self,
        result: FaultResult,
        *,
        script: list[dict],
        keys: list[str],
        review: list[str] | None = None,
        budget: dict | None = None,
        priority: str = "default",
    ) -> str:
        tools = sorted({turn["call"] for turn in script if "call" in turn})
        spec: dict[str, Any] = {
            "title": f"chaos {result.name}",
            "goal": "survive",
            "tools": tools,
            "model": {"kind": "scripted", "script": script},
            "budget": {"max_steps": len(script) + 2, **(budget or {})},
            "priority": priority,
        }
        if review:
            spec["review"] = {"always": review}
        response = self.post("/api/v1/tasks", spec)
        if response.status_code != 201:
            raise ChaosError(f"task create: {response.status_code} {response.content[:300]!r}")
        task_id = response.json()["id"]
        result.tasks.append(task_id)
        result.keys[task_id] = keys
        return task_id

    def approve(self, review_id: Any) -> int:
        shown = self.api.get(f"/api/v1/reviews/{review_id}")
        if shown.status_code != 200:
            return shown.status_code
        response = self.post(
            f"/api/v1/reviews/{review_id}/decision",
            {"decision": "approve", "arguments_hash": shown.json()["arguments_hash"]},
        )
        return response.status_code

    def operate(self, result: FaultResult) -> None:
        from review.models import ReviewRequest
        from review.services import review_resolve_unknown_outcome
        from tasks.canonical import canonical_hash

        try:
            pending = list(
                ReviewRequest.objects.filter(task_id__in=result.tasks, status="pending").order_by(
                    "id"
                )
            )
        except Exception:
            from django.db import connections

            connections.close_all()
            return
        ledger = None
        for review in pending:
            if review.kind == "unknown_outcome":
                ledger = ledger if ledger is not None else self.ledger()
                key = review.arguments.get("key")
                decision = "mark_done" if ledger.get(key) else "rerun"
                with contextlib.suppress(Exception):
                    review_resolve_unknown_outcome(
                        review_id=review.id,
                        user=self.operator,
                        decision=decision,
                        arguments_hash=canonical_hash(review.arguments),
                        comment="checked the ledger",
                    )
            elif str(review.id) not in self._decided and self._asked_again(review):
                # Asked again about a call already approved: counted, and approved so that the
                # task can finish.
                self._decided.add(str(review.id))
                with contextlib.suppress(Exception):
                    self.approve(review.id)

    def _asked_again(self, review: Any) -> bool:
        from review.models import ReviewRequest

        return (
            ReviewRequest.objects.filter(
                task_id=review.task_id, kind=review.kind, status="approved", id__lt=review.id
            )
            .filter(original_arguments=review.original_arguments)
            .exists()
        )
