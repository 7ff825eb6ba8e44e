"""The live review signals every page polls (GET /reviews/pending-count/): counts as this
user may see and decide them, the new reviews since an id, and a 304 while nothing changed."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from tests.conftest import approve, page_client
from tests.review.conftest import four_eyes_on_deletes

pytestmark = pytest.mark.django_db(transaction=True)

URL = "/reviews/pending-count/"


def test_unchanged_answers_are_304_and_a_new_review_changes_them(paused_review, operator):
    client = page_client(operator)
    empty = client.get(URL)
    assert empty.status_code == 200
    assert empty.json() == {
        "pending": 0,
        "decidable": 0,
        "latest": 0,
        "new": [],
        "version": empty["ETag"],
    }
    assert "no-cache" in empty["Cache-Control"] and "private" in empty["Cache-Control"]
    unchanged = client.get(URL, headers={"If-None-Match": empty["ETag"]})
    assert unchanged.status_code == 304 and unchanged.content == b""
    assert unchanged["ETag"] == empty["ETag"]

    review = paused_review(title="clean old logs")
    opened = client.get(URL, {"since": "0"}, headers={"If-None-Match": empty["ETag"]})
    assert opened.status_code == 200
    body = opened.json()
    assert (body["pending"], body["decidable"], body["latest"]) == (1, 1, review.id)
    assert body["new"] == [
        {
            "id": review.id,
            "tool": "delete_file",
            "task_id": str(review.task_id),
            "task": "clean old logs",
            "decidable": True,
            "url": f"/reviews/{review.id}/",
        }
    ]
    seen = client.get(URL, {"since": str(review.id)})
    assert seen.json()["new"] == []
    assert (
        client.get(
            URL, {"since": str(review.id)}, headers={"If-None-Match": seen["ETag"]}
        ).status_code
        == 304
    )

    client.post(f"/reviews/{review.id}/decide/", {"decision": "reject", "reason": "no"})
    closed = client.get(URL, {"since": str(review.id)}, headers={"If-None-Match": seen["ETag"]})
    assert closed.status_code == 200
    assert (closed.json()["pending"], closed.json()["decidable"]) == (0, 0)


def test_counts_are_what_this_user_may_decide(
    paused_review, operator, second_operator, decider, viewer
):
    four_eyes_on_deletes()  # two approvals, never the creator's
    review = paused_review(user=operator, title="two-person delete")
    approve(review, second_operator)

    def summary(user) -> dict:
        response = page_client(user).get(URL, {"since": "0"})
        assert response.status_code == 200
        body = response.json()
        return {
            "pending": body["pending"],
            "decidable": body["decidable"],
            "new": [item["decidable"] for item in body["new"]],
        }

    # The creator under the creator ban, the operator who already approved, and a viewer all
    # see it waiting; only a third operator may decide it.
    assert summary(operator) == {"pending": 1, "decidable": 0, "new": [False]}
    assert summary(second_operator) == {"pending": 1, "decidable": 0, "new": [False]}
    assert summary(viewer) == {"pending": 1, "decidable": 0, "new": [False]}
    assert summary(decider) == {"pending": 1, "decidable": 1, "new": [True]}
    # Each user's answer has its own validator: one user's ETag is not another's 304.
    etag = page_client(decider).get(URL)["ETag"]
    assert page_client(viewer).get(URL, headers={"If-None-Match": etag}).status_code == 200


def test_no_role_is_403_and_anonymous_is_sent_to_login(paused_review, outsider):
    paused_review()
    response = page_client(outsider).get(URL)
    assert response.status_code == 403
    assert b"delete_file" not in response.content
    anonymous = Client().get(URL)
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/accounts/login/")


@pytest.mark.parametrize("since", ["abc", "-1", "1.5", "１２", "9" * 40, " 1"])
def test_a_bad_since_is_400_naming_it(operator, since):
    response = page_client(operator).get(URL, {"since": since})
    assert response.status_code == 400
    assert response.json()["field"] == "since"


def test_an_unchanged_poll_is_one_review_query(paused_review, operator):
    for _ in range(3):
        paused_review()
    client = page_client(operator)
    since = str(client.get(URL).json()["latest"])
    etag = client.get(URL, {"since": since})["ETag"]
    with CaptureQueriesContext(connection) as queries:
        assert client.get(URL, {"since": since}, headers={"If-None-Match": etag}).status_code == 304
    # The session, the user and their permissions, then one aggregate over pending reviews.
    reviews = [q["sql"] for q in queries.captured_queries if "review_reviewrequest" in q["sql"]]
    assert len(reviews) == 1 and reviews[0].startswith("SELECT COUNT(")
    assert len(queries.captured_queries) <= 5
