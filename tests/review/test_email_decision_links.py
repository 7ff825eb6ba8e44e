"""A decision link arrives by real mail (aiosmtpd; the mail sent by an rqworker) and decides
through the review gate when its recipient confirms it."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import pytest

from review.models import DecisionReceipt, ReviewRequest
from tests.conftest import page_client, wait_for
from tests.review.test_notifications import (  # noqa: F401  (fixtures)
    BASE_URL,
    RULES,
    notify_env,
    sent,
    smtp_server,
)

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_mailed_approve_link_asks_then_approves_as_its_recipient(
    notify_env,  # noqa: F811  (the imported fixture)
    smtp_server,  # noqa: F811
    worker_pool,
    paused_review,
    operator,
    second_operator,
):
    port, mailbox = smtp_server
    operator.email = "oncall@example.com"
    operator.save(update_fields=["email"])
    notify_env(
        RULES.replace("EXPIRES", "1h")
        + """
notifications:
  channels:
    oncall: {kind: email, to: ["oncall@example.com"]}
  routes:
    - match: {}
      notify: [oncall]
""",
        EMAIL_HOST="127.0.0.1",
        EMAIL_PORT=str(port),
    )
    worker_pool.start(1)
    review = paused_review()
    wait_for(sent(review, "oncall", "review.requested"), 30)
    (message,) = mailbox.messages
    text = message.get_body(preferencelist=("plain",)).get_content()
    html = message.get_body(preferencelist=("html",)).get_content()
    approve = re.search(r"Approve: (\S+)", text).group(1)
    assert approve.startswith(f"{BASE_URL}/reviews/{review.id}/email/")
    assert approve in html
    path = urlsplit(approve).path

    assert page_client(second_operator).post(path).status_code == 403
    opened = page_client(operator).get(path)
    assert opened.status_code == 200 and b"link-confirm" in opened.content
    assert ReviewRequest.objects.get(pk=review.pk).status == "pending"
    assert page_client(operator).post(path).status_code == 302
    review.refresh_from_db()
    assert review.status == "approved" and review.decided_by == operator
    assert DecisionReceipt.objects.filter(review_id=review.id, via="email").count() == 1
