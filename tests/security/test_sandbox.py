"""Attacks from a command on the machine it runs on: each must be refused or contained by the
sandbox (agent/tools/sandbox/), with real processes, PostgreSQL and Redis."""

from __future__ import annotations

import socket
import sys
import threading
from pathlib import Path

import pytest
from django.conf import settings

from agent.tools.quota import DiskQuotaExceeded
from agent.tools.sandbox import SandboxUnavailable
from tasks.tools import ToolError
from tests.conftest import processes_running, unique_sleep

pytestmark = pytest.mark.django_db


def test_worker_secrets_are_not_readable_through_proc(call, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-leak-me")
    monkeypatch.setenv("HARNESS_ADMIN_PASSWORD", "admin-leak-me")

    result = call(
        "run_command",
        {
            "command": "tr '\\0' '\\n' </proc/$PPID/environ; cat /proc/*/environ; env; "
            "ls /proc | grep -c '^[0-9]'"
        },
    )

    output = result["stdout"] + result["stderr"]
    assert "leak-me" not in output
    assert str(settings.BASE_DIR) not in output
    # Only the sandbox's own processes exist in its PID namespace.
    assert int(result["stdout"].splitlines()[-1]) <= 5


def test_no_process_in_the_sandbox_shows_a_host_path(call, workspace):
    # PID 1 was bwrap's reaper: its command line held every mount's host path.
    result = call(
        "run_command",
        {
            "command": "sleep 5 & for p in /proc/[0-9]* /proc/self; do "
            'echo "== $p"; tr "\\0" " " < $p/cmdline; echo; tr "\\0" " " < $p/environ; echo; '
            "readlink $p/exe $p/cwd; cat $p/maps; done"
        },
    )

    output = result["stdout"]
    assert "== /proc/1\n" in output and "== /proc/self\n" in output
    venv = Path(sys.prefix)
    for host_path in (workspace, workspace.parent, venv, venv.resolve(), settings.BASE_DIR):
        assert str(host_path) not in output
    assert "bwrap" not in output and "--bind" not in output
    assert result["stderr"] == ""


def test_the_harness_and_other_workspaces_are_not_visible(call, outside):
    data = Path(settings.DATA_DIR)
    result = call(
        "run_command",
        {
            "command": f"ls -a ../.. ..; cat ../outside/secret.txt {outside}/secret.txt; "
            f"ls {data} {settings.BASE_DIR} {settings.HARNESS_WORKSPACE_ROOT}; "
            "find / -name 'secret.txt' -o -name '*.sqlite3' -o -name '*.sock' 2>/dev/null; "
            "ls /home /root /run /var /sys /etc/shadow"
        },
    )

    output = result["stdout"] + result["stderr"]
    assert "outside secret" not in output
    assert "secret.txt\n" not in result["stdout"]
    assert "manage.py" not in output and "harness.sqlite3" not in output
    assert ".sock" not in result["stdout"]
    assert "No such file or directory" in result["stderr"]


def test_system_directories_are_read_only_and_the_uid_is_unprivileged(call):
    result = call(
        "run_command",
        {"command": "id -u; id -g; touch /usr/pwned; echo x > /etc/passwd; ls -ld /workspace"},
    )

    lines = result["stdout"].splitlines()
    assert lines[:2] == ["65534", "65534"]
    assert "Read-only file system" in result["stderr"]
    assert not Path("/usr/pwned").exists()


@pytest.fixture
def web_port() -> int:
    """A listening TCP service on loopback, like the harness's web port."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    accepted: list[socket.socket] = []
    threading.Thread(target=lambda: accepted.append(server.accept()[0]), daemon=True).start()
    yield port
    server.close()
    assert accepted == []


def test_loopback_services_are_unreachable(call, web_port):
    database = settings.DATABASES["default"]
    probe = (
        "import socket,sys\n"
        "for port in sys.argv[1:]:\n"
        "    try:\n"
        "        socket.create_connection(('127.0.0.1', int(port)), timeout=2)\n"
        "        print(port, 'open')\n"
        "    except OSError as exc:\n"
        "        print(port, type(exc).__name__)\n"
    )
    result = call(
        "run_command",
        {
            "command": f'python3 -c "{probe}" {database.get("PORT") or 5432} 6379 {web_port}; '
            "python3 -c \"import socket; socket.getaddrinfo('example.com', 80)\" 2>&1 | tail -1"
        },
    )

    lines = result["stdout"].splitlines()
    assert all(not line.endswith(" open") for line in lines[:3]), lines
    assert len(lines) == 4
    assert "gaierror" in lines[3]


def test_network_is_refused_unless_policy_allows_it(call, harness_yaml):
    harness_yaml("sandbox: {allow_network: false}\n")

    with pytest.raises(ToolError, match="sandbox.allow_network is off"):
        call("run_command", {"command": "true", "network": True})


@pytest.mark.parametrize(
    "launch",
    [
        "setsid {sleep} &",
        "( setsid sh -c '{sleep} & ' & )",
        "nohup {sleep} >/dev/null 2>&1 &",
        "python3 -c \"import os,time; os.fork() or (os.setsid(), os.fork() or os.execvp('sh', "
        "['sh', '-c', '{sleep}']))\"",
    ],
)
def test_detached_processes_do_not_outlive_the_command(call, launch):
    sleep = unique_sleep()

    result = call("run_command", {"command": launch.format(sleep=sleep) + "\necho started"})

    assert result["stdout"].endswith("started\n")
    assert processes_running(sleep) == []


def test_detached_processes_do_not_outlive_a_timeout(call):
    sleep = unique_sleep()

    with pytest.raises(ToolError, match="timed out"):
        call("run_command", {"command": f"setsid {sleep} & {sleep}", "timeout_s": 1})

    assert processes_running(sleep) == []


# Forks until a fork is refused, then says so: the command ends as soon as the sandbox is full,
# without a fork of its own to win (bash retries a refused fork for up to 30 s).
FORK_UNTIL_REFUSED = """import os, time
while True:
    try:
        pid = os.fork()
    except BlockingIOError:
        break
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    time.sleep(0.01)
print("fork refused")"""


def test_a_fork_bomb_hits_the_whole_sandbox_process_limit(call):
    # The bomb runs detached; the shell becomes a process outside it that is refused too.
    command = f"(bash -c 'b(){{ b | b & }}; b' &); exec python3 -c '{FORK_UNTIL_REFUSED}'"
    result = call("run_command", {"command": command, "timeout_s": 10})

    assert result["stdout"] == "fork refused\n"
    assert "processes" in result["limits_hit"]
    assert "limit of 256 processes" in result["stderr"]
    assert processes_running("b | b") == []


def test_memory_is_limited_across_processes(call):
    # Three 600 MiB processes at once: each is under 1 GiB, together they are not.
    hog = (
        "python3 -c 'import time; b = bytearray(600 * 1024**2); "
        'b[::4096] = b"x" * len(b[::4096]); time.sleep(3)\''
    )
    result = call("run_command", {"command": f"{hog} & {hog} & {hog} & wait", "timeout_s": 20})

    assert result["limits_hit"] == ["memory"]
    assert "memory limit of 1024 MiB" in result["stderr"]


def test_filling_the_disk_stops_at_the_workspace_quota(call, workspace, harness_yaml):
    harness_yaml("sandbox: {disk_mb: 50, file_mb: 40}\n")

    with pytest.raises(DiskQuotaExceeded) as excinfo:
        call(
            "run_command",
            {
                "command": "for i in 1 2 3 4 5 6 7 8; do "
                "head -c 40000000 /dev/zero > f$i & done; wait; sleep 5; echo survived",
                "timeout_s": 20,
            },
        )

    # Eight writers at page-cache speed went past the quota between two walks: the call
    # failed, killed before `survived`, and what it wrote was taken back.
    assert "past its quota of 50.0 MiB" in str(excinfo.value)
    assert list(workspace.iterdir()) == []


def test_it_fails_closed_when_bubblewrap_is_missing(call, settings, workspace):
    settings.HARNESS_BWRAP = "/nonexistent/bwrap"

    with pytest.raises(SandboxUnavailable) as excinfo:
        call("run_command", {"command": "echo ran > ran.txt"})

    assert "bubblewrap" in str(excinfo.value) and "apt-get install bubblewrap" in str(excinfo.value)
    assert not (workspace / "ran.txt").exists()


def test_unsandboxed_mode_is_loud(call, settings, capsys, caplog):
    from harness_site.cli.up_setup import sandbox_report

    settings.HARNESS_SANDBOX = "off"

    sandbox_report()
    result = call("run_command", {"command": "echo ran"})

    assert "WARNING: HARNESS_SANDBOX=off" in capsys.readouterr().err
    assert result["stdout"] == "ran\n"
    assert any("UNSANDBOXED" in record.getMessage() for record in caplog.records)
