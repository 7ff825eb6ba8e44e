"""The sandbox's cost per `run_command`.

Each measured run calls the real tool (`agent.tools.command.run_command` through the registry,
as the loop does: harness.yaml limits, a cgroup made and removed, bubblewrap with new user,
PID, network, IPC, UTS and cgroup namespaces, the workspace bind, output capture, the final
kill of the sandbox and the workspace-growth check) with the command `true` in a small
workspace (20 files). The reference is a plain `subprocess.run(["/bin/sh", "-c", "true"])` with
the same working directory and captured output, interleaved with it. The added latency is the
difference of the medians.

Target (issue 11): median added latency <= 20 ms.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from bench.common import figure, profile_top, sample_interleaved, stats

TITLE = "Command sandbox"
SIZES = {"smoke": {"n": 5}, "full": {"n": 200}}
ADDED_TARGET_MS = 20


def run(size: str) -> dict[str, Any]:
    from tasks.tools import ToolContext, registry

    n = SIZES[size]["n"]
    root = Path(tempfile.mkdtemp(prefix="bench-sandbox-"))
    try:
        for i in range(20):
            (root / f"file{i}.txt").write_text("x" * 1000)
        spec = registry.get("run_command")
        args = spec.args_model.model_validate({"command": "true"})
        ctx = ToolContext(task_id="bench", call_id="bench", workspace=root, timeout_s=30)

        def sandboxed() -> None:
            result = spec.func(ctx, args)
            assert result["exit_code"] == 0, result

        def plain() -> None:
            subprocess.run(
                ["/bin/sh", "-c", "true"],
                cwd=root,
                env={"PATH": "/usr/bin:/bin"},
                capture_output=True,
                check=True,
            )

        samples = sample_interleaved({"sandboxed": sandboxed, "plain": plain}, n=n, warmup=3)
        ours, reference = (
            stats(samples["sandboxed"], scale=1000),
            stats(samples["plain"], scale=1000),
        )
        added = ours["median"] - reference["median"]
        profile = profile_top(sandboxed, repeat=3)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return {
        "title": TITLE,
        "figures": [
            figure(
                figure="run_command `true`, sandboxed",
                unit="ms",
                ours=ours,
                reference=reference,
                reference_label="plain subprocess",
                target=f"added <= {ADDED_TARGET_MS} ms",
                met=added <= ADDED_TARGET_MS,
                note=f"added latency (difference of medians): {added:.1f} ms",
            ),
        ],
        "profiles": {"run_command": profile},
        "notes": (
            "The real `run_command` tool (cgroup, bubblewrap namespaces, workspace bind, "
            "capture, kill, quota check) running `true` in a 20-file workspace, interleaved "
            "with a plain `subprocess.run` of `/bin/sh -c true`."
        ),
        "details": {"added_ms": added, "n": n},
    }
