"""Review services: opening review requests (from the agent loop), deciding them (operators),
expiring them (the sweep); who hears of each is review/notifications/. One module per state
machine and per family of operations, each importing only the modules listed below it:

    decide            review_decide: an operator approves, edits, rejects or responds
    gates             the loop's gates: review_gate, review_gate_unknown_outcome (ReviewPause)
    unknown_outcome   review_resolve_unknown_outcome: mark done, re-run or fail the task
    plans             reviews of kind plan: review_decide_plan approves one (per item) or
                      rejects it (plan_gate: review_gate_plan opens it when a dry run ends)
    version_drift     review_resolve_version_drift: the code changed under a paused call;
                      continue, migrate, restart or cancel (drift_gate opens it,
                      drift_choices checks and records the choices)
    expiry            reviews_expire_overdue (the sweep)
    settle            a decided review settled: its call, its record, the task requeued
    reopen            an approval finds the targets changed: the review reopens (review_reopen)
    standing_rules    a standing rule's approval in the loop (review_gate_standing); distrust
    rule_switch       a standing rule's kill switch: pause, resume, revoke
    cancel            reviews_cancel_pending (cancel, retry, rollback)
    remember          an approval made a standing rule (review_decide's `remember`)
    edits             edited arguments: schema, policy, the stricter requirements; their
                      preview before an approval (edit_preview)
    approvals         the deadline, the hash its decider saw, approvals counted
    graph_interrupts  reviews of LangGraph interrupts: accepted decisions, the resume value
    transitions       the state machine: review_request_open, review_transition
    identities        a person's Slack user id (reviewer_slack_id_set)
    errors            ReviewError and its kinds (HTTP statuses)

Lock contract: every service here that changes a review locks the task row first
(`tasks.services.task_lock`, the order the loop and `task_transition` use), then the review
row. A decision therefore serialises with every other decision on the same task: exactly one
of several concurrent decisions sees the review `pending`; the others get ReviewConflict.

This package re-exports the public names, so `from review.services import review_decide`
keeps working; code inside the package imports the module that holds a name."""

from review.models import STANDING_RULE
from review.selectors.plans import PLAN
from review.services.cancel import reviews_cancel_pending
from review.services.decide import review_decide
from review.services.drift_choices import migrate_refusal
from review.services.drift_gate import VERSION_DRIFT
from review.services.edits import edit_preview
from review.services.errors import ReviewConflict, ReviewError, ReviewForbidden, ReviewInvalid
from review.services.expiry import reviews_expire_overdue
from review.services.gates import ReviewPause, review_gate, review_gate_unknown_outcome
from review.services.graph_interrupts import graph_resume_value
from review.services.identities import reviewer_slack_id_set
from review.services.plan_gate import review_gate_plan
from review.services.plans import review_decide_plan
from review.services.reopen import TARGET_CHANGED, review_reopen
from review.services.rule_switch import (
    standing_rule_pause,
    standing_rule_resume,
    standing_rule_revoke,
)
from review.services.standing_rules import (
    StandingWrite,
    review_gate_standing,
    standing_rule_actor,
    standing_rules_distrust,
)
from review.services.transitions import review_request_open, review_transition
from review.services.unknown_outcome import (
    UNKNOWN_OUTCOME,
    UNKNOWN_OUTCOME_DECISIONS,
    review_resolve_unknown_outcome,
)
from review.services.version_drift import (
    VERSION_DRIFT_DECISIONS,
    review_resolve_version_drift,
)

__all__ = [
    "reviewer_slack_id_set",
    "STANDING_RULE",
    "TARGET_CHANGED",
    "UNKNOWN_OUTCOME",
    "UNKNOWN_OUTCOME_DECISIONS",
    "VERSION_DRIFT",
    "migrate_refusal",
    "VERSION_DRIFT_DECISIONS",
    "PLAN",
    "ReviewConflict",
    "ReviewError",
    "ReviewForbidden",
    "ReviewInvalid",
    "ReviewPause",
    "StandingWrite",
    "edit_preview",
    "graph_resume_value",
    "review_decide",
    "review_decide_plan",
    "review_gate_plan",
    "review_gate",
    "review_gate_standing",
    "review_gate_unknown_outcome",
    "review_reopen",
    "review_request_open",
    "review_resolve_unknown_outcome",
    "review_resolve_version_drift",
    "review_transition",
    "reviews_cancel_pending",
    "reviews_expire_overdue",
    "standing_rule_actor",
    "standing_rule_pause",
    "standing_rule_resume",
    "standing_rule_revoke",
    "standing_rules_distrust",
]
