"""An operator chooses "Approve and always allow…" in headless Chromium; the next matching
call runs without a review, and the rules page counts it (live server, real workers)."""

from __future__ import annotations

import pytest

from review.models import ReviewRule
from tasks.models import Task
from tests.conftest import BROWSER, wait_for
from tests.factories import scripted_task

pytestmark = [*BROWSER, pytest.mark.integration]


def write_conf(path: str, content: str) -> list[dict]:
    return [{"call": "write_file", "args": {"path": path, "content": content}}, {"final": "ok"}]


def status(task: Task) -> str:
    return Task.objects.values_list("status", flat=True).get(pk=task.pk)


def test_approve_and_always_allow_in_the_browser(live_server, workers, open_page, operator):
    first = scripted_task(
        write_conf("conf/a.conf", "x=1\n"), ["write_file"], user=operator, enqueue=True
    )
    wait_for(lambda: status(first) == "waiting_review", 90, message="the first call to pause")
    review = first.reviews.get()

    page = open_page(operator, f"/reviews/{review.id}/", timeout_ms=15_000)
    form = page.locator("[data-testid=remember-form]")
    assert "write_file on any .conf file in conf/" in form.inner_text()
    form.locator("[data-testid=suggestion-1]").check()
    form.locator("[data-testid=remember-scope]").select_option("everyone")
    form.locator("[data-testid=remember-confirm-scope]").check()
    page.once("dialog", lambda dialog: dialog.accept())
    form.locator("[data-testid=approve-remember]").click()
    page.wait_for_url(f"{live_server.url}/reviews/")  # no other review waits
    rule = ReviewRule.objects.get(origin_review=review)
    assert (rule.path_glob, rule.scope) == ("conf/*.conf", "everyone")
    wait_for(lambda: status(first) == "succeeded", 90, message="the first task to finish")

    second = scripted_task(write_conf("conf/b.conf", "y=2\n"), ["write_file"], enqueue=True)
    wait_for(
        lambda: status(second) in ("succeeded", "waiting_review"), 90, message="the second call"
    )
    assert status(second) == "succeeded"
    page.goto(f"{live_server.url}/reviews/rules/")
    row = page.locator(f"[data-testid=standing-rule-{rule.id}]").inner_text()
    assert "active" in row and "\t1\t" in row
