"""A recorded command's file effects (issue #31): a replay answers a matched `run_command` from
the recording without running it, and re-applies what the command did to the workspace — files
written (content, mode), files removed, empty folders made — so later calls and the case's file
checks see the same workspace as recorded."""

from __future__ import annotations

import base64
import stat

import pytest

from cases.selectors import case_run_report
from cases.services import case_replay_start, case_save
from tasks.models import Task, ToolCall
from tests.factories import run_in_process, scripted_task

pytestmark = pytest.mark.django_db(transaction=True)

COMMAND = (
    "mkdir -p out/empty && printf 'built\\n' > out/a.txt && chmod 755 out/a.txt"
    " && printf '\\000\\377' > out/b.bin && rm seed.md"
)
# Commands are reviewed unless a rule allows them (review.policy).
ALLOW_COMMANDS = "review_rules:\n  - {name: commands, tool: run_command, action: allow}\n"
SCRIPT = [
    {"call": "run_command", "args": {"command": COMMAND}},
    {"call": "read_file", "args": {"path": "out/a.txt"}},
    {"call": "write_file", "args": {"path": "notes.md", "content": "after\n"}},
    {"final": "built"},
]


@pytest.fixture
def recorded(harness_dirs, harness_yaml, operator):
    harness_yaml(ALLOW_COMMANDS)
    task = scripted_task(
        SCRIPT,
        ["run_command", "read_file", "write_file"],
        user=operator,
        workspace={"files": {"seed.md": "hello\n"}},
    )
    assert run_in_process(task) == "succeeded", task.error_message
    return task


def test_the_case_keeps_what_each_command_did_to_the_files(recorded, operator):
    case = case_save(task=recorded, user=operator, name="commands")
    command, read, write = case.recording["calls"]
    effects = command["effects"]
    assert base64.b64decode(effects["write"]["out/a.txt"]["b64"]) == b"built\n"
    assert effects["write"]["out/a.txt"]["mode"] & 0o777 == 0o755
    assert base64.b64decode(effects["write"]["out/b.bin"]["b64"]) == b"\x00\xff"
    assert effects["delete"] == ["seed.md"]
    assert effects["folders"] == ["out/empty"]
    # Only commands carry effects; the file tools re-apply their own.
    assert "effects" not in read and "effects" not in write


def test_a_replay_re_applies_the_commands_effects_and_passes(recorded, operator):
    case = case_save(task=recorded, user=operator, name="commands")
    run = case_replay_start(case=case, user=operator, enqueue=False)
    run_in_process(run.task)
    report = case_run_report(case_run=run)
    assert report["passed"], report["failures"]
    # The command did not run again: the replay's ledger row is the recorded answer...
    replayed = ToolCall.objects.get(task_id=run.task_id, tool="run_command")
    assert replayed.result == ToolCall.objects.get(task=recorded, tool="run_command").result
    # ...and its workspace holds what the command made, as recorded.
    workspace = Task.objects.get(id=run.task_id).workspace_path
    assert (workspace / "out" / "a.txt").read_bytes() == b"built\n"
    assert stat.S_IMODE((workspace / "out" / "a.txt").stat().st_mode) == 0o755
    assert (workspace / "out" / "b.bin").read_bytes() == b"\x00\xff"
    assert (workspace / "out" / "empty").is_dir()
    assert not (workspace / "seed.md").exists()
    assert (workspace / "notes.md").read_text() == "after\n"
