"""A rule about files covers every tool that writes them: the shipped `protected-config` rule
pauses appending to and deleting a `.conf` file as it pauses writing one, whatever spelling
of the path the model uses, and an MCP tool's path-named arguments are matched too."""

from __future__ import annotations

import dataclasses

import pytest

from review.policy import evaluate
from tasks.models import Task
from tasks.tools.registry import registry
from tests.factories import ReviewRuleFactory

pytestmark = pytest.mark.django_db(transaction=True)

CONF = {"x.conf": "port=1\n"}


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("write_file", {"path": "x.conf", "content": "port=6666\n"}),
        ("append_file", {"path": "x.conf", "content": "port=6666\n"}),
        ("append_file", {"path": "./sub/../x.conf", "content": "port=6666\n"}),
        ("delete_file", {"path": "x.conf"}),
    ],
)
def test_every_writing_tool_pauses_on_a_conf_file_under_the_shipped_rules(
    paused_review, settings, tool, args
):
    script = [{"call": tool, "args": args}, {"final": "done"}]
    review = paused_review(script, [tool], CONF)
    assert "protected-config" in [rule["name"] for rule in review.matched_rules]
    task = Task.objects.get(id=review.task_id)
    assert task.status == "waiting_review"
    # Nothing touched the file before a human decided.
    assert (settings.HARNESS_WORKSPACE_ROOT / str(task.id) / "x.conf").read_text() == "port=1\n"


def test_reading_a_conf_file_and_writing_other_files_still_run():
    assert evaluate(tool=registry.get("read_file"), args={"path": "x.conf"}).action == "allow"
    writing = evaluate(tool=registry.get("append_file"), args={"path": "x.txt", "content": "a"})
    assert writing.action == "allow"


def test_a_dotted_path_does_not_slip_past_a_folder_rule():
    ReviewRuleFactory(name="etc", tool="", risk="write", path_glob="etc/*.conf", action="deny")
    for path in ("etc/a.conf", "./etc/a.conf", "etc//a.conf", "x/../etc/a.conf"):
        decision = evaluate(tool=registry.get("append_file"), args={"path": path, "content": "a"})
        assert decision.action == "deny", path


def test_an_allow_rule_by_risk_write_does_not_allow_deleting():
    ReviewRuleFactory(name="writes-ok", tool="", risk="write", action="allow")
    assert evaluate(
        tool=registry.get("append_file"), args={"path": "a", "content": "b"}
    ).action == ("allow")
    deleting = evaluate(tool=registry.get("delete_file"), args={"path": "a"})
    assert deleting.action == "review" and deleting.rules[0]["name"] == "destructive"


def test_an_mcp_tool_that_writes_by_a_path_named_argument_is_matched():
    save = dataclasses.replace(
        registry.get("write_file"),
        name="files__save",
        server="files",
        input_schema={
            "type": "object",
            "properties": {"file_path": {"type": "string"}, "text": {"type": "string"}},
        },
    )
    paused = evaluate(tool=save, args={"file_path": "deploy/app.conf", "text": "x"})
    assert paused.action == "review" and paused.rules[0]["name"] == "protected-config"
    assert evaluate(tool=save, args={"file_path": "notes.md", "text": "a.conf"}).action == "allow"


def test_an_allow_rule_on_a_folder_covers_a_call_only_if_every_path_is_inside_it():
    ReviewRuleFactory(name="scratch", tool="files__copy", path_glob="tmp/*", action="allow")
    copy = dataclasses.replace(
        registry.get("write_file"),
        name="files__copy",
        server="files",
        input_schema={
            "type": "object",
            "properties": {"source": {"type": "string"}, "dest_file": {"type": "string"}},
        },
    )
    inside = {"source": "tmp/a.txt", "dest_file": "tmp/b.txt"}
    assert evaluate(tool=copy, args=inside).action == "allow"
    escaping = evaluate(tool=copy, args={"source": "tmp/a.txt", "dest_file": "deploy/app.conf"})
    assert escaping.action == "review" and escaping.rules[0]["name"] == "protected-config"
