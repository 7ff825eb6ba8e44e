"""Tool output is hostile text. On the calls tab, the outcome-unknown review and the live
panel it is rendered escaped (a link only when it is http(s)); a download is an attachment
with `nosniff`, served as text/plain, a safe image type or application/octet-stream (never
SVG, never HTML); and outputs are read as their task is: viewers read, no-group users get
403, and an output is found only under its own task."""

from __future__ import annotations

import pytest

from tasks.models import OutputKind, ToolOutput
from tasks.outputs import CallOutput, live_output_put, output_rows
from tests.factories import TaskFactory, ToolCallFactory

pytestmark = pytest.mark.django_db

PAYLOAD = '<script>window.__xss=1</script><img src=x onerror="window.__xss=2">'
PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000")


def _task_with_outputs(**output: str):
    task = TaskFactory(status="succeeded")
    call = ToolCallFactory(
        task=task,
        call_id='c"1\n<b>',
        tool="run_command",
        status="succeeded",
        attempts=1,
        attempt_log=[{"n": 1, "status": "succeeded", "exit_code": 0}],
    )
    sink = CallOutput()
    sink.write("stdout", PAYLOAD.encode())
    sink.attach(name="link", data=PAYLOAD, kind=OutputKind.LINK, href="javascript:alert(1)")
    sink.attach(
        name="svg", data=b"<svg onload=alert(1)>", kind=OutputKind.IMAGE, media_type="image/svg+xml"
    )
    sink.attach(name="png", data=PNG, kind=OutputKind.IMAGE, media_type="image/png")
    for row in output_rows(task_id=task.id, call_id=call.call_id, attempt=1, output=sink):
        row.save()
    return task, {row.name: row for row in ToolOutput.objects.filter(task=task)}


def test_output_is_rendered_as_escaped_text(as_user, viewer, settings):
    task, rows = _task_with_outputs()
    html = as_user(viewer).get(f"/tasks/{task.id}/", {"tab": "calls"}).content.decode()
    assert "&lt;script&gt;window.__xss=1&lt;/script&gt;" in html
    assert "<script>window.__xss" not in html and "<img src=x" not in html
    # A link that is not http(s) is not a link; an SVG is not an image.
    assert "javascript:" not in html
    assert rows["svg"].kind == OutputKind.BINARY
    assert html.count('data-testid="output-image"') == 1


def test_the_live_panel_shows_a_running_calls_output_escaped(as_user, viewer):
    task = TaskFactory(status="running")
    sink = CallOutput()
    sink.write("stdout", PAYLOAD.encode())
    live_output_put(
        task_id=task.id,
        call_id="c1",
        tool=PAYLOAD,
        attempt=1,
        started_at=task.created_at,
        output=sink,
    )
    html = as_user(viewer).get(f"/tasks/{task.id}/live-output/").content.decode()
    assert "&lt;script&gt;window.__xss=1&lt;/script&gt;" in html
    assert "<script>window.__xss" not in html and "<img src=x" not in html


@pytest.mark.parametrize(
    "name, content_type",
    [
        ("stdout", "text/plain; charset=utf-8"),
        ("svg", "application/octet-stream"),
        ("png", "image/png"),
    ],
)
def test_a_download_is_an_attachment_that_is_never_sniffed(as_user, viewer, name, content_type):
    task, rows = _task_with_outputs()
    for path in (
        f"/tasks/{task.id}/outputs/{rows[name].id}/",
        f"/api/v1/tasks/{task.id}/outputs/{rows[name].id}",
    ):
        response = as_user(viewer).get(path)
        assert response.status_code == 200, path
        assert response["Content-Type"] == content_type
        assert response["X-Content-Type-Options"] == "nosniff"
        disposition = response["Content-Disposition"]
        # The call id's quote, newline and markup never reach the header.
        assert disposition.startswith('attachment; filename="c_1_b_-attempt1-')
        assert disposition.count('"') == 2 and "\n" not in disposition


def test_outputs_are_read_as_their_task_is(as_user, api_client, cast):
    task, rows = _task_with_outputs()
    other, _ = _task_with_outputs()
    row = rows["stdout"]
    page = f"/tasks/{task.id}/outputs/{row.id}/"
    api = f"/api/v1/tasks/{task.id}/outputs/{row.id}"
    assert as_user(cast["viewer"]).get(page).status_code == 200
    assert as_user(cast["outsider"]).get(page).status_code == 403
    assert "login" in as_user(None).get(page)["Location"]
    assert api_client(cast["outsider"]).get(api).status_code == 403
    assert api_client(None).get(api).status_code == 401
    # Only under its own task: another task's URL does not reach it.
    assert as_user(cast["viewer"]).get(f"/tasks/{other.id}/outputs/{row.id}/").status_code == 404
    assert (
        api_client(cast["viewer"]).get(f"/api/v1/tasks/{other.id}/outputs/{row.id}").status_code
        == 404
    )
    assert as_user(cast["outsider"]).get(f"/tasks/{task.id}/live-output/").status_code == 403
    listed = api_client(cast["outsider"]).get(f"/api/v1/tasks/{task.id}/tool-calls")
    assert listed.status_code == 403
