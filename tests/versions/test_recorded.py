"""Every checkpoint and review records the code it was made with (issue #43 item 1): the
harness version, the spec's hash, each tool's argument schema hash, the policy's hash; each
hashed body readable back (checkpoints.versions.version_body)."""

from __future__ import annotations

import pytest

from checkpoints.models import Checkpoint
from checkpoints.versions import checkpoint_versions, version_body
from harness_base.versions import harness_version, version_newer
from tasks.canonical import canonical_hash
from tasks.tools.registry import registry
from tests.conftest import ApiClient, approve
from tests.factories import run_in_process

pytestmark = pytest.mark.django_db(transaction=True)


def test_checkpoints_and_review_record_the_versions_they_were_made_under(paused_review):
    review = paused_review()
    task = review.task
    checkpoints = list(Checkpoint.objects.filter(task=task).order_by("seq"))
    assert [c.trigger for c in checkpoints][-1] == "before_review"
    versions = checkpoints[-1].versions
    assert all(c.versions == versions for c in checkpoints)
    assert versions["harness"] == harness_version()
    assert versions["harness"]["version"] == "0.1.0"
    assert versions["spec"] == canonical_hash(task.spec)
    schema = registry.get("delete_file").json_schema()
    assert versions["tools"] == {"delete_file": canonical_hash(schema)}
    assert versions["mcp"] == {}
    assert "graph" not in versions and "agent" not in versions
    # Each hash names its body, stored once.
    assert version_body(versions["tools"]["delete_file"]) == schema
    # The spec's body is the task's own: not copied where deleting the task would not reach.
    assert version_body(versions["spec"]) is None
    assert isinstance(version_body(versions["policy"]), list)
    assert version_body("0" * 64) is None
    # The review was opened under the same code; the task's head names it.
    assert review.versions == versions
    assert checkpoint_versions(task_id=task.id) == versions


def test_a_resumed_run_records_the_code_of_the_worker_that_resumed_it(
    paused_review, operator, settings
):
    review = paused_review()
    settings.HARNESS_VERSION = "0.2.0"
    approve(review, operator)
    task = review.task
    assert run_in_process(task) == "succeeded"
    head = checkpoint_versions(task_id=task.id)
    assert head["harness"]["version"] == "0.2.0"
    first = Checkpoint.objects.filter(task=task).order_by("seq").first()
    assert first.versions["harness"]["version"] == "0.1.0"
    assert head["tools"] == first.versions["tools"]


def test_versions_compare_by_pep_440():
    assert version_newer("0.10.0", "0.9.1")
    assert version_newer("1.0.0", "1.0.0rc1")
    assert not version_newer("0.1.0", "0.1.0")
    assert not version_newer("garbage", "0.1.0")


def test_versions_are_in_the_api_and_on_the_pages(paused_review, operator, as_user):
    review = paused_review()
    task = review.task
    versions = review.versions
    api = ApiClient(operator)
    [*_, head] = api.get(f"/api/v1/tasks/{task.id}/checkpoints").json()
    assert head["versions"] == versions
    assert api.get(f"/api/v1/reviews/{review.id}").json()["versions"] == versions

    client = as_user(operator)
    short = versions["tools"]["delete_file"][:8]
    page = client.get(f"/reviews/{review.id}/").content.decode()
    assert 'data-testid="versions-harness">0.1.0<' in page
    assert f'delete_file <code title="{versions["tools"]["delete_file"]}">{short}</code>' in page
    checkpoint = review.checkpoint
    page = client.get(f"/tasks/{task.id}/checkpoints/{checkpoint.id}/rollback/").content.decode()
    assert 'data-testid="versions-harness">0.1.0<' in page
    assert f">{versions['spec'][:12]}</code>" in page
    tab = client.get(f"/tasks/{task.id}/?tab=checkpoints").content.decode()
    assert f'data-testid="checkpoint-harness-{checkpoint.seq}"' in tab


def test_an_mcp_server_s_tool_list_hashes_the_same_in_any_order_and_changes_with_a_schema():
    from agent.versions import mcp_bodies, versions_build
    from tasks.agent_state import McpTool

    search = McpTool(server="docs", tool="search", input_schema={"type": "object"})
    fetch = McpTool(server="docs", tool="fetch", annotations={"readOnlyHint": True})
    one, bodies = versions_build(spec={}, tools={}, mcp=mcp_bodies([search, fetch]), policy=[])
    two, _ = versions_build(spec={}, tools={}, mcp=mcp_bodies([fetch, search]), policy=[])
    assert one["mcp"] == two["mcp"] and set(one["mcp"]) == {"docs"}
    assert [t["name"] for t in bodies[one["mcp"]["docs"]]] == ["fetch", "search"]
    required = search.model_copy(update={"input_schema": {"type": "object", "required": ["q"]}})
    three, _ = versions_build(spec={}, tools={}, mcp=mcp_bodies([required, fetch]), policy=[])
    assert three["mcp"]["docs"] != one["mcp"]["docs"]
