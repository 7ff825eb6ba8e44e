from __future__ import annotations

import threading
import time

import pytest
from pydantic import ValidationError

from tasks.tools import PermanentToolError, ToolContext, ToolError, registry
from tests.conftest import processes_running, unique_sleep


def test_output_and_non_zero_exit_are_a_normal_result(call):
    result = call("run_command", {"command": "echo out; echo err >&2; exit 7"})

    assert result["exit_code"] == 7
    assert result["stdout"] == "out\n"
    assert result["stderr"] == "err\n"
    assert result["truncated"] is False
    assert result["duration_ms"] >= 0


def test_runs_in_the_workspace(call, workspace):
    (workspace / "given.txt").write_text("given\n")

    result = call("run_command", {"command": "pwd; cat given.txt; echo made > made.txt"})

    assert result["stdout"].splitlines() == ["/workspace", "given"]
    assert (workspace / "made.txt").read_text() == "made\n"


def test_env_and_cwd_are_the_calls_and_shown_in_the_preview(call, workspace, ctx):
    (workspace / "sub").mkdir()
    arguments = {"command": 'pwd; echo "$GREETING"', "env": {"GREETING": "hi"}, "cwd": "sub"}
    result = call("run_command", arguments)
    assert result["stdout"].splitlines() == ["/workspace/sub", "hi"]
    spec = registry.get("run_command")
    preview = spec.preview(ctx, spec.args_model.model_validate(arguments))
    assert "cwd: /workspace/sub" in preview and "env: GREETING=hi" in preview
    with pytest.raises(PermanentToolError, match="not a folder"):
        call("run_command", {"command": "true", "cwd": "missing"})


def test_environment_is_scrubbed(call, monkeypatch):
    monkeypatch.setenv("HARNESS_TEST_SECRET", "hunter2")

    result = call("run_command", {"command": 'env; echo "secret=${HARNESS_TEST_SECRET:-unset}"'})

    assert "hunter2" not in result["stdout"]
    assert "secret=unset" in result["stdout"]
    names = {line.split("=", 1)[0] for line in result["stdout"].splitlines() if "=" in line}
    assert names - {"secret"} <= {"PATH", "HOME", "LANG", "TMPDIR", "PWD", "SHLVL", "_"}


def test_tmp_is_private_to_the_call_and_not_in_the_workspace(call, workspace):
    first = call("run_command", {"command": 'echo scratch > "$TMPDIR/x"; echo "$TMPDIR"; ls /tmp'})
    second = call("run_command", {"command": "ls -A /tmp"})

    assert first["stdout"].splitlines() == ["/tmp", "x"]
    assert second["stdout"] == ""
    assert list(workspace.iterdir()) == []


def test_per_process_limits_apply_and_subshells_still_fork(call):
    result = call(
        "run_command",
        {
            "command": "ulimit -n; ulimit -f; (echo forked) | cat; sh -c 'echo nested'",
            "timeout_s": 5,
        },
    )

    assert result["stdout"].splitlines() == ["256", str(100 * 1024 * 2), "forked", "nested"]


def test_memory_limit_stops_a_large_allocation(call):
    result = call("run_command", {"command": "python3 -c 'bytearray(2 * 1024**3)'"})

    assert result["exit_code"] != 0
    assert result["limits_hit"] == ["memory"]
    assert "memory limit of 1024 MiB" in result["stderr"]


def test_large_output_is_truncated(call):
    result = call("run_command", {"command": "yes | head -c 200000"})

    assert result["truncated"] is True
    assert result["stdout"].startswith("y\ny\n")
    assert result["stdout"].endswith(f"[truncated: {200000 - 64 * 1024} more bytes]")
    assert len(result["stdout"]) < 64 * 1024 + 100


def test_timeout_kills_the_whole_process_group(call):
    sleep = unique_sleep()
    started = time.monotonic()

    with pytest.raises(ToolError) as excinfo:
        call("run_command", {"command": f"{sleep} & wait", "timeout_s": 1})

    assert excinfo.value.error_class == "timeout"
    assert str(excinfo.value) == "command timed out after 1s"
    assert time.monotonic() - started < 5
    assert processes_running(sleep) == []


def test_processes_ignoring_sigterm_are_killed(call):
    sleep = unique_sleep()

    with pytest.raises(ToolError, match="timed out"):
        call("run_command", {"command": f"trap '' TERM; {sleep} & wait", "timeout_s": 0.5})

    assert processes_running(sleep) == []


def test_background_jobs_do_not_outlive_a_finished_command(call):
    sleep = unique_sleep()

    result = call("run_command", {"command": f"{sleep} & echo done"})

    assert result["stdout"] == "done\n"
    assert processes_running(sleep) == []


def test_stop_event_stops_the_command_promptly(call, ctx):
    sleep = unique_sleep()
    threading.Timer(0.3, ctx.stop.set).start()
    started = time.monotonic()

    with pytest.raises(ToolError) as excinfo:
        call("run_command", {"command": f"{sleep} & wait"})

    assert excinfo.value.error_class == "canceled"
    assert str(excinfo.value) == "command stopped: task canceled"
    assert time.monotonic() - started < 3
    assert processes_running(sleep) == []


def test_the_context_timeout_caps_the_requested_timeout(call, workspace):
    short = ToolContext(task_id="t", call_id="c", workspace=workspace, timeout_s=0.5)

    with pytest.raises(ToolError, match="timed out after 0.5s"):
        call("run_command", {"command": "sleep 30", "timeout_s": 60}, context=short)


def test_a_missing_workspace_is_a_permanent_error(call, tmp_path):
    gone = ToolContext(task_id="t", call_id="c", workspace=tmp_path / "nope", timeout_s=5)

    with pytest.raises(PermanentToolError, match="workspace does not exist"):
        call("run_command", {"command": "true"}, context=gone)


@pytest.mark.parametrize(
    "arguments",
    [
        {},
        {"command": ""},
        {"command": "x" * 10_001},
        {"command": "true", "timeout_s": 61},
        {"command": "true", "timeout_s": 0},
        {"command": "true", "shell": "bash"},
        {"command": "true", "env": {"PATH": "/tmp"}},
        {"command": "true", "env": {"A-B": "1"}},
        {"command": "true", "cwd": "../other"},
        {"command": "true", "cwd": "/etc"},
        {"command": "true", "cwd": "a/./b"},
    ],
)
def test_bad_arguments_are_rejected(arguments):
    with pytest.raises(ValidationError):
        registry.get("run_command").args_model.model_validate(arguments)


def test_declared_as_a_non_idempotent_execute_with_a_preview(ctx):
    spec = registry.get("run_command")
    preview = spec.preview(
        ctx, spec.args_model.model_validate({"command": "make test", "timeout_s": 10})
    )

    assert (spec.risk, spec.side_effect, spec.idempotent, spec.timeout_s) == (
        "execute",
        True,
        False,
        60,
    )
    assert preview.splitlines()[0] == "$ make test"
    assert "cwd: /workspace" in preview
    assert "network: none" in preview
    assert "wall clock 10s" in preview and "memory 1024 MiB" in preview
    assert "processes 256" in preview and "for the whole sandbox" in preview
