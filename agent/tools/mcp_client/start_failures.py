"""Why a stdio MCP server did not start: its exit code and last stderr lines, and for a command
that cannot start (a configuration to fix, not a server that is down) what to change."""

from __future__ import annotations

from pathlib import Path

from agent.tools.mcp_client.errors import McpUnavailable
from agent.tools.mcp_client.launch import EXIT_WAIT_S, Started

# Why a command that exited before its session was up cannot start (a configuration to fix,
# not a server that is down): stderr patterns -> what it means and how to fix it. The first
# that matches wins.
_CANNOT_START: tuple[tuple[tuple[str, ...], str], ...] = (
    (
        (
            "ENOTCACHED",
            "EAI_AGAIN",
            "ENOTFOUND",
            "getaddrinfo",
            "npm error network",
            "npm ERR! network",
        ),
        "it needs the network to fetch a package (`npx -y` downloads it) and the sandbox has "
        "none: install the package beforehand (`npm install --prefix DIR PACKAGE`), add DIR "
        "to the server's ro_paths and run `node DIR/node_modules/PACKAGE/<its entry point>`",
    ),
    (
        ("Cannot find module", "ERR_MODULE_NOT_FOUND", "MODULE_NOT_FOUND"),
        "a Node module it loads is not there: check the script's path, install the package "
        "(`npm install --prefix DIR PACKAGE`) and add DIR to the server's ro_paths",
    ),
    (
        ("ModuleNotFoundError", "No module named"),
        "a Python module it imports is not there: install it in the server's virtualenv (the "
        "venv and its base interpreter are mounted when the command lives in it) or add its "
        "directory to ro_paths",
    ),
    (
        ("error while loading shared libraries",),
        "a shared library it needs is not inside the sandbox: add its directory to ro_paths",
    ),
    (
        ("Exec format error", "cannot execute binary file"),
        "the file is not a program this machine can run (exec format error)",
    ),
)


# Package runners that download what they run.
_FETCHERS = ("npx", "pnpx", "bunx", "uvx", "pipx")


def _interpreter_of(command: str) -> str | None:
    """The interpreter a script's `#!` line names, if the command is a script."""
    try:
        with open(command, "rb") as script:
            first = script.readline(300)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    parts = first[2:].decode("utf-8", errors="replace").split()
    return parts[0] if parts else None


def _not_found_hint(argv: list[str]) -> str:
    command = argv[0] if argv else ""
    if "/" not in command:
        return (
            f"{command!r} is not on the sandbox's PATH (/usr/bin, /bin): give its absolute "
            "path and add its directory to ro_paths"
        )
    if not Path(command).exists():
        return f"{command} does not exist on this machine"
    interpreter = _interpreter_of(command)
    if interpreter is not None:
        return (
            f"it exists, but its interpreter {interpreter} (its #! line) is not inside the "
            "sandbox: add that interpreter's installation to ro_paths (a virtualenv's base "
            "interpreter is mounted automatically when the command lives in the venv)"
        )
    return (
        "it exists, but it or the interpreter or loader it needs is not inside the sandbox: "
        "add their directories to ro_paths"
    )


def _cannot_start(started: Started, lines: list[str]) -> str | None:
    """Why a stdio server that exited before its session was up cannot start, with how to fix
    it; None when nothing says it is more than a crash (which a retry may get past)."""
    fetcher = Path(started.argv[0]).name in _FETCHERS if started.argv else False
    if started.exit_code is None:
        # Still running at the timeout: a package runner without network waits on it.
        return _CANNOT_START[0][1] if fetcher and not started.network else None
    text = "\n".join(lines)
    for patterns, meaning in _CANNOT_START:
        if any(p in text for p in patterns):
            return meaning
    if started.exit_code == 127 or "not found" in text:
        return f"the command was not found inside the sandbox: {_not_found_hint(started.argv)}"
    if started.exit_code == 126:
        return "the command cannot be executed (permission denied or not a program)"
    return None


def start_failure(server: str, started: Started | None, reason: str) -> McpUnavailable:
    """The error of a server that did not start: its last stderr lines, and permanent when
    the command cannot start (a retry would fail the same way) with how to fix it."""
    if started is None or started.process is None:
        return McpUnavailable(reason, transient=True)
    lines = started.stderr.lines(wait_s=EXIT_WAIT_S if started.exit_code is not None else 0)
    cause = _cannot_start(started, lines)
    if started.exit_code is not None:
        reason += f" (it exited with code {started.exit_code} before the session was up)"
    if cause is not None:
        reason += f"; it cannot start: {cause}"
    if lines:
        reason += "\nits last stderr lines:\n" + "\n".join(f"  {line}" for line in lines)
    return McpUnavailable(reason, transient=cause is None)
