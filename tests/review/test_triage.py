"""Triage in the review inbox: claim / unclaim, assign, the comment thread, sort and filter in
the URL, "next review" after a decision and the review page's previous / next, through the
services and the server-rendered pages (Django's test client)."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from review import triage
from review.models import ReviewComment, ReviewRequest
from review.services import ReviewConflict, ReviewForbidden, ReviewInvalid
from tasks.canonical import canonical_hash
from tasks.models import AuditEntry
from tests.conftest import ApiClient, page_client, run_in_threads
from tests.factories import ReviewRuleFactory

pytestmark = pytest.mark.django_db(transaction=True)


def three_reviews(paused_review) -> list[ReviewRequest]:
    """Three pending reviews, oldest first, that sort differently by risk, time left and tool."""
    now = timezone.now()
    made = []
    for title, risk, tool, left_s, rule in (
        ("alpha", "write", "write_file", 3600, "protected-config"),
        ("bravo", "destructive", "delete_file", None, "no-deletes"),
        ("charlie", "execute", "run_command", 60, "commands"),
    ):
        review = paused_review(title=title)
        ReviewRequest.objects.filter(pk=review.pk).update(
            risk=risk,
            tool=tool,
            matched_rules=[{"name": rule, "action": "review"}],
            expires_at=now + timedelta(seconds=left_s) if left_s else None,
        )
        made.append(ReviewRequest.objects.get(pk=review.pk))
    return made


def order_on(page: str, reviews: list[ReviewRequest]) -> list[str]:
    """The titles of `reviews` in the order the inbox page lists them."""
    listed = [r for r in reviews if f'data-review-id="{r.id}"' in page]
    return [
        r.task.title for r in sorted(listed, key=lambda r: page.index(f'data-review-id="{r.id}"'))
    ]


# --- claim / unclaim ---------------------------------------------------------------------------


def test_a_claim_shows_who_has_it_and_another_operator_is_refused_unless_taking_over(
    paused_review, operator, second_operator
):
    review = paused_review()
    first, second = page_client(operator), page_client(second_operator)
    response = first.post(f"/reviews/{review.id}/claim/", {"next": "/reviews/"})
    assert response.status_code == 302 and response["Location"] == "/reviews/"

    inbox = second.get("/reviews/").content.decode()
    assert 'data-testid="claimed-by">operator<' in inbox
    page = second.get(f"/reviews/{review.id}/").content.decode()
    assert 'data-testid="claimed-by">operator<' in page and 'data-testid="take-over"' in page

    refused = second.post(f"/reviews/{review.id}/claim/", follow=True).content.decode()
    assert "is claimed by operator; take it over" in refused
    assert ReviewRequest.objects.get(pk=review.pk).claimed_by == operator
    with pytest.raises(ReviewConflict, match="claimed by operator, not you"):
        triage.review_unclaim(review_id=review.id, user=second_operator)

    second.post(f"/reviews/{review.id}/claim/", {"take_over": "1"})
    assert ReviewRequest.objects.get(pk=review.pk).claimed_by == second_operator
    took = AuditEntry.objects.get(action="review_take_over")
    assert took.actor == second_operator and took.before == {"claimed_by": "operator"}
    assert took.after == {"claimed_by": "operator2"}

    second.post(f"/reviews/{review.id}/unclaim/")
    assert ReviewRequest.objects.get(pk=review.pk).claimed_by is None
    assert AuditEntry.objects.filter(action__in=["review_claim", "review_unclaim"]).count() == 2


def test_two_operators_claiming_at_once_one_wins(paused_review, operator, second_operator):
    review = paused_review()
    outcomes: list[str] = []

    def claim(user):
        def go() -> None:
            try:
                triage.review_claim(review_id=review.id, user=user)
            except ReviewConflict:
                outcomes.append("refused")
            else:
                outcomes.append("claimed")

        return go

    run_in_threads(claim(operator), claim(second_operator))
    assert sorted(outcomes) == ["claimed", "refused"]
    assert ReviewRequest.objects.get(pk=review.pk).claimed_by in (operator, second_operator)
    assert AuditEntry.objects.filter(action="review_claim").count() == 1


def test_a_decided_review_cannot_be_claimed_and_a_claim_does_not_stop_another_decider(
    paused_review, operator, second_operator
):
    review = paused_review()
    triage.review_claim(review_id=review.id, user=operator)
    # Advisory: the gate decides who may decide, not the claim.
    ApiClient(second_operator).decide(review.id, decision="reject", reason="no")
    assert ReviewRequest.objects.get(pk=review.pk).status == "rejected"
    with pytest.raises(ReviewConflict, match="already rejected"):
        triage.review_claim(review_id=review.id, user=second_operator)


def test_viewers_cannot_claim_assign_or_comment(paused_review, viewer, operator):
    review = paused_review()
    client = page_client(viewer)
    for path, body in (
        ("claim", {}),
        ("assign", {"to_user": "operator"}),
        ("comment", {"text": "hello"}),
    ):
        assert client.post(f"/reviews/{review.id}/{path}/", body).status_code == 403
    review.refresh_from_db()
    assert review.claimed_by is None and review.assigned_to is None
    assert not ReviewComment.objects.exists()
    page = client.get(f"/reviews/{review.id}/").content.decode()
    assert 'data-testid="claim"' not in page and 'data-testid="comment-form"' not in page


# --- assign --------------------------------------------------------------------------------------


def test_assign_to_an_operator_or_a_group_and_only_to_those(
    paused_review, operator, second_operator, viewer
):
    review = paused_review()
    client = page_client(operator)
    page = client.get(f"/reviews/{review.id}/").content.decode()
    assert '<option value="operator2"' in page and '<option value="operators"' in page
    assert '<option value="viewer"' not in page  # only those who may decide

    client.post(f"/reviews/{review.id}/assign/", {"to_user": "operator2"})
    assert ReviewRequest.objects.get(pk=review.pk).assigned_to == second_operator
    assert 'data-testid="assigned">→ operator2<' in client.get("/reviews/").content.decode()

    client.post(f"/reviews/{review.id}/assign/", {"to_group": "operators"})
    review.refresh_from_db()
    assert review.assigned_to is None and review.assigned_group.name == "operators"
    entry = AuditEntry.objects.filter(action="review_assign").latest("id")
    assert entry.before == {"assigned_to": "operator2", "assigned_group": None}

    refused = client.post(f"/reviews/{review.id}/assign/", {"to_user": "viewer"}, follow=True)
    assert "&#x27;viewer&#x27; may not decide this review" in refused.content.decode()
    with pytest.raises(ReviewInvalid) as nobody:
        triage.review_assign(review_id=review.id, user=operator, to_group="no-such-group")
    assert nobody.value.errors[0]["field"] == "to_group"
    assert ReviewRequest.objects.get(pk=review.pk).assigned_group.name == "operators"


# --- comments ------------------------------------------------------------------------------------


def test_the_comment_thread_is_escaped_bounded_and_audited(paused_review, operator, viewer):
    review = paused_review()
    client = page_client(operator)
    client.post(
        f"/reviews/{review.id}/comment/", {"text": "<b>asked</b> the DBA <script>x</script>"}
    )
    page = page_client(viewer).get(f"/reviews/{review.id}/").content.decode()
    assert "&lt;b&gt;asked&lt;/b&gt; the DBA &lt;script&gt;x&lt;/script&gt;" in page
    assert "<b>asked</b>" not in page
    entry = AuditEntry.objects.get(action="review_comment")
    assert entry.actor == operator and entry.target == f"review {review.id}"

    too_long = client.post(
        f"/reviews/{review.id}/comment/", {"text": "x" * (triage.COMMENT_MAX + 1)}, follow=True
    )
    assert f"1 to {triage.COMMENT_MAX} characters" in too_long.content.decode()
    for text in ("   ", "a\x00b"):
        with pytest.raises(ReviewInvalid):
            triage.review_comment_add(review_id=review.id, user=operator, text=text)
    assert ReviewComment.objects.count() == 1
    with pytest.raises(ReviewForbidden):
        triage.review_comment_add(review_id=review.id, user=viewer, text="hi")


# --- sort and filter -----------------------------------------------------------------------------


def test_the_inbox_sorts_and_filters_in_the_url(paused_review, operator, second_operator):
    reviews = three_reviews(paused_review)
    alpha, bravo, charlie = reviews
    client = page_client(operator)

    def titles(query: str) -> list[str]:
        return order_on(client.get(f"/reviews/?{query}").content.decode(), reviews)

    assert titles("") == ["alpha", "bravo", "charlie"]  # oldest first
    assert titles("sort=newest") == ["charlie", "bravo", "alpha"]
    assert titles("sort=risk") == ["bravo", "charlie", "alpha"]  # destructive, execute, write
    assert titles("sort=time_left") == ["charlie", "alpha", "bravo"]  # no limit last
    assert titles("sort=tool") == ["bravo", "charlie", "alpha"]
    assert titles("rule=no-deletes") == ["bravo"]
    assert titles("tool=run_command") == ["charlie"]
    assert titles("risk=write&sort=risk") == ["alpha"]

    triage.review_claim(review_id=bravo.id, user=operator)
    triage.review_claim(review_id=charlie.id, user=second_operator)
    assert titles("claimed_by=me") == ["bravo"]
    assert titles("claimed_by=operator2") == ["charlie"]
    assert titles("claimed_by=nobody") == ["alpha"]
    triage.review_assign(review_id=alpha.id, user=operator, to_user="operator")
    triage.review_assign(review_id=charlie.id, user=operator, to_group="operators")
    assert titles("assigned=me") == ["alpha", "charlie"]
    assert titles("assigned=me&sort=newest") == ["charlie", "alpha"]

    # The links keep the view, so the review page walks the same order.
    page = client.get("/reviews/?sort=risk&rule=no-deletes").content.decode()
    assert f'href="/reviews/{bravo.id}/?rule=no-deletes&amp;sort=risk"' in page


@pytest.mark.parametrize(
    "query, message",
    [
        ("sort=drop+table", "Ignored sort=&#x27;drop table&#x27;: not a valid sort."),
        ("risk=lethal", "Ignored risk=&#x27;lethal&#x27;: not a valid risk."),
        ("status=whatever", "Ignored status=&#x27;whatever&#x27;: not a valid status."),
        ("claimed_by=ghost", "Ignored claimed_by=&#x27;ghost&#x27;: no such user."),
        ("assigned=you", "Ignored assigned=&#x27;you&#x27;: not a valid assigned."),
        ("tool=" + "x" * 101, "Ignored tool="),
    ],
)
def test_bad_inbox_values_fall_back_with_a_message(paused_review, operator, query, message):
    reviews = three_reviews(paused_review)
    response = page_client(operator).get(f"/reviews/?{query}")
    assert response.status_code == 200
    page = response.content.decode()
    assert message in page
    assert order_on(page, reviews) == ["alpha", "bravo", "charlie"]  # the default view


def test_the_api_list_takes_the_same_filters(paused_review, operator, second_operator):
    alpha, bravo, charlie = three_reviews(paused_review)
    triage.review_claim(review_id=charlie.id, user=operator)
    client = ApiClient(operator)

    def ids(**params) -> list[int]:
        response = client.get("/api/v1/reviews", params)
        assert response.status_code == 200, response.content
        return [r["id"] for r in response.json()]

    assert ids(status="pending", sort="risk") == [bravo.id, charlie.id, alpha.id]
    assert ids(rule="protected-config") == [alpha.id]
    assert ids(claimed_by="me") == [charlie.id]
    assert ids(claimed_by="nobody", sort="newest") == [bravo.id, alpha.id]
    triage.review_assign(review_id=bravo.id, user=second_operator, to_group="operators")
    assert ids(assigned="me") == [bravo.id]
    assert client.get("/api/v1/reviews", {"assigned": "you"}).status_code == 422
    listed = client.get("/api/v1/reviews", {"claimed_by": "me"}).json()[0]
    assert listed["claimed_by"] == "operator" and listed["claimed_at"]
    bad = client.get("/api/v1/reviews", {"sort": "sideways"})
    assert bad.status_code == 422 and "sort" in bad.content.decode()


# --- next review, previous / next --------------------------------------------------------------


def test_a_decision_goes_on_to_the_next_review_this_user_may_decide(
    paused_review, operator, second_operator
):
    ReviewRuleFactory(
        name="two-person-delete", tool="delete_file", approvals_required=2, forbid_creator=True
    )
    older = paused_review(title="older")
    mine = paused_review(title="mine", user=operator)  # forbid-creator: not for operator
    halfway = paused_review(title="halfway")
    newest = paused_review(title="newest")
    ApiClient(operator).decide(halfway.id, decision="approve")  # operator already approved it
    client = page_client(operator)

    # In the inbox's order (newest first): newest, halfway (skipped), mine (skipped), older.
    response = client.post(
        f"/reviews/{newest.id}/decide/?sort=newest", {"decision": "reject", "reason": "no"}
    )
    assert response.status_code == 302
    assert response["Location"] == f"/reviews/{older.id}/?sort=newest"
    response = client.post(
        f"/reviews/{older.id}/decide/?sort=newest", {"decision": "reject", "reason": "no"}
    )
    assert response["Location"] == "/reviews/?sort=newest"  # none left for this user
    followed = client.get(response["Location"]).content.decode()
    assert "No more reviews for you to decide in this view." in followed

    # Another operator may decide both that were skipped for the first one.
    other = page_client(second_operator)
    shown = canonical_hash(ReviewRequest.objects.get(pk=mine.pk).arguments)
    response = other.post(
        f"/reviews/{mine.id}/decide/", {"decision": "approve", "arguments_hash": shown}
    )
    assert response["Location"] == f"/reviews/{halfway.id}/"


def test_the_review_page_links_previous_and_next_in_the_inbox_order(paused_review, viewer):
    alpha, bravo, charlie = three_reviews(paused_review)
    client = page_client(viewer)
    page = client.get(f"/reviews/{charlie.id}/?sort=risk").content.decode()
    # risk order: bravo, charlie, alpha
    assert f'href="/reviews/{bravo.id}/?sort=risk" data-shortcut="previous"' in page
    assert f'href="/reviews/{alpha.id}/?sort=risk" data-shortcut="next"' in page
    first = client.get(f"/reviews/{bravo.id}/?sort=risk").content.decode()
    assert 'data-shortcut="previous"' not in first
    # The script under its hashed name (static files are served as collected: review.<hash>.js).
    assert 'id="shortcut-help"' in first and re.search(
        r'src="/static/review\.[0-9a-f]+\.js"', first
    )


def test_the_api_claims_assigns_and_comments_like_the_page(
    paused_review, operator, second_operator
):
    review = paused_review()
    first, second = ApiClient(operator), ApiClient(second_operator)
    base = f"/api/v1/reviews/{review.id}"
    claimed = first.post(f"{base}/claim")
    assert claimed.status_code == 200 and claimed.json()["claimed_by"] == "operator"
    refused = second.post(f"{base}/claim")
    assert refused.status_code == 409 and "claimed by operator" in refused.json()["detail"]
    assert second.post(f"{base}/unclaim").status_code == 409
    taken = second.post(f"{base}/claim", {"take_over": True})
    assert taken.json()["claimed_by"] == "operator2"
    assert second.post(f"{base}/unclaim").json()["claimed_by"] is None

    assigned = first.post(f"{base}/assign", {"to_group": "operators"})
    assert assigned.status_code == 200 and assigned.json()["assigned_group"] == "operators"
    unknown = first.post(f"{base}/assign", {"to_user": "ghost"})
    assert unknown.status_code == 422 and unknown.json()["errors"][0]["field"] == "to_user"

    commented = first.post(f"{base}/comments", {"text": "asked the DBA"})
    assert commented.status_code == 200
    assert [c["text"] for c in commented.json()["comments"]] == ["asked the DBA"]
    too_long = first.post(f"{base}/comments", {"text": "x" * (triage.COMMENT_MAX + 1)})
    assert too_long.status_code == 422 and "text" in too_long.content.decode()
    nul = first.post(f"{base}/comments", {"text": "a\x00b"})
    assert nul.status_code == 422
    assert first.get(base).json()["comments"][0]["user"] == "operator"
