"""`run_command`: a shell command in the task's workspace, in the kernel sandbox of
agent/tools/sandbox/ (namespaces, whole-sandbox limits, everything killed at the end).

Its risk class is `execute`: every call is reviewed unless an explicit allow rule names it
(review/policy.py). Limits come from harness.yaml `sandbox`; network access is off unless the
call asks for it and harness.yaml allows it.
"""

from __future__ import annotations

import hashlib
import shlex
import shutil
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agent.tools.sandbox import PATH, WORKSPACE, Limits, limit_message, sandbox_run
from harness_base.config import harness_config
from tasks.fingerprint import workspace_target
from tasks.paths import SHARED_MOUNT
from tasks.tools.registry import PermanentToolError, ToolContext, ToolError, tool

TOOL_TIMEOUT_S = 60.0
MAX_COMMAND_CHARS = 10_000


class RunCommandArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    command: str = Field(
        min_length=1,
        max_length=MAX_COMMAND_CHARS,
        description="a /bin/sh command line, run in the workspace",
    )
    timeout_s: float | None = Field(
        default=None, gt=0, le=TOOL_TIMEOUT_S, description="wall-clock limit in seconds"
    )
    network: bool = Field(
        default=False,
        description="ask for network access (off by default; only where policy allows it)",
    )


def command_limits(timeout_s: float) -> Limits:
    sandbox = harness_config().sandbox
    return Limits(
        wall_s=timeout_s,
        cpu_s=timeout_s,
        memory_bytes=sandbox.memory_mb * 1024**2,
        processes=sandbox.processes,
        disk_bytes=sandbox.disk_mb * 1024**2,
        file_bytes=sandbox.file_mb * 1024**2,
        tmp_bytes=sandbox.tmp_mb * 1024**2,
    )


def _timeout(ctx: ToolContext, args: RunCommandArgs) -> float:
    if args.timeout_s is None:
        return ctx.timeout_s
    return min(args.timeout_s, ctx.timeout_s)


def _preview(ctx: ToolContext, args: RunCommandArgs) -> str:
    network = "REQUESTED (the sandbox shares the host's network)" if args.network else "none"
    if args.network and not harness_config().sandbox.allow_network:
        network += "; harness.yaml sandbox.allow_network is off, so the call will fail"
    shared = f"shared: {SHARED_MOUNT} (the group's shared directory, read-write)\n"
    return (
        f"$ {args.command}\n"
        f"cwd: {WORKSPACE} (the task workspace, read-write; system directories read-only)\n"
        f"{shared if ctx.shared is not None else ''}"
        f"network: {network}\n"
        f"limits: {command_limits(_timeout(ctx, args)).describe()}\n"
        f"output kept: 64 KiB per stream"
    )


def _program(command: str) -> dict[str, Any]:
    """The program a simple command line starts, as the sandbox's PATH resolves it, with its
    content hash (a name with a slash is a workspace file: the workspace target covers it)."""
    try:
        words = shlex.split(command)
    except ValueError:
        return {"program": None}
    first = words[0] if words else ""
    found = shutil.which(first, path=PATH) if first and "/" not in first else None
    if found is None:
        return {"program": None}
    with open(found, "rb") as fh:
        return {"program": found, "program_sha256": hashlib.file_digest(fh, "sha256").hexdigest()}


def _fingerprint(ctx: ToolContext, args: RunCommandArgs) -> list[dict[str, Any]]:
    """The resolved command and the workspace (and shared directory) it would run in."""
    command = {
        "kind": "command",
        "key": args.command,
        "argv": ["/bin/sh", "-c", args.command],
        "network": args.network,
        **_program(args.command),
    }
    targets = [command, workspace_target(ctx)]
    if ctx.shared is not None:
        targets.append(workspace_target(ctx, shared=True))
    return targets


@tool(
    risk="execute",
    side_effect=True,
    idempotent=False,
    timeout_s=TOOL_TIMEOUT_S,
    preview=_preview,
    fingerprint=_fingerprint,
)
def run_command(ctx: ToolContext, args: RunCommandArgs) -> dict:
    """Run a shell command (/bin/sh -c) in the workspace, isolated in a sandbox: the
    workspace is the working directory at /workspace, no network unless asked for and allowed,
    limits on time, memory, processes and the workspace's disk quota; a multi-agent group's shared
    directory, if it has one, is at /shared. Returns exit_code, stdout, stderr
    (each truncated at 64 KiB), duration_ms and limits_hit; a non-zero exit code is a normal
    result. The environment is minimal: PATH, HOME=/tmp, LANG, TMPDIR=/tmp."""
    if args.network and not harness_config().sandbox.allow_network:
        raise PermanentToolError(
            "network access was requested but this harness does not allow it "
            "(harness.yaml sandbox.allow_network is off); run the command without network"
        )
    timeout_s = _timeout(ctx, args)
    limits = command_limits(timeout_s)
    result = sandbox_run(
        argv=["/bin/sh", "-c", args.command],
        workspace=ctx.workspace,
        limits=limits,
        stop=ctx.stop,
        network=args.network,
        shared=ctx.shared,
        output=ctx.output.write,
    )
    if result.outcome == "canceled":
        raise ToolError("command stopped: task canceled", error_class="canceled")
    if result.quota_error is not None:
        raise result.quota_error
    if result.outcome == "timeout":
        raise ToolError(f"command timed out after {timeout_s:g}s", error_class="timeout")
    stderr = result.stderr
    for name in result.limits_hit:
        stderr += f"\n[sandbox: {limit_message(name, limits)}]"
    return {
        "exit_code": result.exit_code,
        "stdout": result.stdout,
        "stderr": stderr,
        "truncated": result.truncated,
        "duration_ms": result.duration_ms,
        "limits_hit": result.limits_hit,
    }
