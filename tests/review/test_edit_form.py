"""Edit-then-approve as a form drawn from the tool's argument schema (dashboard.edit_form):
typed fields coerced into the arguments, errors beside their field with the input kept, the
JSON fallback, and the decided review showing the edited call's effect with the edit."""

from __future__ import annotations

from typing import Any

import pytest

from review.models import ReviewRequest
from tasks.canonical import canonical_hash
from tasks.models import Task
from tests.conftest import page_client, run_in_process

pytestmark = pytest.mark.django_db(transaction=True)

COMMAND = {"command": "ls -la", "timeout_s": 5}
REQUEST = {"method": "GET", "url": "http://127.0.0.1:9/items", "headers": {"Accept": "x"}}


def command_review(paused_review) -> ReviewRequest:
    return paused_review(
        script=[{"call": "run_command", "args": COMMAND}, {"final": "x"}],
        tools=["run_command"],
        files={"a.txt": "a\n"},
    )


@pytest.fixture
def request_review(settings, paused_review):
    """request_review() -> a paused http_request to a loopback address (allowed here)."""
    settings.HARNESS_HTTP_ALLOWLIST = ["http://127.0.0.1:9"]
    settings.HARNESS_HTTP_ALLOW_NETWORKS = ["127.0.0.0/8"]
    return lambda: paused_review(
        script=[{"call": "http_request", "args": REQUEST}, {"final": "x"}],
        tools=["http_request"],
        review={"always": ["http_request"]},
    )


def form_post(review: ReviewRequest, fields: dict[str, str], **extra: str) -> dict[str, str]:
    """An edit form's post: its fields (`arg.<name>`), naming the arguments under review."""
    return {
        "decision": "edit",
        "edit_mode": "form",
        "arguments_hash": canonical_hash(review.arguments),
        **{f"arg.{name}": value for name, value in fields.items()},
        **extra,
    }


def shown_fields(client, review: ReviewRequest) -> dict[str, Any]:
    """The form's fields as the page draws them: name -> (kind, value)."""
    edit = client.get(f"/reviews/{review.id}/").context["edit"]
    assert edit.mode == "form"
    return {f.name: (f.kind, f.value) for f in edit.fields}


def test_each_argument_gets_a_field_of_its_type(paused_review, request_review, operator):
    client = page_client(operator)
    command = command_review(paused_review)
    assert shown_fields(client, command) == {
        "command": ("string", "ls -la"),
        "timeout_s": ("number", "5"),
        "network": ("boolean", False),
        "env": ("json", ""),
        "cwd": ("string", ""),
    }
    request = request_review()
    fields = shown_fields(client, request)
    assert fields["method"] == ("enum", '"GET"')
    assert fields["headers"] == ("json", '{\n  "Accept": "x"\n}')
    page = client.get(f"/reviews/{request.id}/").content.decode()
    assert '<option value="&quot;DELETE&quot;">DELETE</option>' in page
    assert 'name="arg.timeout_s" value="" step="any" min="0" max="30.0"' in page


def test_typed_fields_are_coerced_into_the_arguments(paused_review, operator):
    review = command_review(paused_review)
    response = page_client(operator).post(
        f"/reviews/{review.id}/decide/",
        form_post(review, {"command": "ls", "timeout_s": "2.5", "network": "true"}),
    )
    assert response.status_code == 302
    review.refresh_from_db()
    assert review.edited_arguments == {"command": "ls", "timeout_s": 2.5, "network": True}


def test_a_number_that_is_not_one_is_a_422_naming_the_field_and_keeps_the_input(
    paused_review, operator
):
    review = command_review(paused_review)
    response = page_client(operator).post(
        f"/reviews/{review.id}/decide/",
        form_post(review, {"command": "echo typed by hand", "timeout_s": "abc"}),
    )
    assert response.status_code == 422
    page = response.content.decode()
    assert "arguments.timeout_s" in page and 'data-testid="edit-error-timeout_s"' in page
    assert 'name="arg.timeout_s" value="abc"' in page
    assert 'name="arg.command" value="echo typed by hand"' in page
    review.refresh_from_db()
    assert review.status == "pending" and review.edited_arguments is None


def test_an_unchecked_box_and_an_unchanged_form_approve_the_call_as_proposed(
    paused_review, operator
):
    review = command_review(paused_review)
    client = page_client(operator)
    fields = shown_fields(client, review)
    posted = {name: value for name, (kind, value) in fields.items() if kind != "boolean"}
    response = client.post(f"/reviews/{review.id}/decide/", form_post(review, posted))
    assert response.status_code == 302
    review.refresh_from_db()
    assert review.status == "approved" and review.edited_arguments is None


def test_an_enum_is_a_choice_of_its_values(request_review, operator):
    review = request_review()
    client = page_client(operator)
    fields = {"method": '"TRACE"', "url": REQUEST["url"], "headers": '{"Accept": "x"}'}
    refused = client.post(f"/reviews/{review.id}/decide/", form_post(review, fields))
    assert refused.status_code == 422 and "arguments.method" in refused.content.decode()
    fields["method"] = '"DELETE"'
    assert (
        client.post(f"/reviews/{review.id}/decide/", form_post(review, fields)).status_code == 302
    )
    review.refresh_from_db()
    assert review.edited_arguments == {**REQUEST, "method": "DELETE"}


def test_a_nested_object_is_edited_as_json_checked_before_anything_changes(
    request_review, operator
):
    review = request_review()
    client = page_client(operator)
    fields = {"method": '"GET"', "url": REQUEST["url"], "headers": '{"Accept": '}
    broken = client.post(f"/reviews/{review.id}/decide/", form_post(review, fields))
    assert broken.status_code == 422
    page = broken.content.decode()
    assert "arguments.headers" in page and "must be valid JSON" in page
    assert "{&quot;Accept&quot;: </textarea>" in page  # what was typed, kept
    # The schema's own check of the object (header names) is also shown beside it.
    fields["headers"] = '{"bad header": "x"}'
    refused = client.post(f"/reviews/{review.id}/decide/", form_post(review, fields))
    assert refused.status_code == 422
    assert 'data-testid="edit-error-headers"' in refused.content.decode()
    fields["headers"] = '{"Accept": "application/json", "X-Trace": "1"}'
    assert (
        client.post(f"/reviews/{review.id}/decide/", form_post(review, fields)).status_code == 302
    )
    review.refresh_from_db()
    assert review.edited_arguments["headers"] == {"Accept": "application/json", "X-Trace": "1"}


def test_file_content_keeps_its_line_breaks_and_the_decided_page_shows_the_file_written(
    paused_review, operator
):
    review = paused_review(
        script=[
            {"call": "write_file", "args": {"path": "app.conf", "content": "a=1\nb=2\n"}},
            {"final": "configured"},
        ],
        tools=["write_file"],
        files={"app.conf": "a=0\n"},
    )
    client = page_client(operator)
    assert shown_fields(client, review)["content"] == ("text", "a=1\nb=2\n")
    # A browser sends a multi-line field's line breaks as CRLF.
    typed = "a=1\r\nb=3\r\nc=4\r\n"
    response = client.post(
        f"/reviews/{review.id}/decide/",
        form_post(review, {"path": "app.conf", "content": typed}, comment="b is 3"),
    )
    assert response.status_code == 302
    task = Task.objects.get(pk=review.task_id)
    assert run_in_process(task) == "succeeded"
    assert (task.workspace_path / "app.conf").read_text() == "a=1\nb=3\nc=4\n"

    page = client.get(f"/reviews/{review.id}/").content.decode()
    written = page[
        page.index('data-testid="edited-call"') : page.index('data-testid="edit-changes"')
    ]
    assert '<span class="diff-add">+b=3</span>' in written  # the file as written
    assert '<span class="diff-del">-a=0</span>' in written
    edit = page[page.index('data-testid="edit-changes"') : page.index("proposal-preview")]
    assert '<span class="diff-del">-b=2</span><span class="diff-add">+b=3</span>' in edit
    assert "\\n" not in edit  # a line diff of the text, not of its JSON


def test_a_schema_that_cannot_be_drawn_falls_back_to_json(paused_review, operator):
    review = paused_review()
    client = page_client(operator)
    page = client.get(f"/reviews/{review.id}/")
    assert page.context["edit"].mode == "form"
    # Arguments outside the schema's properties cannot be drawn: the whole object as JSON.
    ReviewRequest.objects.filter(pk=review.pk).update(
        original_arguments={"path": "old.log", "unknown": 1}
    )
    fallback = client.get(f"/reviews/{review.id}/")
    assert fallback.context["edit"].mode == "json"
    assert 'data-testid="arguments"' in fallback.content.decode()
