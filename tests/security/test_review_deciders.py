"""Who a review is put in front of is who can decide it. Assigning it to the `viewers` or
`creators` group (or a viewer, or the task's creator under the creator ban) asked people who
can never act on it; the nav badge and the tab title counted reviews a viewer or a creator can
never decide. Both now follow the same rights the decision checks."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from review import triage
from review.models import ReviewRequest
from review.services.errors import ReviewInvalid
from tests.conftest import ApiClient, approve, page_client
from tests.review.conftest import four_eyes_on_deletes

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("group", ["viewers", "creators"])
def test_a_review_cannot_be_assigned_to_a_group_that_cannot_decide_it(
    paused_review, operator, viewer, creator, group
):
    review = paused_review()
    assert Group.objects.filter(name=group).exists()
    response = ApiClient(operator).post(f"/api/v1/reviews/{review.id}/assign", {"to_group": group})
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "to_group"
    page = page_client(operator).post(
        f"/reviews/{review.id}/assign/", {"to_group": group}, follow=True
    )
    assert "is not a group whose members decide reviews" in page.content.decode()
    assert ReviewRequest.objects.get(pk=review.pk).assigned_group is None


@pytest.mark.parametrize("who", ["viewer", "creator"])
def test_a_review_cannot_be_assigned_to_someone_who_cannot_decide_it(
    paused_review, operator, viewer, creator, who
):
    review = paused_review()
    response = ApiClient(operator).post(f"/api/v1/reviews/{review.id}/assign", {"to_user": who})
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "to_user"
    assert ReviewRequest.objects.get(pk=review.pk).assigned_to is None


def test_the_creator_under_the_creator_ban_and_an_approver_are_neither_offered_nor_accepted(
    paused_review, operator, second_operator, decider
):
    four_eyes_on_deletes()  # two approvals, never the creator's
    review = paused_review(user=operator)
    approve(review, second_operator)
    page = page_client(decider).get(f"/reviews/{review.id}/").content.decode()
    assert '<option value="decider"' in page and '<option value="operators"' in page
    for name in ("operator", "operator2", "viewers", "creators"):
        assert f'<option value="{name}"' not in page, name
    for name in ("operator", "operator2"):
        with pytest.raises(ReviewInvalid) as refused:
            triage.review_assign(review_id=review.id, user=decider, to_user=name)
        assert refused.value.errors[0]["field"] == "to_user"
    triage.review_assign(review_id=review.id, user=decider, to_user="decider")
    assert ReviewRequest.objects.get(pk=review.pk).assigned_to == decider


@pytest.mark.parametrize("who", ["viewer", "creator"])
def test_no_badge_or_title_count_for_reviews_a_user_can_never_decide(
    paused_review, operator, viewer, creator, who
):
    paused_review(title="clean old logs")
    user = {"viewer": viewer, "creator": creator}[who]
    client = page_client(user)
    page = client.get("/tasks/").content.decode()
    assert 'data-testid="pending-count"' not in page
    assert "<title>(1)" not in page
    live = client.get("/reviews/pending-count/").json()
    assert live["decidable"] == 0 and live["pending"] == 1
    # An operator who may decide it gets both.
    page = page_client(operator).get("/tasks/").content.decode()
    assert 'data-testid="pending-count">1<' in page and "<title>(1)" in page
