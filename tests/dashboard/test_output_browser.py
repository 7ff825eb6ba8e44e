"""What a command prints, in headless Chromium against the real server and real workers: its
stdout on the task page while it runs (before it ends: it waits for a file the test creates),
then on the calls tab through the timeline's click-through, a large stream cut on the page
with a working download of what is stored, and markup in the output shown as text."""

from __future__ import annotations

import pytest

from tasks.models import Task
from tasks.outputs import STORED_BYTES
from tests.conftest import BROWSER, wait_for
from tests.factories import scripted_task
from tests.security.test_csp_browser import RECORD_VIOLATIONS

pytestmark = [*BROWSER, pytest.mark.integration]

SLOW_MS = 60_000
MARKUP = "<script>window.__xss=1</script><b>bold</b>"
COMMAND = (
    "echo first-line; while [ ! -e go ]; do sleep 0.05; done; echo second-line; "
    f"printf '%s\\n' '{MARKUP}'; head -c {STORED_BYTES + 5000} /dev/zero | tr '\\0' b >&2"
)


def test_command_output_is_live_while_it_runs_then_on_the_calls_tab(
    live_server, worker_pool, open_page, operator, commands_allowed, tmp_path
):
    # One worker is enough; room for a loaded machine to start it.
    worker_pool.start(1, timeout=240)
    task = scripted_task(
        [{"call": "run_command", "args": {"command": COMMAND}}, {"final": "done"}],
        ["run_command"],
        user=operator,
        enqueue=True,
        title="prints, waits, prints",
    )
    page = open_page(
        operator, f"/tasks/{task.id}/", init_script=RECORD_VIOLATIONS, timeout_ms=SLOW_MS
    )
    # While it runs: the first line, and the call as running, before the command ends.
    stdout = page.locator("[data-testid=live-stream][data-name=stdout] pre")
    stdout.filter(has_text="first-line").wait_for()
    assert "second-line" not in stdout.inner_text()
    heading = page.inner_text("[data-testid=live-output] h2")
    assert heading.startswith("Running now: run_command") and "running for" in heading
    assert Task.objects.get(id=task.id).status == "running"

    (task.workspace_path / "go").write_text("")
    page.wait_for_selector("[data-testid=task-status]:has-text('succeeded')")
    wait_for(
        lambda: page.locator("[data-testid=live-stream]").count() == 0,
        30,
        message="the live panel to empty once the call ended",
    )

    # The timeline's tool bar leads to the call on the calls tab.
    page.wait_for_function(
        "() => (document.getElementById('timeline').data || [])"
        ".some(t => t.name === 'tool attempts')"
    )
    link = page.evaluate(
        "document.getElementById('timeline').data"
        ".find(t => t.name === 'tool attempts').customdata[0]"
    )
    page.goto(f"{live_server.url}{link}")
    row = page.locator("tr.call:target")
    assert row.count() == 1 and "run_command" in row.inner_text()
    output = page.locator("[data-testid=call-output]")
    shown = output.locator("[data-name=stdout] pre").inner_text()
    assert shown == f"first-line\nsecond-line\n{MARKUP}\n"
    assert "exit code 0" in output.inner_text()
    assert page.evaluate("window.__xss") is None
    assert page.locator("[data-testid=call-output] b").count() == 0
    assert page.evaluate("window.__csp") == []

    # stderr is larger than the page shows: cut, with the whole stored part as a download.
    stderr = output.locator("[data-name=stderr]")
    assert "showing the first 8.0 KB" in stderr.inner_text().replace("\xa0", " ")
    with page.expect_download() as download:
        stderr.locator("[data-testid=output-download]").click()
    saved = tmp_path / "stderr.txt"
    download.value.save_as(saved)
    assert saved.read_bytes() == b"b" * STORED_BYTES
