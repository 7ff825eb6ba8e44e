"""A multi-agent group's shared directory is hostile territory like a workspace: any agent of
the group (or a command it ran) may plant links there, and no `/shared/...` path reaches
anything outside it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from agent.tools.quota import DiskQuotaExceeded
from checkpoints.snapshots import snapshot_capture, snapshot_restore
from tasks.tools import ToolError
from tasks.tools.registry import ToolContext

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def shared(tmp_path: Path) -> Path:
    path = tmp_path / "ws" / "shared" / "root-1"
    path.mkdir(parents=True)
    return path


@pytest.fixture
def child(ctx: ToolContext, shared: Path) -> ToolContext:
    """A child of the group: its own workspace, the group's shared directory."""
    return dataclasses.replace(ctx, shared=shared)


@pytest.mark.parametrize(
    "path",
    ["/shared/../outside/secret.txt", "/shared/a/../../x.txt", "/shared//etc/passwd", "/shared/."],
)
def test_a_shared_path_cannot_climb_out_of_the_shared_directory(call, child, outside, path):
    for tool, arguments in [
        ("read_file", {}),
        ("write_file", {"content": "escaped\n"}),
        ("append_file", {"content": "escaped\n"}),
        ("delete_file", {}),
    ]:
        with pytest.raises(ToolError):
            call(tool, {"path": path, **arguments}, context=child)
    assert (outside / "secret.txt").read_text() == "outside secret\n"
    assert not (outside.parent / "x.txt").exists()


def test_symlinks_a_command_plants_in_the_shared_directory_are_not_followed(
    call, child, shared, outside
):
    # A sandboxed command of one child plants links, the way any agent of the group could.
    done = call(
        "run_command",
        {
            "command": f"ln -s {outside} /shared/out && ln -s {outside}/secret.txt /shared/s.txt"
            " && echo planted > /shared/planted.txt"
        },
        context=child,
    )
    assert done["exit_code"] == 0, done
    assert (shared / "planted.txt").read_text() == "planted\n"

    for path in ("/shared/out/secret.txt", "/shared/s.txt"):
        with pytest.raises(ToolError, match="symlink"):
            call("read_file", {"path": path}, context=child)
    with pytest.raises(ToolError, match="symlink"):
        call("write_file", {"path": "/shared/out/new.txt", "content": "x"}, context=child)
    with pytest.raises(ToolError, match="symlink"):
        call("write_file", {"path": "/shared/s.txt", "content": "overwritten\n"}, context=child)
    with pytest.raises(ToolError, match="symlink"):
        call("append_file", {"path": "/shared/s.txt", "content": "appended\n"}, context=child)
    listed = call("list_files", {"path": "/shared"}, context=child)["files"]
    assert [f["path"] for f in listed] == ["/shared/planted.txt"]
    assert call("search_text", {"pattern": "secret", "path": "/shared"}, context=child) == {
        "matches": [],
        "truncated": False,
    }
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "outside secret\n"


def test_a_command_sees_the_shared_directory_at_slash_shared_and_nothing_beside_it(
    call, child, shared
):
    (shared / "from-parent.txt").write_text("hello\n")
    done = call(
        "run_command",
        {"command": "cat /shared/from-parent.txt; ls /shared/..; ls /shared/../.. | wc -l"},
        context=child,
    )
    assert done["stdout"].splitlines()[0] == "hello"
    # `..` of /shared is the sandbox's own root, not the host directory holding the groups.
    assert "root-1" not in done["stdout"] and "shared" in done["stdout"]


def test_a_task_without_a_shared_directory_is_told_so(call, ctx, workspace):
    with pytest.raises(ToolError, match="no shared directory"):
        call("write_file", {"path": "/shared/x.txt", "content": "x"}, context=ctx)
    assert list(workspace.iterdir()) == []


def test_restoring_the_shared_directory_never_writes_through_a_planted_link(shared, outside):
    (shared / "notes.txt").write_text("at the cut\n")
    cut = snapshot_capture(workspace=shared)
    victim = outside / "secret.txt"
    (shared / "notes.txt").unlink()
    (shared / "notes.txt").symlink_to(victim)

    snapshot_restore(workspace=shared, snapshot=cut)

    assert victim.read_text() == "outside secret\n"
    assert not (shared / "notes.txt").is_symlink()
    assert (shared / "notes.txt").read_text() == "at the cut\n"


def test_filling_the_shared_directory_stops_at_the_quota(call, child, shared, harness_yaml):
    harness_yaml("sandbox: {disk_mb: 50, file_mb: 40}\n")

    with pytest.raises(DiskQuotaExceeded) as excinfo:
        call(
            "run_command",
            {
                "command": "for i in 1 2 3 4 5 6 7 8; do "
                "head -c 40000000 /dev/zero > /shared/f$i & done; wait; sleep 5; echo survived",
                "timeout_s": 20,
            },
            context=child,
        )

    written = sum(p.stat().st_blocks * 512 for p in shared.iterdir())
    assert "took the shared directory to" in str(excinfo.value)
    assert excinfo.value.limits_hit == ["disk"]
    assert written < 8 * 40_000_000
    # Over its quota, the shared directory cannot grow, through a command or a file tool.
    with pytest.raises(DiskQuotaExceeded):
        call("run_command", {"command": "echo more > /shared/more.txt"}, context=child)
    with pytest.raises(DiskQuotaExceeded):
        call("write_file", {"path": "/shared/notes.txt", "content": "x"}, context=child)
