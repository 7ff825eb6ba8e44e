"""`/api/v1/reviews…` endpoints. Thin: parse, call one service or selector, shape the output.
One module per family of endpoints, each with its own router, mounted here under one tag:

    reviews         the list, one review, decisions on one review or several
    triage          claim, unclaim, assign, comment (review.triage)
    standing_rules  standing rules with their track record; pause, resume
    receipts        decision receipts: one review's, the chain as JSON Lines
    plans           a plan task's plan and its items' states (GET /tasks/{id}/plan)
    schemas         a review as the API shows it, and ErrorOut

Each operation spells out its `operation_id`: the one it had when this was one module
(`review_api_<function>`), which clients generated from the OpenAPI schema call it by."""

from ninja import Router

from review.api import plans, receipts, reviews, standing_rules, triage

router = Router(tags=["reviews"])
for endpoints in (reviews, triage, standing_rules, receipts, plans):
    router.add_router("", endpoints.router)

__all__ = ["router"]
