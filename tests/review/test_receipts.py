"""Decision receipts (review.receipts): every way a review is decided writes exactly one
receipt in a hash chain, readable per review and exported as JSON Lines; the chain outlives
the tasks it names."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from checkpoints.recovery import task_cancel
from review.models import DecisionReceipt, ReviewRequest
from review.receipts import GENESIS_HASH
from review.services import ReviewConflict, review_decide, reviews_expire_overdue
from tasks.canonical import canonical_hash
from tasks.models import Task
from tests.conftest import ApiClient, approve, page_client
from tests.factories import ReviewRequestFactory, TaskFactory, ToolCallFactory, scripted_spec

pytestmark = pytest.mark.django_db(transaction=True)

ARGS = {"path": "a.conf", "content": "port=80\n"}


@pytest.fixture
def waiting(operator):
    """waiting(**review fields) -> a pending review of write_file on a task waiting for it."""

    def make(call_status: str = "awaiting_review", **fields):
        task = TaskFactory(
            spec=scripted_spec([], ["write_file"]), status="waiting_review", created_by=operator
        )
        call = ToolCallFactory(
            task=task, tool="write_file", arguments=ARGS, risk="write", status=call_status
        )
        return ReviewRequestFactory(tool_call=call, **fields)

    return make


def receipts_of(review) -> list[DecisionReceipt]:
    return list(DecisionReceipt.objects.filter(review_id=review.id))


def verify() -> tuple[int, str]:
    out, err = StringIO(), StringIO()
    try:
        call_command("verify_receipts", stdout=out, stderr=err)
    except SystemExit as exc:
        return int(exc.code), out.getvalue() + err.getvalue()
    except Exception as exc:  # CommandError: call_command raises instead of exiting
        return 1, str(exc)
    return 0, out.getvalue()


def test_an_approval_writes_one_receipt_naming_who_what_and_the_chain(waiting, operator):
    review = waiting(target_fingerprint={"a.conf": {"sha256": "ab"}}, policy_hash="cd" * 32)
    approve(review, operator, comment="fine")
    (receipt,) = receipts_of(review)
    assert receipt.seq == 1 and receipt.prev_hash == GENESIS_HASH
    assert receipt.decision == "approve" and receipt.via == "api"
    assert receipt.actor == "operator" and receipt.actor_user_id == operator.pk
    assert receipt.task_id == review.task_id
    subject = receipt.subject
    assert subject["tool"] == "write_file" and subject["call_id"] == review.tool_call.call_id
    assert subject["arguments_hash"] == canonical_hash(ARGS)
    assert subject["target_fingerprint"] == {"a.conf": {"sha256": "ab"}}
    assert subject["policy_hash"] == "cd" * 32
    assert subject["status"] == "approved" and subject["approvals"] == ["operator"]
    assert subject["comment"] == "fine"
    assert verify()[0] == 0


def test_each_decision_path_writes_exactly_one_receipt(waiting, operator, second_operator):
    rejected = waiting()
    review_decide(review_id=rejected.id, user=operator, decision="reject", reason="no")
    two = waiting(approvals_required=2)
    approve(two, operator)
    approve(two, second_operator)
    graph = waiting(kind="langgraph", interrupt={"mode": "plain", "allowed": ["respond"]})
    review_decide(review_id=graph.id, user=operator, decision="respond", response={"v": 2})
    unknown = {
        name: waiting(call_status="unknown_outcome", kind="unknown_outcome")
        for name in ("mark_done", "rerun", "fail_task")
    }
    for name, review in unknown.items():
        review_decide(
            review_id=review.id,
            user=operator,
            decision=name,
            arguments_hash=canonical_hash(ARGS),
        )
    overdue = waiting(expires_at=timezone.now() - timedelta(seconds=1))
    assert reviews_expire_overdue() == 1
    canceled = waiting()
    task_cancel(task_id=canceled.task_id, user=operator, reason="stop")
    assert reviews_expire_overdue() == 0  # nothing is recorded twice

    assert [r.decision for r in receipts_of(rejected)] == ["reject"]
    assert [(r.decision, r.actor) for r in receipts_of(two)] == [
        ("approve_partial", "operator"),
        ("approve", "operator2"),
    ]
    assert [r.decision for r in receipts_of(graph)] == ["respond"]
    for name, review in unknown.items():
        assert [r.decision for r in receipts_of(review)] == [name]
    (expired,) = receipts_of(overdue)
    assert (expired.decision, expired.actor, expired.actor_user_id) == (
        "expire",
        "system:sweep",
        None,
    )
    (cancel,) = receipts_of(canceled)
    assert cancel.decision == "cancel" and "operator" in cancel.subject["comment"]
    assert DecisionReceipt.objects.count() == 9
    assert list(DecisionReceipt.objects.values_list("seq", flat=True)) == list(range(1, 10))
    assert verify() == (0, "9 receipts verified; the chain is intact\n")


def test_a_refused_decision_writes_no_receipt(waiting, operator, viewer):
    review = waiting()
    stale = {"decision": "approve", "arguments_hash": "0" * 64}
    assert ApiClient(operator).decide(review.id, **stale).status_code == 409
    assert ApiClient(viewer).decide(review.id, decision="reject").status_code == 403
    assert not DecisionReceipt.objects.exists()


def test_a_decision_on_the_page_says_so(waiting, operator):
    review = waiting()
    body = {"decision": "approve", "arguments_hash": canonical_hash(ARGS)}
    assert page_client(operator).post(f"/reviews/{review.id}/decide/", body).status_code == 302
    (receipt,) = receipts_of(review)
    assert receipt.via == "page" and receipt.decision == "approve"


def test_the_receipt_endpoint_lists_a_reviews_receipts(waiting, operator, second_operator, viewer):
    review = waiting(approvals_required=2)
    approve(review, operator)
    approve(review, second_operator, comment="both of us")
    response = ApiClient(viewer).get(f"/api/v1/reviews/{review.id}/receipt")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["review_id"] == review.id
    first, last = body["receipts"]
    assert (first["decision"], last["decision"]) == ("approve_partial", "approve")
    assert last["prev_hash"] == first["hash"]
    # A receipt verifies on its own: its hash is the canonical hash of the rest of it.
    stored = DecisionReceipt.objects.get(seq=last["seq"])
    assert last["hash"] == stored.hash
    assert last["subject"]["approvals"] == ["operator", "operator2"]
    assert ApiClient(None).get(f"/api/v1/reviews/{review.id}/receipt").status_code == 401
    assert ApiClient(viewer).get("/api/v1/reviews/999999/receipt").status_code == 404


def test_the_export_is_json_lines_that_verify_line_by_line(waiting, operator, viewer):
    reviews = [waiting() for _ in range(3)]
    for review in reviews:
        approve(review, operator)
    response = ApiClient(viewer).get("/api/v1/receipts")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/x-ndjson"
    lines = [json.loads(line) for line in b"".join(response.streaming_content).splitlines()]
    assert [line["seq"] for line in lines] == [1, 2, 3]
    prev = GENESIS_HASH
    for line in lines:
        rest = {key: value for key, value in line.items() if key != "hash"}
        assert canonical_hash(rest) == line["hash"]
        assert line["prev_hash"] == prev
        prev = line["hash"]

    after = ApiClient(viewer).get("/api/v1/receipts", {"since": "2"})
    assert [json.loads(x)["seq"] for x in b"".join(after.streaming_content).splitlines()] == [3]
    future = (timezone.now() + timedelta(days=1)).isoformat()
    later = ApiClient(viewer).get("/api/v1/receipts", {"since": future})
    assert b"".join(later.streaming_content) == b""


@pytest.mark.parametrize("since", ["yesterday", "-1", "²", "9" * 30, "x" * 100])
def test_a_bad_since_is_422_naming_the_field(viewer, since):
    response = ApiClient(viewer).get("/api/v1/receipts", {"since": since})
    assert response.status_code == 422, response.content
    assert response.json()["errors"][0]["field"] == "since"


def test_receipts_outlive_their_task(waiting, operator):
    review = waiting()
    approve(review, operator)
    Task.objects.filter(id=review.task_id).delete()
    assert not ReviewRequest.objects.filter(id=review.id).exists()
    (receipt,) = DecisionReceipt.objects.all()
    assert receipt.review_id == review.id
    assert verify()[0] == 0


def test_a_review_reopened_for_a_changed_target_gets_a_cancel_receipt(paused_review, operator):
    review = paused_review(
        [{"call": "write_file", "args": ARGS}, {"final": "ok"}],
        ["write_file"],
        {"a.conf": "port=1\n"},
    )
    (review.task.workspace_path / "a.conf").write_text("port=443\n")
    with pytest.raises(ReviewConflict):
        approve(review, operator)
    (receipt,) = DecisionReceipt.objects.all()
    assert (receipt.review_id, receipt.decision, receipt.via) == (review.id, "cancel", "recheck")
    assert "a.conf changed" in receipt.subject["comment"]
    assert verify()[0] == 0
