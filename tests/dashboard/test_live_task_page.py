"""The task page as an operator uses it, in headless Chromium: the event log grows while a
real worker runs the task (no reload), tabs are links with history, a waiting task shows its
review banner, and the inbox rows link whole. Plus the live fragments' ETag contract."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from html import unescape

import pytest

from tasks.canonical import canonical_hash
from tasks.models import Task, TaskEvent
from tasks.services import event_record
from tests.conftest import needs_chromium, wait_for
from tests.factories import TaskFactory, scripted_task

# Room for a loaded machine (Plotly's cartesian bundle is 1.5 MB to run).
SLOW_MS = 60_000


ROW_SEQS = (
    "Array.from(document.querySelectorAll('[data-testid=event-rows] tr'),"
    " r => +r.cells[0].innerText)"
)


@pytest.mark.integration
@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
@needs_chromium
def test_operator_watches_the_task_run_to_the_end_without_reloading(
    live_server, open_page, workers, operator, api_client
):
    # The review is the gate: the page is open before the rest of the run happens.
    script = [
        {"call": "write_file", "args": {"path": "etc/app.conf", "content": "on"}},
        *({"call": "sleep", "args": {"seconds": 0.3}} for _ in range(4)),
        {"final": "ok"},
    ]
    task = scripted_task(
        script, ["write_file", "sleep"], user=operator, enqueue=True, title="slow and steady"
    )
    wait_for(
        lambda: Task.objects.get(id=task.id).status == "waiting_review",
        90,
        message="the task to pause for review",
    )
    page = open_page(operator, f"/tasks/{task.id}/", timeout_ms=SLOW_MS)
    page.evaluate("window.notReloaded = true")
    assert page.is_visible("[data-testid=review-banner]")
    assert page.inner_text("[data-testid=pending-count]") == "1"
    first = page.evaluate(ROW_SEQS)

    api = api_client(operator)
    review = api.get(f"/api/v1/reviews/{task.reviews.get().id}").json()
    # The hash of the arguments the decider saw (the API's own field once it carries one).
    shown = review.get("arguments_hash") or canonical_hash(review["arguments"])
    decided = api.post(
        f"/api/v1/reviews/{review['id']}/decision",
        {"decision": "approve", "arguments_hash": shown},
    )
    assert decided.status_code == 200, decided.content

    page.wait_for_selector("[data-testid=task-status]:has-text('succeeded')")
    page.wait_for_function(
        "n => document.querySelectorAll('[data-testid=event-rows] tr').length > n + 8",
        arg=len(first),
    )
    assert page.evaluate("window.notReloaded") is True
    seqs = page.evaluate(ROW_SEQS)
    assert seqs == sorted(seqs)
    assert seqs[: len(first)] == first
    # Terminal: both live regions come back without their polling trigger...
    page.wait_for_selector("#task-tabs:not([hx-trigger])", state="attached")
    assert page.query_selector("#task-live[hx-trigger]") is None
    # ...after the last event, the usage and the navigation's count were brought up to date.
    last = TaskEvent.objects.filter(task=task).order_by("id").last()
    assert page.evaluate(ROW_SEQS)[-1] == last.id
    assert page.inner_text("[data-testid=model-usage]").startswith("Model usage: 6 calls")
    assert page.query_selector("[data-testid=pending-count]") is None
    assert page.query_selector("[data-testid=review-banner]") is None


@pytest.mark.parametrize("javascript", [True, False])
@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
@needs_chromium
def test_tabs_are_links_that_keep_history(live_server, open_page, run_task, viewer, javascript):
    task = run_task(
        [{"call": "write_file", "args": {"path": "a.txt", "content": "hi"}}, {"final": "done"}],
        ["write_file"],
    )
    page = open_page(
        viewer, f"/tasks/{task.id}/", timeout_ms=SLOW_MS, java_script_enabled=javascript
    )

    def shown() -> tuple[str, str, str]:
        active = page.inner_text("[data-testid=tabs] a.active")
        body = page.get_attribute("#tab-body > .tab", "data-testid")
        return active, body, page.url.split("?", 1)[-1]

    assert shown()[:2] == ("events", "tab-events")
    page.click("[data-tab=calls]")
    page.wait_for_url("**/?tab=calls")
    assert shown() == ("calls", "tab-calls", "tab=calls")
    assert "a.txt" in page.inner_text("#tab-body")
    page.click("[data-tab=checkpoints]")
    page.wait_for_url("**/?tab=checkpoints")
    assert shown() == ("checkpoints", "tab-checkpoints", "tab=checkpoints")

    page.go_back()
    page.wait_for_url("**/?tab=calls")
    page.wait_for_selector("[data-testid=tab-calls]")
    assert shown() == ("calls", "tab-calls", "tab=calls")
    page.go_back()
    page.wait_for_selector("[data-testid=tab-events]")
    assert shown()[:2] == ("events", "tab-events")
    page.context.close()


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
@needs_chromium
def test_waiting_task_shows_its_review_and_the_inbox_row_links_whole(
    live_server, open_page, run_task, operator
):
    task = run_task(
        [{"call": "write_file", "args": {"path": "etc/app.conf", "content": "x"}}, {"final": "."}],
        ["write_file"],
    )
    assert task.status == "waiting_review"
    review = task.reviews.get()

    page = open_page(operator, f"/tasks/{task.id}/", timeout_ms=SLOW_MS)
    banner = page.inner_text("[data-testid=review-banner]")
    assert banner.startswith("Waiting for your review")
    assert "etc/app.conf" in banner
    page.click("[data-testid=review-banner-link]")
    page.wait_for_url(f"**/reviews/{review.id}/")

    page.goto(f"{live_server.url}/reviews/")
    row = page.locator(f"[data-review-id='{review.id}']")
    assert row.locator("[data-testid=review-target]").inner_text() == "etc/app.conf"
    assert "protected-config" in row.inner_text()
    assert "write_file" in row.inner_text()
    # A click anywhere on the row (here: the age cell, which holds no link) opens the review.
    box = row.locator("td").nth(6).bounding_box()
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.wait_for_url(f"**/reviews/{review.id}/")


# --- the ETag contract of the live fragments (no browser) ----------------------------------


@pytest.mark.django_db
def test_live_header_is_304_until_the_task_changes(as_user, viewer):
    task = TaskFactory(status="running")
    client = as_user(viewer)
    first = client.get(f"/tasks/{task.id}/live/")
    assert first.status_code == 200
    etag = first["ETag"]
    again = client.get(f"/tasks/{task.id}/live/", headers={"If-None-Match": etag})
    assert again.status_code == 304 and again.content == b""

    event_record(task_id=task.id, type="model_decision", payload={"turn": 1})
    changed = client.get(f"/tasks/{task.id}/live/", headers={"If-None-Match": etag})
    assert changed.status_code == 200 and changed["ETag"] != etag
    assert 'hx-swap-oob="true"' in changed.content.decode()  # usage and navigation ride along


@pytest.mark.django_db
def test_tab_region_poll_is_304_until_the_task_changes(as_user, viewer):
    task = TaskFactory(status="running")
    client = as_user(viewer)
    page = client.get(f"/tasks/{task.id}/", {"tab": "calls"})
    html = page.content.decode()
    assert 'id="task-tabs"' in html and "every 2s" in html
    etag = client.get(f"/tasks/{task.id}/", {"tab": "calls"}, headers={"HX-Request": "true"})[
        "ETag"
    ]
    poll = client.get(
        f"/tasks/{task.id}/",
        {"tab": "calls"},
        headers={"HX-Request": "true", "If-None-Match": etag},
    )
    assert poll.status_code == 304
    other_tab = client.get(
        f"/tasks/{task.id}/",
        {"tab": "events"},
        headers={"HX-Request": "true", "If-None-Match": etag},
    )
    assert other_tab.status_code == 200
    assert 'data-testid="tab-events"' in other_tab.content.decode()
    # The page embeds the same validator its first poll will send.
    headers = re.search(r'id="task-tabs"[^>]*hx-headers="([^"]*)"', html).group(1)
    assert json.loads(unescape(headers)) == {"If-None-Match": etag}


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
@needs_chromium
def test_timeline_after_a_four_hour_wait_shows_the_work_a_marked_break_and_the_rollback(
    live_server, open_page, run_task, operator
):
    import time_machine
    from django.utils import timezone

    from checkpoints.models import Checkpoint
    from checkpoints.recovery import checkpoint_rollback

    # The task ran and paused for review four hours ago; the operator rolls it back now.
    with time_machine.travel(timezone.now() - timedelta(hours=4, seconds=30), tick=True):
        task = run_task(
            [
                {"call": "write_file", "args": {"path": "notes.txt", "content": "one"}},
                {"call": "write_file", "args": {"path": "etc/app.conf", "content": "x"}},
                {"final": "."},
            ],
            ["write_file"],
        )
    assert task.status == "waiting_review"
    target = Checkpoint.objects.filter(task=task, trigger="after_step").order_by("seq").first()
    checkpoint_rollback(
        task_id=task.id, checkpoint_id=target.id, user=operator, reason="wrong file", resume=False
    )

    page = open_page(operator, f"/tasks/{task.id}/", timeout_ms=SLOW_MS)
    page.wait_for_selector("#timeline[data-ready='1']")
    layout = page.evaluate("document.getElementById('timeline').layout")
    # Two cuts: the four-hour review wait, and the hold since the rollback (still going on).
    cut = layout["xaxis"]["rangebreaks"][0]
    labels = [a["text"] for a in layout["annotations"]]
    assert labels[0] == "⋯ 4 h 0 min waiting for review ⋯"
    assert all(label.endswith("held ⋯") for label in labels[1:])
    assert page.locator("#timeline .annotation-text", has_text="4 h 0 min").count() == 1
    rollbacks = page.evaluate(
        "document.getElementById('timeline').data.find(t => t.name === 'rollbacks').hovertext"
    )
    assert rollbacks == [f"rollback to checkpoint #{target.seq} by operator: wrong file"]
    # The work before the wait is readable: the cut widens it from a sliver of a four-hour
    # axis to something one can point at. (Its share of the width depends on how long the
    # scripted steps took next to the other uncut spans: 1.5–10 % were seen.)
    width_px, share, share_uncut = page.evaluate(
        """bounds => {
          const el = document.getElementById('timeline');
          const xa = el._fullLayout.xaxis;
          const cps = el.data.filter(t => t.name.startsWith('checkpoints')).flatMap(t => t.x);
          const xs = cps.filter(x => x < bounds[0]).sort();
          const first = xs[0], last = xs[xs.length - 1];
          const px = xa.d2p(last) - xa.d2p(first);
          const all = cps.map(x => new Date(x).getTime());
          const span = Math.max(...all) - Math.min(...all);
          const work = new Date(last).getTime() - new Date(first).getTime();
          return [px, px / el._fullLayout._size.w, work / span];
        }""",
        cut["bounds"],
    )
    assert width_px >= 5
    assert share >= 100 * share_uncut
    # Held after the rollback: the header counts review time and held time apart.
    header = page.inner_text("[data-testid=task-time]")
    assert "waiting for review" in header and "s held" not in header.split("review")[0]

    # Held for half an hour, then canceled: the statistics show its four hours waiting for
    # review and its half hour held on their own rows.
    from checkpoints.recovery import task_cancel

    with time_machine.travel(timezone.now() + timedelta(minutes=30), tick=True):
        task_cancel(task_id=task.id, user=operator, reason="not needed")
        page.goto(f"{live_server.url}/stats/failures/?since=24h")
    waits = {
        row.get_attribute("data-kind"): [cell.inner_text() for cell in row.locator("td").all()]
        for row in page.locator("[data-testid=human-waits] tbody tr").all()
    }
    # [label, tasks (share), in all, mean, p50, p95]
    assert waits["review"][1] == "1 (100%)" and waits["held"][1] == "1 (100%)"
    assert waits["review"][2] == "4.0 h"
    # Held since the rollback: 30 min plus however long the checks above took.
    held_min, unit = waits["held"][2].split()
    assert unit == "min" and 30 <= float(held_min) < 40
