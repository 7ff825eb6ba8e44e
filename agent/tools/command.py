"""`run_command`: a shell command in the task's workspace, in the kernel sandbox of
agent/tools/sandbox/ (namespaces, whole-sandbox limits, everything killed at the end).

Its risk class is `execute`: every call is reviewed unless an explicit allow rule names it
(review/policy.py). Limits come from harness.yaml `sandbox`; network access is off unless the
call asks for it and harness.yaml allows it. A call may add environment variables (`env`) and
run in a folder of the workspace (`cwd`): nothing the command line could not do itself, shown in
the preview and matched by a standing rule like every other argument.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
import shlex
import shutil
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agent.tools.sandbox import (
    PATH,
    WORKSPACE,
    Limits,
    limit_message,
    sandbox_mode,
    sandbox_run,
)
from harness_base.config import harness_config
from tasks.fingerprint import workspace_target
from tasks.paths import SHARED_MOUNT
from tasks.tools.registry import PermanentToolError, ToolContext, ToolError, tool

TOOL_TIMEOUT_S = 60.0
MAX_COMMAND_CHARS = 10_000
MAX_ENV_VARIABLES = 50
MAX_ENV_VALUE_CHARS = 4096
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
# The sandbox sets these (agent.tools.sandbox.sandbox_env).
_SANDBOX_ENV = frozenset({"PATH", "HOME", "LANG", "TMPDIR"})


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
    env: dict[str, str] = Field(
        default_factory=dict,
        max_length=MAX_ENV_VARIABLES,
        description="environment variables to add (not PATH, HOME, LANG or TMPDIR)",
    )
    cwd: str = Field(
        default=".",
        max_length=1000,
        description="the working directory, a folder relative to the workspace",
    )

    @field_validator("env")
    @classmethod
    def _env(cls, env: dict[str, str]) -> dict[str, str]:
        for name, value in env.items():
            if not _ENV_NAME.fullmatch(name):
                raise ValueError(f"{name[:100]!r} is not a variable name ([A-Za-z_][A-Za-z0-9_]*)")
            if name in _SANDBOX_ENV:
                raise ValueError(f"{name} is set by the sandbox")
            if len(value) > MAX_ENV_VALUE_CHARS or "\0" in value:
                raise ValueError(
                    f"the value of {name} is over {MAX_ENV_VALUE_CHARS} chars or has a NUL"
                )
        return env

    @field_validator("cwd")
    @classmethod
    def _cwd(cls, cwd: str) -> str:
        if (
            "\0" in cwd
            or cwd.startswith("/")
            or posixpath.normpath(cwd) != cwd
            or ".." in cwd.split("/")
        ):
            raise ValueError("must be a folder relative to the workspace, in normal form (no ..)")
        return cwd


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
    cwd = WORKSPACE if args.cwd == "." else f"{WORKSPACE}/{args.cwd}"
    env = "".join(f"env: {name}={shlex.quote(value)}\n" for name, value in args.env.items())
    return (
        f"$ {args.command}\n"
        f"cwd: {cwd} (in the task workspace, read-write; system directories read-only)\n"
        f"{env}"
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
        # Only when given, so a fingerprint recorded before they existed still compares equal.
        **({"env": args.env} if args.env else {}),
        **({"cwd": args.cwd} if args.cwd != "." else {}),
        **_program(args.command),
    }
    targets = [command, workspace_target(ctx)]
    if ctx.shared is not None:
        targets.append(workspace_target(ctx, shared=True))
    return targets


def _effects_outside(arguments: dict[str, Any]) -> str:
    """A sandboxed command without network changes only its workspace, which the snapshot
    restores (and a group's shared directory, which a group rollback restores): a rollback
    need not list it as irreversible."""
    if arguments.get("network"):
        return "it ran with network access"
    if sandbox_mode() != "bwrap":
        return "it ran unsandboxed (HARNESS_SANDBOX=off) and could change anything its user can"
    return ""


@tool(
    risk="execute",
    side_effect=True,
    idempotent=False,
    timeout_s=TOOL_TIMEOUT_S,
    preview=_preview,
    fingerprint=_fingerprint,
    effects_outside=_effects_outside,
)
def run_command(ctx: ToolContext, args: RunCommandArgs) -> dict:
    """Run a shell command (/bin/sh -c) in the workspace, isolated in a sandbox: the
    workspace is the working directory at /workspace, no network unless asked for and allowed,
    limits on time, memory, processes and the workspace's disk quota; a multi-agent group's
    shared directory, if it has one, is at /shared. Returns exit_code, stdout, stderr
    (each truncated at 64 KiB), duration_ms and limits_hit; a non-zero exit code is a normal
    result. The environment is minimal: PATH, HOME=/tmp, LANG, TMPDIR=/tmp, plus `env`; `cwd`
    is a folder of the workspace (default: the workspace itself)."""
    if args.network and not harness_config().sandbox.allow_network:
        raise PermanentToolError(
            "network access was requested but this harness does not allow it "
            "(harness.yaml sandbox.allow_network is off); run the command without network"
        )
    if args.cwd != "." and not (ctx.workspace / args.cwd).is_dir():
        raise PermanentToolError(f"cwd {args.cwd!r} is not a folder of the workspace")
    timeout_s = _timeout(ctx, args)
    limits = command_limits(timeout_s)
    result = sandbox_run(
        argv=["/bin/sh", "-c", args.command],
        workspace=ctx.workspace,
        limits=limits,
        stop=ctx.stop,
        env=args.env or None,
        cwd=args.cwd,
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
