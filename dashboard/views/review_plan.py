"""A `plan` review on its page (issue #46): the plan's items in order, each with its preview,
risk, rules and whether it was simulated, with per-item controls (approve, reject with a
reason, edit its arguments) posted together as one decision bound to the plan's hash
(dashboard.views.review_plan_decide)."""

from __future__ import annotations

import json
from typing import Any

from django.http import QueryDict

from review import selectors
from review.models import ReviewRequest


def plan_context(review: ReviewRequest) -> dict[str, Any]:
    """The page's view of the plan; empty for any other kind of review."""
    if not review.plan:
        return {"plan": None}
    states = {
        item["id"]: item for item in (selectors.task_plan(task=review.task) or {}).get("items", [])
    }
    items = [
        {
            **item,
            "arguments_text": json.dumps(item["arguments"], indent=2, ensure_ascii=False),
            "state": states.get(item["id"], {}).get("state", ""),
            "departed": states.get(item["id"], {}).get("departed", ""),
            "edited_preview": states.get(item["id"], {}).get("edited_preview", ""),
        }
        for item in review.plan["items"]
    ]
    return {"plan": review.plan, "plan_items": items}


def plan_items_posted(post: QueryDict, review: ReviewRequest) -> dict[str, Any]:
    """The per-item decisions of the page's form (`item-<id>-decision`: approve | reject |
    edit, with `-comment` or `-arguments`). ValueError naming the item whose JSON is bad."""
    items: dict[str, Any] = {}
    for item in (review.plan or {}).get("items", []):
        prefix = f"item-{item['id']}-"
        choice = post.get(prefix + "decision", "approve")
        if choice == "reject":
            items[item["id"]] = {"decision": "reject", "comment": post.get(prefix + "comment", "")}
        elif choice == "edit":
            try:
                arguments = json.loads(post.get(prefix + "arguments", ""))
            except ValueError:
                raise ValueError(item["id"]) from None
            items[item["id"]] = {"decision": "edit", "arguments": arguments}
    return items
