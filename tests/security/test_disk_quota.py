"""`sandbox.disk_mb` is a quota on what the workspace holds, across calls (agent/tools/quota.py):
two commands that each stay under it cannot together pass it, nor can the file tools; a call
past it is told `limits_hit: ["disk"]` and leaves the workspace within it. Real sandboxed
`run_command`s, real files."""

from __future__ import annotations

import pytest

from agent.tools.quota import DiskQuotaExceeded, disk_usage
from tasks.models import ToolCall
from tests.factories import run_in_process, scripted_spec, spec_task

pytestmark = pytest.mark.django_db

QUOTA = 8 * 1024**2
SMALL_QUOTA = "sandbox: {disk_mb: 8, file_mb: 40}\n"


def _files(root) -> dict[str, int]:
    return {p.relative_to(root).as_posix(): p.stat().st_size for p in root.rglob("*")}


def test_two_commands_together_stop_at_the_workspace_quota(call, workspace, harness_yaml):
    harness_yaml(SMALL_QUOTA)

    first = call("run_command", {"command": "head -c 5000000 /dev/zero > a.bin; echo one"})
    second = call("run_command", {"command": "head -c 5000000 /dev/zero > b.bin; echo two"})

    assert first["limits_hit"] == [] and first["stdout"] == "one\n"
    # Each is under 8 MiB; together they are not: the kernel refused the second's write at
    # what was left of the quota.
    assert second["limits_hit"] == ["disk"]
    assert "disk quota of 8 MiB" in second["stderr"] and "File too large" in second["stderr"]
    assert disk_usage(workspace) <= QUOTA
    assert (workspace / "a.bin").stat().st_size == 5_000_000


def test_a_file_larger_than_what_is_left_is_no_limit_hit_by_itself(call, harness_yaml):
    harness_yaml(SMALL_QUOTA)
    call("run_command", {"command": "head -c 5000000 /dev/zero > a.bin"})

    result = call("run_command", {"command": "echo small > b.txt; cat a.bin > /dev/null"})

    assert result["limits_hit"] == [] and result["stderr"] == ""


def test_parallel_writers_past_the_quota_fail_the_call_and_are_taken_back(
    call, workspace, harness_yaml
):
    harness_yaml(SMALL_QUOTA)
    call("run_command", {"command": "head -c 3000000 /dev/zero > kept.bin"})

    with pytest.raises(DiskQuotaExceeded) as excinfo:
        call(
            "run_command",
            {
                "command": "echo more >> kept.bin; mkdir -p out/deep; ln -s /etc/passwd link; "
                "for i in 1 2 3 4 5 6 7 8; do head -c 4000000 /dev/zero > out/deep/f$i & done; "
                "wait; sleep 5; echo survived",
                "timeout_s": 20,
            },
        )

    message = str(excinfo.value)
    assert message.startswith('disk quota exceeded (limits_hit: ["disk"])')
    assert "past its quota of 8.0 MiB" in message and "taken back" in message
    assert excinfo.value.limits_hit == ["disk"]
    # Everything it added is gone, and what was there before is as it was.
    assert _files(workspace) == {"kept.bin": 3_000_000}
    assert disk_usage(workspace) <= QUOTA


def test_the_file_tools_keep_to_the_quota_the_commands_used(call, workspace, harness_yaml):
    harness_yaml(SMALL_QUOTA)
    call("run_command", {"command": "head -c 7000000 /dev/zero > big.bin"})

    with pytest.raises(DiskQuotaExceeded, match="nothing was written"):
        call("write_file", {"path": "notes.txt", "content": "x" * 2_000_000})
    with pytest.raises(DiskQuotaExceeded, match=r'limits_hit: \["disk"\]'):
        call("append_file", {"path": "big.bin", "content": "y" * 2_000_000})
    # Replacing a file counts what it frees: shrinking big.bin is allowed.
    call("write_file", {"path": "big.bin", "content": "small"})
    call("write_file", {"path": "notes.txt", "content": "x" * 2_000_000})

    assert _files(workspace) == {"big.bin": 5, "notes.txt": 2_000_000}
    assert disk_usage(workspace) <= QUOTA


def test_the_model_is_told_limits_hit_disk_and_the_workspace_stays_within(
    operator, harness_yaml, commands_allowed
):
    harness_yaml(SMALL_QUOTA)
    fill = "for i in 1 2 3 4 5 6 7 8; do head -c 3000000 /dev/zero > f$i & done; wait; sleep 5"
    task = spec_task(
        scripted_spec(
            [
                {"call": "run_command", "args": {"command": "head -c 4000000 /dev/zero > a"}},
                {"call": "run_command", "args": {"command": fill, "timeout_s": 20}},
                {"final": "done"},
            ],
            ["run_command"],
        ),
        user=operator,
    )

    assert run_in_process(task) == "succeeded"
    first, second = ToolCall.objects.filter(task=task).order_by("id")
    assert first.status == "succeeded" and first.result["limits_hit"] == []
    assert second.status == "failed"
    assert second.result["result"] == {"limits_hit": ["disk"]}
    observation = second.result["observation"]
    assert 'limits_hit: ["disk"]' in observation and len(observation) < 1000
    assert _files(task.workspace_path) == {"a": 4_000_000}
    assert disk_usage(task.workspace_path) <= QUOTA
