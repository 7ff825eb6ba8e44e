"""`/api/v1/reviews…`: shapes, the permission matrix and the error codes."""

from __future__ import annotations

import pytest

from tasks.models import Task
from tests.review.conftest import four_eyes_on_deletes

pytestmark = pytest.mark.django_db(transaction=True)


def test_list_and_get_show_what_an_operator_needs(paused_review, api_client, viewer):
    review = paused_review()
    client = api_client(viewer)
    listed = client.get("/api/v1/reviews?status=pending").json()
    assert [r["id"] for r in listed] == [review.id]
    item = client.get(f"/api/v1/reviews/{review.id}").json()
    assert item["task_id"] == str(review.task_id)
    assert item["tool"] == "delete_file" and item["status"] == "pending"
    assert item["arguments"] == {"path": "old.log"}
    assert item["matched_rules"][0]["name"] == "destructive"
    assert "-stale" in item["preview"]
    assert 0 < item["time_left_s"] <= 4 * 3600
    assert item["url"].endswith(f"/reviews/{review.id}/")
    assert client.get("/api/v1/reviews?status=approved").json() == []


def test_list_filters_by_tool_risk_and_task(paused_review, api_client, operator):
    deletion = paused_review()
    config = paused_review(
        script=[{"call": "write_file", "args": {"path": "a.conf", "content": "x"}}, {"final": "x"}],
        tools=["write_file"],
    )
    client = api_client(operator)
    assert [r["id"] for r in client.get("/api/v1/reviews?tool=write_file").json()] == [config.id]
    assert [r["id"] for r in client.get("/api/v1/reviews?risk=destructive").json()] == [deletion.id]
    by_task = client.get(f"/api/v1/reviews?task_id={deletion.task_id}").json()
    assert [r["id"] for r in by_task] == [deletion.id]
    assert [r["id"] for r in client.get("/api/v1/reviews").json()] == [deletion.id, config.id]


def test_permission_matrix(paused_review, api_client, operator, viewer, outsider, decider):
    review = paused_review()
    anonymous = api_client(None)
    assert anonymous.get("/api/v1/reviews").status_code == 401
    assert anonymous.decide(review.id, decision="approve").status_code == 401
    assert api_client(viewer).decide(review.id, decision="approve").status_code == 403
    assert api_client(outsider).decide(review.id, decision="approve").status_code == 403
    assert Task.objects.get(pk=review.task_id).status == "waiting_review"

    assert api_client(decider).decide(review.id, decision="approve").status_code == 200
    other = paused_review()
    response = api_client(operator).decide(other.id, decision="reject", reason="no")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "rejected" and body["decided_by"] == "operator"


def test_four_eyes_over_the_api(paused_review, api_client, operator, second_operator, decider):
    four_eyes_on_deletes()
    review = paused_review(user=operator)
    creator = api_client(operator).decide(review.id, decision="approve")
    assert creator.status_code == 403 and "creator" in creator.json()["detail"]
    first = api_client(second_operator).decide(review.id, decision="approve")
    assert first.status_code == 200
    assert first.json()["status"] == "pending"
    assert [a["user"] for a in first.json()["approvals"]] == ["operator2"]
    assert api_client(second_operator).decide(review.id, decision="approve").status_code == 409
    second = api_client(decider).decide(review.id, decision="approve")
    assert second.status_code == 200 and second.json()["status"] == "approved"


def test_errors_are_404_409_and_422_never_500(paused_review, api_client, operator):
    review = paused_review()
    client = api_client(operator)
    assert client.get("/api/v1/reviews/999999").status_code == 404
    assert client.get("/api/v1/reviews/not-a-number").status_code == 404
    assert client.decide(999999, decision="approve").status_code == 404

    bad_body = client.decide(review.id, decision="maybe")
    assert bad_body.status_code == 422 and bad_body.json()["errors"][0]["field"] == "decision"
    bad_args = client.decide(review.id, decision="approve", arguments={"path": 5})
    assert bad_args.status_code == 422
    assert bad_args.json()["errors"][0]["field"] == "arguments.path"
    assert client.get(f"/api/v1/reviews/{review.id}").json()["status"] == "pending"

    assert client.decide(review.id, decision="approve").status_code == 200
    again = client.decide(review.id, decision="reject", reason="too late")
    assert again.status_code == 409 and "already approved" in again.json()["detail"]
