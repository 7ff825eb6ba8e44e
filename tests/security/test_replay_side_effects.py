"""A replay of a saved case never causes a live side effect unless asked to, and then only in
its own workspace or the sandbox with the network off (issue #31, THREATS.md). A recorded call
is answered from the recording without running; a call the recording does not answer stops the
replay before it runs; `on_divergence: sandbox` lets only workspace tools and run_command
without network run, in the replay's own workspace."""

from __future__ import annotations

import pytest

from agent.tools.testing import ledger_records
from cases.selectors import case_run_report
from cases.services import case_replay_start, case_save
from tests.factories import run_in_process, scripted_model, scripted_task

pytestmark = pytest.mark.django_db(transaction=True)

TOOLS = ["write_file", "read_file", "ledger_append", "run_command"]
RECORDED = [
    {"call": "write_file", "args": {"path": "a.md", "content": "a\n"}},
    {"call": "ledger_append", "args": {"key": "recorded", "value": "1"}},
    {"call": "read_file", "args": {"path": "a.md"}},
    {"final": "done"},
]


@pytest.fixture
def case(harness_yaml, operator):
    harness_yaml("review_rules: []\n")
    task = scripted_task(RECORDED, TOOLS, user=operator)
    assert run_in_process(task) == "succeeded", task.error_message
    assert len(ledger_records(key="recorded")) == 1
    return case_save(task=task, user=operator, name="side effects"), task


def replayed(case, operator, **options):
    run = case_replay_start(case=case, user=operator, enqueue=False, **options)
    run_in_process(run.task)
    return run, case_run_report(case_run=run)


def candidate(*turns):
    """The recording's first turn, then `turns`."""
    return scripted_model(RECORDED[0], *turns, {"final": "done"})


def test_a_recorded_external_call_is_answered_from_the_recording_not_run(case, operator):
    saved, _ = case
    run, report = replayed(saved, operator)
    assert report["passed"], report["failures"]
    assert len(ledger_records(key="recorded")) == 1


def test_a_divergent_external_call_does_not_run(case, operator):
    saved, _ = case
    model = candidate({"call": "ledger_append", "args": {"key": "live", "value": "x"}})
    run, report = replayed(saved, operator, model=model)
    assert run.task.status == "failed" and run.task.error_class == "replay_diverged"
    assert report["divergence"]["ran"] == "no" and report["first_divergent_step"] == 2
    assert ledger_records(key="live") == []


def test_sandbox_mode_still_stops_a_call_outside_the_sandbox(case, operator):
    saved, _ = case
    model = candidate({"call": "ledger_append", "args": {"key": "live", "value": "x"}})
    run, report = replayed(saved, operator, model=model, on_divergence="sandbox")
    assert run.task.error_class == "replay_diverged"
    assert ledger_records(key="live") == []


def test_sandbox_mode_never_grants_the_network(case, operator, harness_yaml, commands_allowed):
    saved, _ = case
    # Even where this harness runs commands unreviewed and lets them ask for the network.
    harness_yaml("review_rules: []\nsandbox: {allow_network: true}\n")
    marker = "ran-with-network"
    command = {"command": f"touch {marker}", "network": True}
    model = candidate({"call": "run_command", "args": command})
    run, report = replayed(saved, operator, model=model, on_divergence="sandbox")
    assert run.task.error_class == "replay_diverged"
    assert report["divergence"]["tool"] == "run_command"
    assert not (run.task.workspace_path / marker).exists()


def test_sandbox_mode_runs_a_divergent_workspace_call_in_the_replay_s_workspace_only(
    case, operator
):
    saved, source = case
    model = candidate({"call": "write_file", "args": {"path": "b.md", "content": "b\n"}})
    run, report = replayed(saved, operator, model=model, on_divergence="sandbox")
    assert report["divergence"]["ran"] == "sandbox"
    assert (run.task.workspace_path / "b.md").read_text() == "b\n"
    assert not (source.workspace_path / "b.md").exists()
    assert not report["passed"]


# --- a command's recorded file effect is applied inside the replay's workspace only -----------


@pytest.mark.parametrize("path", ["../{name}", "/tmp/{name}", "a/../../{name}"])
def test_a_recorded_effect_cannot_write_outside_the_replay_workspace(
    harness_dirs, harness_yaml, operator, path, tmp_path
):
    """A case's recording is data in the database: an effect naming a path outside the
    workspace stops the replay and writes nothing."""
    import base64
    import os
    import uuid

    from cases.models import Case

    name = f"escaped-{uuid.uuid4().hex}.txt"
    path = path.format(name=name)

    harness_yaml("review_rules:\n  - {name: commands, tool: run_command, action: allow}\n")
    script = [
        {"call": "run_command", "args": {"command": "printf x > made.txt"}},
        {"final": "done"},
    ]
    task = scripted_task(script, ["run_command"], user=operator)
    assert run_in_process(task) == "succeeded", task.error_message
    saved = case_save(task=task, user=operator, name="tampered")
    recording = saved.recording
    effects = recording["calls"][0]["effects"]
    effects["write"] = {path: {"b64": base64.b64encode(b"pwned").decode(), "mode": 0o644}}
    Case.objects.filter(id=saved.id).update(recording=recording)
    saved.refresh_from_db()
    target = os.path.normpath(os.path.join(harness_dirs, "ws", path))
    run, report = replayed(saved, operator)
    assert run.task.status == "failed" and run.task.error_class == "replay_diverged"
    assert "recorded file effect" in report["divergence"]["reason"]
    for place in (
        target,
        "/tmp/escaped.txt",
        "/tmp/escaped-abs.txt",
        str(tmp_path / "escaped.txt"),
    ):
        assert not os.path.exists(place), place
