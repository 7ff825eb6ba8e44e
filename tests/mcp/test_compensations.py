"""An MCP server's tool undone by another of its tools, mapped in harness.yaml
(`mcp_servers.<name>.compensations`, issue #44): the rollback preview shows the exact
compensating call, its arguments filled in from the original call's arguments and the
structured content the server returned. A tool with no mapping cannot be undone."""

from __future__ import annotations

import pytest

from checkpoints.selectors import rollback_preview
from tasks.models import ToolCall
from tests.checkpoints.conftest import checkpoint_after_step
from tests.factories import run_in_process, scripted_task

pytestmark = pytest.mark.django_db(transaction=True)

CONFIG = """
review_rules: []
mcp_servers:
  remote:
    url: {url}
    compensations:
      create_issue:
        tool: close_issue
        args: {{project: "{{{{ args.project }}}}", id: "{{{{ result.id }}}}"}}
"""


@pytest.fixture
def mapped(harness_yaml, mcp_http, settings, harness_dirs):
    settings.HARNESS_BLOB_DIR = harness_dirs / "blobs"
    harness_yaml(CONFIG.format(url=mcp_http.url))


def test_the_mapping_produces_the_compensating_call(mapped, mcp_http):
    task = scripted_task(
        [
            {"call": "write_file", "args": {"path": "a.txt", "content": "1"}},
            {"call": "remote__create_issue", "args": {"project": "ops", "title": "API down"}},
            {"call": "remote__unmarked", "args": {"key": "u-1"}},
            {"call": "remote__lookup", "args": {"key": "l-1"}},
            {"final": "done"},
        ],
        [
            "write_file",
            "remote__create_issue",
            "remote__close_issue",
            "remote__unmarked",
            "remote__lookup",
        ],
    )
    assert run_in_process(task) == "succeeded", task.error_message
    created = ToolCall.objects.get(task=task, tool="remote__create_issue")
    issue = created.result["id"]
    assert issue.startswith("ops-")
    preview = rollback_preview(task=task, checkpoint=checkpoint_after_step(task, 1))
    assert [(c["call_id"], c["tool"], c["arguments"]) for c in preview.compensations] == [
        (created.call_id, "remote__close_issue", {"project": "ops", "id": issue})
    ]
    # No mapping: the server's unannotated tool is listed; the read-only lookup is not.
    assert [(c["tool"], c["why"].split(":")[0]) for c in preview.irreversible] == [
        ("remote__unmarked", "no compensation declared")
    ]
    # A preview runs nothing.
    assert not mcp_http.calls("close_issue")
