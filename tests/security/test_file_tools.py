"""File tools and the rollback restore against links a command (or anyone with the worker's
rights) planted in the workspace: nothing outside it is read or changed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from checkpoints.snapshots import snapshot_capture, snapshot_restore
from tasks.tools import ToolError

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def victim(outside: Path) -> Path:
    path = outside / "victim.txt"
    path.write_text("victim\n")
    return path


def test_a_planted_temporary_file_symlink_does_not_redirect_write_file(call, workspace, victim):
    # The name write_file once used for its temporary file, pointing outside.
    (workspace / ".tmpvictim.txt.harness-tmp").symlink_to(victim)

    call("write_file", {"path": "tmpvictim.txt", "content": "overwritten\n"})

    assert victim.read_text() == "victim\n"
    assert (workspace / "tmpvictim.txt").read_text() == "overwritten\n"


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("read_file", {}),
        ("append_file", {"content": "appended\n"}),
        ("write_file", {"content": "overwritten\n"}),
    ],
)
def test_a_hard_link_to_an_outside_file_is_neither_read_nor_changed(
    call, workspace, victim, tool, arguments
):
    os.link(victim, workspace / "linked.txt")

    with pytest.raises(ToolError, match="hard links"):
        call(tool, {"path": "linked.txt", **arguments})

    assert victim.read_text() == "victim\n"


def test_search_does_not_read_through_a_hard_link(call, workspace, victim):
    os.link(victim, workspace / "linked.txt")

    assert call("search_text", {"pattern": "victim"})["matches"] == []


def test_a_symlinked_folder_is_not_followed_to_create_files(call, workspace, outside):
    (workspace / "out").symlink_to(outside, target_is_directory=True)

    for tool in ("write_file", "append_file"):
        with pytest.raises(ToolError, match="symlink"):
            call(tool, {"path": "out/new.txt", "content": "x"})

    assert not (outside / "new.txt").exists()


def test_rollback_does_not_write_through_links_planted_after_the_checkpoint(
    workspace, outside, victim
):
    (workspace / "notes.txt").write_text("checkpointed\n")
    (workspace / "docs").mkdir()
    (workspace / "docs" / "a.txt").write_text("doc\n")
    snapshot = snapshot_capture(workspace=workspace)
    other = outside / "other.txt"
    other.write_text("other\n")
    # Later, a command replaces the files with links to files outside the workspace.
    (workspace / "notes.txt").unlink()
    os.link(victim, workspace / "notes.txt")
    (workspace / "docs" / "a.txt").unlink()
    (workspace / "docs").rmdir()
    (workspace / "docs").symlink_to(outside, target_is_directory=True)

    snapshot_restore(workspace=workspace, snapshot=snapshot)

    assert victim.read_text() == "victim\n"
    assert other.read_text() == "other\n"
    assert sorted(p.name for p in outside.iterdir()) == ["other.txt", "secret.txt", "victim.txt"]
    assert (workspace / "notes.txt").read_text() == "checkpointed\n"
    assert os.stat(workspace / "notes.txt").st_nlink == 1
    assert not (workspace / "docs").is_symlink()
    assert (workspace / "docs" / "a.txt").read_text() == "doc\n"
