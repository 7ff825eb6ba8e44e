"""Starting a stdio MCP server inside the task's sandbox: its command line (`{python}`,
`{harness}`), the read-only mounts a command in a Python virtualenv needs, and what a start
leaves behind to explain a failure (Started)."""

from __future__ import annotations

import configparser
import dataclasses
import subprocess
import sys
from pathlib import Path

from django.conf import settings

from agent.tools.command import command_limits
from agent.tools.mcp_client.stderr import StderrTail
from agent.tools.sandbox import SandboxProcess, sandbox_spawn
from harness_base.config import McpServerConfig

# How long a server that failed to start is given to finish exiting (its exit code and last
# stderr lines say why), once its stdout closed.
EXIT_WAIT_S = 2.0


def _expand(value: str) -> str:
    """`{python}`: the worker's own interpreter; `{harness}`: the harness's base directory (so
    a shipped example server is configured without machine-specific paths)."""
    return value.replace("{python}", sys.executable).replace("{harness}", str(settings.BASE_DIR))


# Already in every sandbox (read-only): a venv whose base interpreter is here needs nothing more.
_SYSTEM_PREFIXES = (Path("/usr"), Path("/bin"), Path("/lib"), Path("/lib64"), Path("/sbin"))


def venv_mounts(command: str) -> list[Path]:
    """The read-only mounts a command that lives in a Python virtualenv needs: the venv (its
    `pyvenv.cfg` next to or above the command's directory) and its base interpreter's
    installation (`home =` in pyvenv.cfg, which names the base's bin directory), each at its
    real path and, when a symlink leads there, at the path the venv names. A venv's
    interpreter is a symlink to the base's: without the base the command is "not found"."""
    path = Path(command)
    if not path.is_absolute():
        return []
    candidates = [path.parent] + ([path.parent.parent] if path.parent.name == "bin" else [])
    for venv in candidates:
        cfg = venv / "pyvenv.cfg"
        if cfg.is_file():
            break
    else:
        return []
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string("[venv]\n" + cfg.read_text(errors="replace")[:10_000])
    except (OSError, configparser.Error):
        return []
    home = parser.get("venv", "home", fallback="").strip()
    mounts = [venv, venv.resolve()]
    if home and Path(home).is_absolute():
        stated = Path(home)
        prefix = stated.parent if stated.name == "bin" else stated
        mounts += [prefix, prefix.resolve()]
    return [
        m
        for m in dict.fromkeys(mounts)
        if m.is_dir()
        and m != Path("/")
        and not any(m == s or s in m.parents for s in _SYSTEM_PREFIXES)
    ]


@dataclasses.dataclass
class Started:
    """What a stdio server's start left to explain a failure: its process, its exit code if
    it exited before the session was up, and its stderr."""

    stderr: StderrTail = dataclasses.field(default_factory=StderrTail)
    process: SandboxProcess | None = None
    exit_code: int | None = None
    argv: list[str] = dataclasses.field(default_factory=list)
    network: bool = False


def server_argv(config: McpServerConfig) -> list[str]:
    return [_expand(part) for part in config.command or []]


def server_spawn(
    *, config: McpServerConfig, workspace: Path, stderr: StderrTail | None = None, cwd: str = "."
) -> SandboxProcess:
    """Start a stdio server in a sandbox of its own over the task's workspace (its working
    directory, or `cwd` inside it): its configured environment (plus PATH and the sandbox's
    basics) and nothing else, `ro_paths` read-only, no network unless configured. The limits
    of `run_command` apply for the whole sandbox, without a wall or CPU clock: the server lives
    as long as the run and is killed, with everything it started, when the run ends. A command
    that lives in a Python venv gets the venv and its base interpreter mounted read-only
    (venv_mounts); `{python}` gets the worker's. Its stderr goes to `stderr` (the last lines
    are kept)."""
    argv = server_argv(config)
    ro_paths = [Path(_expand(path)) for path in config.ro_paths]
    if any("{python}" in part for part in config.command or []):
        # The interpreter needs its environment (a virtualenv) and its base installation.
        ro_paths += [Path(sys.prefix), Path(sys.base_prefix)]
    if argv:
        ro_paths += venv_mounts(argv[0])
    limits = dataclasses.replace(command_limits(1), wall_s=None, cpu_s=None)
    process = sandbox_spawn(
        argv=argv,
        workspace=workspace,
        cwd=cwd,
        limits=limits,
        env={
            # Without network npm can only use what is installed: say so at once (npx -y
            # would retry the registry for over a minute before it gives up).
            **({} if config.network else {"npm_config_offline": "true"}),
            **{key: _expand(value) for key, value in config.env.items()},
        },
        network=config.network,
        ro_paths=list(dict.fromkeys(ro_paths)),
        stderr=subprocess.DEVNULL if stderr is None else subprocess.PIPE,
    )
    if stderr is not None:
        stderr.drain(process.stderr)
    return process
