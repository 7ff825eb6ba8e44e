"""In headless Chromium: the API docs work with no network, and the review, audit and
checkpoint diff pages show JSON (never Python reprs) and coloured, wrapped diffs."""

from __future__ import annotations

import json
import re

from checkpoints.models import Checkpoint
from review.models import ReviewRequest
from tasks.services import audit_record
from tests.conftest import BROWSER

pytestmark = BROWSER

REPR_MARKS = ("': ", "{'", "False", "True", "None")


def test_api_docs_render_with_the_network_blocked(live_server, open_page, viewer):
    page = open_page(viewer, "/tasks/")
    blocked: list[str] = []

    def only_this_server(route) -> None:
        if route.request.url.startswith(live_server.url):
            route.continue_()
        else:
            blocked.append(route.request.url)
            route.abort()

    page.route("**/*", only_this_server)
    page.goto(f"{live_server.url}/api/v1/docs")
    page.wait_for_selector(".swagger-ui .opblock")
    assert "/api/v1/tasks" in page.inner_text(".swagger-ui")
    assert blocked == []


def test_review_audit_and_diff_pages_show_json_not_reprs(
    live_server, open_page, run_task, operator
):
    long_line = "x" * 3000
    task = run_task(
        [
            {"call": "write_file", "args": {"path": "notes.txt", "content": "one\n"}},
            {"call": "write_file", "args": {"path": "notes.txt", "content": f"two\n{long_line}\n"}},
            {"call": "write_file", "args": {"path": "app.conf", "content": "debug = false\n"}},
            {"final": "done"},
        ],
        ["write_file"],
    )
    review = ReviewRequest.objects.get(task=task)
    audit_record(
        user=operator,
        action="review.approve",
        task_id=task.id,
        before={"status": "pending", "forbid_creator": False, "edited": None},
        after={"status": "approved", "forbid_creator": True},
    )

    page = open_page(operator, f"/reviews/{review.id}/")
    arguments = page.inner_text("[data-testid=current-arguments]")
    assert '"path": "app.conf"' in arguments
    messages = page.inner_text("[data-testid=recent-messages]")
    assert 'write_file({"content": "one\\n", "path": "notes.txt"})' in messages
    assert not any(mark in messages for mark in REPR_MARKS)

    page.goto(f"{live_server.url}/tasks/{task.id}/?tab=reviews")
    rules = page.inner_text("[data-testid=tab-reviews] tbody")
    assert "protected-config" in rules
    assert not any(mark in rules for mark in REPR_MARKS)

    page.goto(f"{live_server.url}/audit/")
    before = page.inner_text("[data-testid=audit-before]")
    assert json.loads(before) == {"status": "pending", "forbid_creator": False, "edited": None}
    assert '\n  "forbid_creator": false' in before  # indented, one key a line
    assert '"forbid_creator": true' in page.inner_text("[data-testid=audit-after]")

    checkpoints = Checkpoint.objects.filter(task=task).order_by("seq")
    first, last = checkpoints.first(), checkpoints.last()
    page.goto(f"{live_server.url}/tasks/{task.id}/checkpoints/diff/?a={first.id}&b={last.id}")
    state = page.inner_text("[data-testid=state-diff]")
    assert '"' in state
    assert not any(mark in state for mark in REPR_MARKS)
    diff = page.locator("[data-testid=file-diff]").first
    assert diff.locator(".diff-add").count() >= 1
    assert diff.locator(".diff-file").count() == 2
    # The 3,000-character line wraps inside its box instead of widening the page.
    assert diff.evaluate("el => el.scrollWidth <= el.clientWidth")
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


def test_favicon_is_served(client):
    response = client.get("/favicon.ico", follow=True)
    assert response.status_code == 200
    # The hashed name, cached for a year.
    assert re.fullmatch(r"/static/favicon\.[0-9a-f]{12}\.svg", response.redirect_chain[0][0])
    assert "immutable" in response["Cache-Control"]
