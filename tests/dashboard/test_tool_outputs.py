"""What each call did, on the task page's calls tab and over the API: a command's stdout,
stderr, exit code, duration and the limit it hit; a file tool's diff; a large output cut on
the page with a download of what is stored; the timeline's click-through to a call."""

from __future__ import annotations

import pytest

from agent.runtime.live import LiveOutput
from tasks.models import ToolCall, ToolOutput
from tasks.outputs import STORED_BYTES, CallOutput, live_output_get
from tests.conftest import wait_for
from tests.factories import TaskFactory

pytestmark = pytest.mark.django_db


def _outputs(task) -> dict[str, str]:
    return {
        row.name: row.preview
        for row in ToolOutput.objects.filter(task=task).order_by("attempt", "position")
    }


def test_a_commands_streams_exit_code_and_duration_show_on_the_calls_tab(
    as_user, viewer, run_task, commands_allowed
):
    task = run_task(
        [
            {"call": "run_command", "args": {"command": "echo to-out; echo to-err >&2; exit 3"}},
            {"final": "done"},
        ],
        ["run_command"],
    )
    assert _outputs(task) == {"stdout": "to-out\n", "stderr": "to-err\n"}
    response = as_user(viewer).get(f"/tasks/{task.id}/", {"tab": "calls"})
    html = response.content.decode()
    assert 'data-testid="exit-code">exit code 3<' in html
    assert "to-out\n</pre>" in html and "to-err\n</pre>" in html
    (call, _edit, attempts) = response.context["calls"][0]
    assert attempts[0]["exit_code"] == 3 and attempts[0]["ran_ms"] >= 0


def test_a_file_tools_change_shows_as_a_diff(as_user, viewer, run_task):
    task = run_task(
        [
            {"call": "write_file", "args": {"path": "a.txt", "content": "new\n"}},
            {"call": "append_file", "args": {"path": "b.txt", "content": "more\n"}},
            {"final": "done"},
        ],
        ["write_file", "append_file"],
        workspace={"files": {"a.txt": "old\n", "b.txt": "one\n"}},
    )
    diffs = [
        row.preview for row in ToolOutput.objects.filter(task=task, name="diff").order_by("id")
    ]
    assert diffs == [
        "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-old\n+new\n",
        "--- a/b.txt\n+++ b/b.txt\n@@ -1 +1,2 @@\n one\n+more\n",
    ]
    html = as_user(viewer).get(f"/tasks/{task.id}/", {"tab": "calls"}).content.decode()
    assert "-old\n+new" in html


def test_a_short_text_output_is_stored_once_and_downloads_whole(
    as_user, viewer, run_task, commands_allowed
):
    """A part its preview holds exactly is stored as the preview alone; bytes that are not
    text keep their compressed copy, downloaded as they were."""
    task = run_task(
        [
            {"call": "write_file", "args": {"path": "a.txt", "content": "one\n"}},
            {"call": "run_command", "args": {"command": "printf 'caf\\351\\n'"}},
            {"final": "done"},
        ],
        ["write_file", "run_command"],
    )
    diff = ToolOutput.objects.get(task=task, name="diff")
    stdout = ToolOutput.objects.get(task=task, name="stdout")
    assert bytes(diff.data) == b"" and bytes(stdout.data) != b""
    client = as_user(viewer)
    assert client.get(f"/tasks/{task.id}/outputs/{diff.id}/").content == diff.preview.encode()
    assert client.get(f"/tasks/{task.id}/outputs/{stdout.id}/").content == b"caf\xe9\n"


def test_a_large_output_is_cut_on_the_page_and_downloaded_as_stored(
    as_user, viewer, run_task, commands_allowed
):
    size = STORED_BYTES + 100_000
    task = run_task(
        [
            {"call": "run_command", "args": {"command": f"head -c {size} /dev/zero | tr '\\0' a"}},
            {"final": "done"},
        ],
        ["run_command"],
    )
    row = ToolOutput.objects.get(task=task, name="stdout")
    assert (row.size, row.stored) == (size, STORED_BYTES)
    html = as_user(viewer).get(f"/tasks/{task.id}/", {"tab": "calls"}).content.decode()
    assert "showing the first 8.0\xa0KB" in html and "the first 2.0\xa0MB kept" in html
    assert "a" * 8192 in html and "a" * 8193 not in html
    download = as_user(viewer).get(f"/tasks/{task.id}/outputs/{row.id}/")
    assert download.status_code == 200
    assert download.content == b"a" * STORED_BYTES
    assert download["Content-Type"] == "text/plain; charset=utf-8"


def test_the_timeline_links_each_attempt_to_its_call_on_the_calls_tab(as_user, viewer, run_task):
    task = run_task(
        [{"call": "read_file", "args": {"path": "x.txt"}}, {"final": "done"}],
        ["read_file"],
        workspace={"files": {"x.txt": "x"}},
    )
    figure = as_user(viewer).get(f"/tasks/{task.id}/").context["timeline"]
    bars = next(t for t in figure["data"] if t["name"] == "tool attempts")
    link = bars["customdata"][0]
    call_id = ToolCall.objects.get(task=task).call_id
    assert link == f"/tasks/{task.id}/?tab=calls&call={call_id}#call-{call_id}"
    response = as_user(viewer).get(link.split("#")[0])
    assert f'id="call-{call_id}" class="call opened"' in response.content.decode()


def test_the_api_lists_each_calls_outputs_with_a_download(
    api_client, viewer, run_task, commands_allowed
):
    task = run_task(
        [{"call": "run_command", "args": {"command": "printf hello"}}, {"final": "done"}],
        ["run_command"],
    )
    api = api_client(viewer)
    (call,) = api.get(f"/api/v1/tasks/{task.id}/tool-calls").json()
    assert call["attempt_log"][0]["exit_code"] == 0
    (stdout,) = call["outputs"]
    assert (stdout["name"], stdout["preview"], stdout["size"]) == ("stdout", "hello", 5)
    download = api.get(stdout["download_url"])
    assert download.status_code == 200 and download.content == b"hello"


def test_a_running_call_without_streams_shows_as_running_with_its_elapsed_time(as_user, viewer):
    task = TaskFactory(status="running")
    live = LiveOutput(task_id=task.id)
    live.begin(call_id="0.1.0", tool="sleep", attempt=1, output=CallOutput())
    try:
        wait_for(lambda: live_output_get(task_id=task.id), 10, message="the call published")
        html = as_user(viewer).get(f"/tasks/{task.id}/live-output/").content.decode()
        assert "Running now: <code>sleep</code>" in html
        assert 'data-testid="live-elapsed">' in html and "running for" in html
        assert 'data-testid="live-stream"' not in html
    finally:
        live.end()
        live.close()
    html = as_user(viewer).get(f"/tasks/{task.id}/live-output/").content.decode()
    assert "Running now" not in html
