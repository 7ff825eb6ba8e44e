"""A running command's live output in headless Chromium: the box follows its tail as lines
arrive on each poll (line N visible at the bottom), holds the operator's position when they
scrolled up to read, and shows stdout above stderr. The call's output is published as a worker
publishes it (tasks.outputs.live_output_put), line by line."""

from __future__ import annotations

from django.utils import timezone

from tasks.outputs import CallOutput, live_output_put
from tests.conftest import BROWSER
from tests.factories import TaskFactory

pytestmark = BROWSER

# The last line of the stream shows inside the box (its bottom is within the box's bottom).
LAST_LINE_SHOWN = """([name, line]) => {
  const pre = document.querySelector(`[data-testid=live-stream][data-name=${name}] pre`);
  if (!pre || !pre.textContent.includes(line + "\\n")) return false;
  return pre.scrollHeight - pre.scrollTop - pre.clientHeight < 4;
}"""


def _publish(task, output: CallOutput, started) -> None:
    live_output_put(
        task_id=task.id,
        call_id="0.1.0",
        tool="run_command",
        attempt=1,
        started_at=started,
        output=output,
    )


def test_live_output_follows_new_lines_and_holds_a_scrolled_up_position(open_page, operator):
    task = TaskFactory(status="running", created_by=operator)
    output, started = CallOutput(), timezone.now()
    output.write("stderr", b"warning: something\n")
    for n in range(1, 41):
        output.write("stdout", f"line {n}\n".encode())
    _publish(task, output, started)
    page = open_page(operator, f"/tasks/{task.id}/")
    names = page.eval_on_selector_all(
        "[data-testid=live-stream]", "els => els.map(e => e.dataset.name)"
    )
    assert names == ["stdout", "stderr"]
    page.wait_for_function(LAST_LINE_SHOWN, arg=["stdout", "line 40"])

    # New lines arrive on the poll: the box follows them to line 80.
    for n in range(41, 81):
        output.write("stdout", f"line {n}\n".encode())
        if n % 10 == 0:
            _publish(task, output, started)
            page.wait_for_function(LAST_LINE_SHOWN, arg=["stdout", f"line {n}"])

    # Scrolled up to read: the next poll brings line 81 and keeps the operator where they were.
    pre = "[data-testid=live-stream][data-name=stdout] pre"
    page.eval_on_selector(pre, "pre => { pre.scrollTop = 40; }")
    page.wait_for_function(f"() => document.querySelector('{pre}').scrollTop === 40")
    output.write("stdout", b"line 81\n")
    _publish(task, output, started)
    page.wait_for_function(f"() => document.querySelector('{pre}').textContent.includes('line 81')")
    assert page.eval_on_selector(pre, "pre => pre.scrollTop") == 40
    assert not page.evaluate(LAST_LINE_SHOWN, ["stdout", "line 81"])

    # Back at the bottom, it follows again, even when the poll lands before the scroll event
    # that records the move is dispatched (here: never dispatched to the page's listeners).
    page.evaluate("() => window.addEventListener('scroll', e => e.stopPropagation(), true)")
    page.eval_on_selector(pre, "pre => { pre.scrollTop = pre.scrollHeight; }")
    output.write("stdout", b"line 82\n")
    _publish(task, output, started)
    page.wait_for_function(LAST_LINE_SHOWN, arg=["stdout", "line 82"])

    # Scrolled up, then back down just as a poll lands, between its swap (which put the box
    # where it was held) and its settle: the settle does not take the operator back up.
    page.eval_on_selector(pre, "pre => { pre.scrollTop = 40; }")
    page.evaluate(
        """(pre) => document.addEventListener("htmx:afterSwap", function down(event) {
            if (event.detail.target.id !== "live-output") return;
            document.removeEventListener("htmx:afterSwap", down);
            const box = document.querySelector(pre);
            box.scrollTop = box.scrollHeight;
            document.addEventListener("htmx:afterSettle", () => { window.settled = true; }, {
                once: true,
            });
        })""",
        pre,
    )
    output.write("stdout", b"line 83\n")
    _publish(task, output, started)
    page.wait_for_function("() => window.settled === true")
    assert page.evaluate(LAST_LINE_SHOWN, ["stdout", "line 83"])


def test_a_held_box_offers_jump_to_latest_and_a_box_can_be_read_at_full_height(open_page, operator):
    task = TaskFactory(status="running", created_by=operator)
    output, started = CallOutput(), timezone.now()
    for n in range(1, 81):
        output.write("stdout", f"line {n}\n".encode())
    _publish(task, output, started)
    page = open_page(operator, f"/tasks/{task.id}/")
    stream = "[data-testid=live-stream][data-name=stdout]"
    pre, jump = f"{stream} pre", f"{stream} [data-live-jump]"
    page.wait_for_function(LAST_LINE_SHOWN, arg=["stdout", "line 80"])
    assert page.is_hidden(jump)

    # Scrolled up, the box offers the way back; a poll keeps both the position and the offer.
    page.eval_on_selector(pre, "pre => { pre.scrollTop = 0; }")
    page.wait_for_selector(jump, state="visible")
    output.write("stdout", b"line 81\n")
    _publish(task, output, started)
    page.wait_for_function(f"() => document.querySelector('{pre}').textContent.includes('line 81')")
    assert page.eval_on_selector(pre, "pre => pre.scrollTop") == 0
    assert page.is_visible(jump)

    # "Jump to latest": at the tail again, following the next line, the offer gone.
    page.click(f"{jump} button")
    page.wait_for_function(LAST_LINE_SHOWN, arg=["stdout", "line 81"])
    assert page.is_hidden(jump)
    output.write("stdout", b"line 82\n")
    _publish(task, output, started)
    page.wait_for_function(LAST_LINE_SHOWN, arg=["stdout", "line 82"])

    # Full height: every line in the page, no scrolling box, and it stays so across polls.
    uncapped = (
        f"() => {{ const p = document.querySelector('{pre}');"
        " return p.scrollHeight - p.clientHeight < 4 && p.clientHeight > 600; }"
    )
    assert not page.evaluate(uncapped)
    page.click(f"{stream} [data-testid=live-expand]")
    page.wait_for_function(uncapped)
    output.write("stdout", b"line 83\n")
    _publish(task, output, started)
    page.wait_for_function(f"() => document.querySelector('{pre}').textContent.includes('line 83')")
    assert page.evaluate(uncapped)
    assert page.get_attribute(f"{stream} [data-testid=live-expand]", "aria-pressed") == "true"
