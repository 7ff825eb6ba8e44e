"""Bulk approve / reject cannot do what one decision may not: every item is bound to the
`arguments_hash` its operator saw in the list and decided through the same guarded transition
as the review page and the API (four-eyes, forbid-creator, expiry, role), one item at a time,
so an attack on one item fails that item only and the others are reported item by item."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from review import triage
from review.models import ReviewApproval, ReviewRequest
from tasks.canonical import canonical_hash
from tests.conftest import ApiClient, page_client
from tests.factories import ReviewRuleFactory

pytestmark = pytest.mark.django_db(transaction=True)

BULK = "/api/v1/reviews/bulk-decision"


def shown(review: ReviewRequest) -> str:
    """The hash the inbox shows for the review now."""
    return canonical_hash(ReviewRequest.objects.get(pk=review.pk).arguments)


def item(review: ReviewRequest, seen: str | None = None) -> dict:
    return {"id": review.id, "arguments_hash": seen or shown(review)}


def status_of(review: ReviewRequest) -> str:
    return ReviewRequest.objects.get(pk=review.pk).status


def by_id(response) -> dict[int, dict]:
    assert response.status_code == 200, response.content
    return {r["id"]: r for r in response.json()["results"]}


def edit_behind_their_back(review: ReviewRequest) -> None:
    """Another operator's edit lands after the list was shown (the arguments change)."""
    ReviewRequest.objects.filter(pk=review.pk).update(edited_arguments={"path": "other.log"})


def test_an_item_whose_arguments_changed_since_the_list_fails_alone(paused_review, operator):
    one, two, three = (paused_review(title=t) for t in ("one", "two", "three"))
    seen = [item(one), item(two), item(three)]
    edit_behind_their_back(two)
    results = by_id(ApiClient(operator).post(BULK, {"decision": "approve", "items": seen}))
    assert results[one.id]["ok"] and results[three.id]["ok"]
    assert results[two.id] == {
        "id": two.id,
        "ok": False,
        "status_code": 409,
        "error": results[two.id]["error"],
        "review_status": "",
    }
    assert results[two.id]["error"].startswith("changed since you saw it")
    assert [status_of(r) for r in (one, two, three)] == ["approved", "pending", "approved"]
    assert not ReviewApproval.objects.filter(review=two).exists()


def test_the_page_binds_each_ticked_row_to_the_hash_it_showed(paused_review, operator):
    one, two = paused_review(title="one"), paused_review(title="two")
    client = page_client(operator)
    inbox = client.get("/reviews/").content.decode()
    ticked = [f"{r.id}:{shown(r)}" for r in (one, two)]
    for value in ticked:
        assert f'value="{value}" form="bulk-form"' in inbox
    edit_behind_their_back(one)
    form = {"decision": "approve", "item": ticked, "next": "/reviews/"}
    # Nobody opened either review: the page asks first, and decides nothing.
    warning = client.post("/reviews/bulk/", form).content.decode()
    assert "bulk-unopened" in warning and "Approve all 2 anyway" in warning
    assert status_of(one) == "pending" and status_of(two) == "pending"
    response = client.post("/reviews/bulk/", {**form, "unopened": "confirmed"}, follow=True)
    page = response.content.decode()
    # One line for the whole decision, naming the refused review and why.
    assert page.count("Bulk approve of 2:") == 1
    assert f"Bulk approve of 2: 1 approved; 1 refused (#{one.id} changed since you saw it" in page
    assert status_of(one) == "pending" and status_of(two) == "approved"


def test_approving_only_reviews_someone_opened_asks_nothing(paused_review, operator):
    review = paused_review()
    client = page_client(operator)
    assert client.get(f"/reviews/{review.id}/").status_code == 200
    response = client.post(
        "/reviews/bulk/", {"decision": "approve", "item": [f"{review.id}:{shown(review)}"]}
    )
    assert response.status_code == 302 and status_of(review) == "approved"


def test_a_second_approval_by_the_same_operator_does_not_count(paused_review, operator):
    ReviewRuleFactory(name="two-person-delete", tool="delete_file", approvals_required=2)
    review = paused_review()
    first = by_id(ApiClient(operator).post(BULK, {"decision": "approve", "items": [item(review)]}))
    assert first[review.id]["ok"] and first[review.id]["review_status"] == "pending"
    # The same operator again, twice in one request and once more: never a second approval.
    again = ApiClient(operator).post(
        BULK, {"decision": "approve", "items": [item(review), item(review)]}
    )
    assert [r["status_code"] for r in again.json()["results"]] == [409, 409]
    assert "you already approved" in again.json()["results"][0]["error"]
    assert status_of(review) == "pending"
    assert ReviewApproval.objects.filter(review=review).count() == 1


def test_the_creator_cannot_bulk_approve_under_forbid_creator(paused_review, operator):
    ReviewRuleFactory(name="not-your-own", tool="delete_file", forbid_creator=True)
    own = paused_review(title="own", user=operator)
    other = paused_review(title="other")
    results = by_id(
        ApiClient(operator).post(BULK, {"decision": "approve", "items": [item(own), item(other)]})
    )
    assert results[own.id]["status_code"] == 403 and "creator" in results[own.id]["error"]
    assert results[other.id]["ok"]
    assert status_of(own) == "pending" and status_of(other) == "approved"


def test_an_expired_item_is_refused_even_before_the_sweep(paused_review, operator):
    expired, fresh = paused_review(title="expired"), paused_review(title="fresh")
    ReviewRequest.objects.filter(pk=expired.pk).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    results = by_id(
        ApiClient(operator).post(
            BULK, {"decision": "approve", "items": [item(expired), item(fresh)]}
        )
    )
    assert results[expired.id]["status_code"] == 409 and "expired" in results[expired.id]["error"]
    assert results[fresh.id]["ok"]
    assert status_of(expired) == "pending" and status_of(fresh) == "approved"


@pytest.mark.parametrize("role", ["viewer", "creator", "outsider"])
def test_only_operators_post_bulk(paused_review, request, role):
    review = paused_review()
    user = request.getfixturevalue(role)
    api = ApiClient(user).post(BULK, {"decision": "reject", "items": [item(review)]})
    assert api.status_code == 403
    page = page_client(user).post(
        "/reviews/bulk/", {"decision": "reject", "item": [f"{review.id}:{shown(review)}"]}
    )
    assert page.status_code == 403
    assert status_of(review) == "pending"


def test_items_the_user_may_not_see_fail_alone_and_say_nothing(paused_review, operator):
    review = paused_review()
    missing = review.id + 1000
    results = by_id(
        ApiClient(operator).post(
            BULK,
            {
                "decision": "reject",
                "items": [{"id": missing, "arguments_hash": "0" * 64}, item(review)],
            },
        )
    )
    assert results[missing] == {
        "id": missing,
        "ok": False,
        "status_code": 404,
        "error": "review not found",
        "review_status": "",
    }
    assert results[review.id]["ok"] and status_of(review) == "rejected"
    # A malformed row from the page form fails alone as well.
    page = page_client(operator).post(
        "/reviews/bulk/", {"decision": "reject", "item": ["1; DROP TABLE", "x:y"]}, follow=True
    )
    assert (
        page.status_code == 200
        and "Bulk reject of 2: 0 rejected; 2 refused" in page.content.decode()
    )


def test_more_than_the_limit_is_refused_whole_naming_the_field(paused_review, operator):
    review = paused_review()
    too_many = [item(review)] * (triage.BULK_MAX_ITEMS + 1)
    response = ApiClient(operator).post(BULK, {"decision": "approve", "items": too_many})
    assert response.status_code == 422 and "items" in response.content.decode()
    page = page_client(operator).post(
        "/reviews/bulk/",
        {"decision": "approve", "item": [f"{review.id}:{shown(review)}"] * len(too_many)},
        follow=True,
    )
    assert f"Nothing decided: choose 1 to {triage.BULK_MAX_ITEMS} reviews" in page.content.decode()
    assert status_of(review) == "pending"
    with pytest.raises(triage.ReviewInvalid):
        triage.reviews_decide_bulk(
            user=operator,
            decision="approve",
            items=[(review.id, shown(review), "")] * 101,
            via="api",
        )
    bad = ApiClient(operator).post(BULK, {"decision": "approve", "items": [{"id": review.id}]})
    assert bad.status_code == 422 and "arguments_hash" in bad.content.decode()
    assert status_of(review) == "pending"
