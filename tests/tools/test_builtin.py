from __future__ import annotations

import os
from pathlib import Path

import pytest
from pydantic import ValidationError

from tasks.paths import PathEscapeError
from tasks.tools import PermanentToolError, registry


def tree(root: Path) -> dict[str, bytes | str]:
    """Every entry under `root` with its content (files) or link target (symlinks)."""
    entries: dict[str, bytes | str] = {}
    for path in sorted(root.rglob("*")):
        name = path.relative_to(root).as_posix()
        if path.is_symlink():
            entries[name] = f"-> {os.readlink(path)}"
        elif path.is_file():
            entries[name] = path.read_bytes()
        else:
            entries[name] = "dir"
    return entries


# Each escape names the secret outside the workspace (or a new file beside it) a different way.
ESCAPES = {
    "dotdot": "../outside/secret.txt",
    "absolute": "{outside}/secret.txt",
    "symlink_to_file": "link.txt",
    "symlinked_parent": "linkdir/secret.txt",
    "new_file_under_symlinked_parent": "linkdir/new.txt",
    "dotdot_new_file": "sub/../../outside/new.txt",
}

FILE_TOOLS = {
    "read_file": {},
    "write_file": {"content": "overwritten\n"},
    "append_file": {"content": "appended\n"},
    "delete_file": {},
    "list_files": {},
    "search_text": {"pattern": "secret"},
}


@pytest.fixture
def escape_workspace(workspace: Path, outside: Path) -> Path:
    (workspace / "sub").mkdir()
    (workspace / "inside.txt").write_text("inside\n")
    (workspace / "link.txt").symlink_to(outside / "secret.txt")
    (workspace / "linkdir").symlink_to(outside, target_is_directory=True)
    return workspace


@pytest.mark.parametrize("tool_name", sorted(FILE_TOOLS))
@pytest.mark.parametrize("escape", sorted(ESCAPES))
def test_file_tools_refuse_paths_outside_the_workspace(
    call, ctx, escape_workspace, outside, tool_name, escape
):
    path = ESCAPES[escape].format(outside=outside)
    before_outside, before_inside = tree(outside), tree(escape_workspace)
    spec = registry.get(tool_name)
    args = spec.args_model.model_validate({"path": path, **FILE_TOOLS[tool_name]})

    with pytest.raises(PathEscapeError) as excinfo:
        spec.func(ctx, args)
    if spec.preview is not None:
        with pytest.raises(PathEscapeError):
            spec.preview(ctx, args)

    assert excinfo.value.error_class == "permanent"
    message = str(excinfo.value)
    assert any(
        word in message
        for word in ("absolute", "leaves the workspace", "symlink", "outside the workspace")
    )
    assert tree(outside) == before_outside
    assert tree(escape_workspace) == before_inside


def test_listing_and_search_do_not_follow_symlinks_out(call, escape_workspace):
    listed = call("list_files", {"path": "."})
    found = call("search_text", {"pattern": "secret"})

    assert [f["path"] for f in listed["files"]] == ["inside.txt"]
    assert found["matches"] == []


@pytest.mark.parametrize(
    ("tool_name", "arguments"),
    [
        ("read_file", {}),
        ("read_file", {"path": "a.txt", "max_bytes": 0}),
        ("read_file", {"path": "a.txt", "unexpected": 1}),
        ("write_file", {"path": "a.txt"}),
        ("write_file", {"path": "a.txt", "content": 42}),
        ("append_file", {"content": "x"}),
        ("list_files", {"limit": 0}),
        ("search_text", {"pattern": ""}),
        ("search_text", {"pattern": "x", "max_matches": 10_000}),
        ("delete_file", {"path": ["a.txt"]}),
    ],
)
def test_bad_arguments_are_rejected_by_the_argument_model(tool_name, arguments):
    with pytest.raises(ValidationError):
        registry.get(tool_name).args_model.model_validate(arguments)


def test_write_then_read_returns_the_content(call, workspace):
    written = call("write_file", {"path": "notes/today.md", "content": "héllo\n"})
    read = call("read_file", {"path": "notes/today.md"})

    assert written == {"path": "notes/today.md", "bytes": len("héllo\n".encode())}
    assert read == {"path": "notes/today.md", "content": "héllo\n", "truncated": False}
    assert (workspace / "notes" / "today.md").read_text() == "héllo\n"
    assert not list(workspace.rglob("*.harness-tmp"))


def test_read_file_truncates_at_max_bytes(call, workspace):
    (workspace / "big.txt").write_text("x" * 100)

    read = call("read_file", {"path": "big.txt", "max_bytes": 10})

    assert read["content"] == "x" * 10
    assert read["truncated"] is True


def test_read_of_a_missing_file_is_a_permanent_error(call):
    with pytest.raises(PermanentToolError, match="no such file"):
        call("read_file", {"path": "missing.txt"})


def test_append_creates_then_extends(call, workspace):
    call("append_file", {"path": "log.txt", "content": "one\n"})
    result = call("append_file", {"path": "log.txt", "content": "two\n"})

    assert (workspace / "log.txt").read_text() == "one\ntwo\n"
    assert result == {"path": "log.txt", "size": 8}


def test_delete_removes_the_file_and_is_idempotent(call, workspace):
    (workspace / "gone.txt").write_text("bye")

    first = call("delete_file", {"path": "gone.txt"})
    second = call("delete_file", {"path": "gone.txt"})

    assert first == {"path": "gone.txt", "deleted": True}
    assert second == {"path": "gone.txt", "deleted": False}
    assert not (workspace / "gone.txt").exists()


def test_delete_refuses_a_folder(call, workspace):
    (workspace / "folder").mkdir()

    with pytest.raises(PermanentToolError, match="folder"):
        call("delete_file", {"path": "folder"})
    assert (workspace / "folder").is_dir()


def test_list_files_lists_sizes_recursively_or_not(call, workspace):
    (workspace / "a.txt").write_text("aa")
    (workspace / "sub").mkdir()
    (workspace / "sub" / "b.txt").write_text("bbb")

    everything = call("list_files", {})
    top = call("list_files", {"recursive": False})

    assert everything["files"] == [{"path": "a.txt", "size": 2}, {"path": "sub/b.txt", "size": 3}]
    assert top["files"] == [{"path": "a.txt", "size": 2}]


def test_search_text_reports_path_line_and_text(call, workspace):
    (workspace / "a.py").write_text("import os\n\ndef main():\n    return os.getcwd()\n")
    (workspace / "b.txt").write_text("nothing here\n")

    found = call("search_text", {"pattern": r"os\.\w+"})

    assert found == {
        "matches": [{"path": "a.py", "line": 4, "text": "    return os.getcwd()"}],
        "truncated": False,
    }


def test_search_text_rejects_an_invalid_regular_expression(call):
    with pytest.raises(PermanentToolError, match="invalid regular expression"):
        call("search_text", {"pattern": "("})


def test_write_preview_is_a_diff_against_the_current_file(ctx, workspace):
    (workspace / "app.conf").write_text("debug = false\n")
    spec = registry.get("write_file")

    preview = spec.preview(
        ctx, spec.args_model.model_validate({"path": "app.conf", "content": "debug = true\n"})
    )

    assert "-debug = false" in preview
    assert "+debug = true" in preview
