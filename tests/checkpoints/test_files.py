"""The workspace at any checkpoint, read from its snapshot: the Files tab's tree, a file's page
(text, binary, too long), its download, the tree as zip and tar.gz (and the bound on it), the
diff of one file, and the same over the API."""

from __future__ import annotations

import io
import tarfile
import zipfile

import pytest

from checkpoints import files
from tests.checkpoints.conftest import checkpoint_after_step
from tests.conftest import ApiClient, page_client
from tests.factories import run_in_process, scripted_task

pytestmark = pytest.mark.django_db(transaction=True)


def _body(response) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


def _tree(page: str) -> str:
    """The Files tab's listing alone: the rest of the task page (the timeline's text, the
    calls' arguments) names the same files."""
    start = page.index('data-testid="files-tree"')
    return page[start : page.index("</table>", start)]


def test_the_files_tab_lists_the_tree_at_the_head_and_at_an_earlier_checkpoint(finished, viewer):
    client = page_client(viewer)
    page = client.get(f"/tasks/{finished.id}/", {"tab": "files"}).content.decode()
    assert "app.conf" in _tree(page) and "new.txt" in _tree(page) and "head" in page
    early = checkpoint_after_step(finished, 1)
    page = client.get(
        f"/tasks/{finished.id}/", {"tab": "files", "checkpoint": str(early.id)}
    ).content.decode()
    assert "app.conf" in _tree(page) and "new.txt" not in _tree(page)


def test_a_file_page_shows_the_content_at_each_checkpoint(finished, viewer):
    client = page_client(viewer)
    url = f"/tasks/{finished.id}/files/view/"
    head = client.get(url, {"path": "app.conf"})
    assert head.status_code == 200
    assert b"version = 3" in head.content
    early = checkpoint_after_step(finished, 1)
    then = client.get(url, {"path": "app.conf", "checkpoint": str(early.id)})
    assert b"version = 1" in then.content and b"version = 3" not in then.content
    # Not there yet at that checkpoint: a page saying so, with a 404.
    missing = client.get(url, {"path": "new.txt", "checkpoint": str(early.id)})
    assert missing.status_code == 404
    assert b"There is no file" in missing.content


def test_the_diff_of_one_file_between_two_checkpoints_and_against_the_head(finished, viewer):
    client = page_client(viewer)
    a, b = checkpoint_after_step(finished, 1), checkpoint_after_step(finished, 3)
    url = f"/tasks/{finished.id}/files/diff/"
    text = client.get(url, {"path": "app.conf", "a": str(a.id), "b": str(b.id)}).content.decode()
    assert "-version = 1" in text and "+version = 2" in text
    text = client.get(url, {"path": "app.conf", "a": str(a.id)}).content.decode()
    assert "-version = 1" in text and "+version = 3" in text and "(head)" in text
    added = client.get(url, {"path": "new.txt", "a": str(a.id)}).content.decode()
    assert "added" in added and "+created after v1" in added
    assert client.get(url, {"path": "app.conf"}).status_code == 422


def test_binary_and_long_files_are_not_shown_whole(operator, viewer, commands_allowed):
    lines = files.VIEW_MAX_BYTES // 5 + 100
    command = f"printf 'a\\000b' > blob.bin && yes line | head -n {lines} > big.txt"
    task = scripted_task(
        [{"call": "run_command", "args": {"command": command}}, {"final": "done"}],
        ["run_command"],
        user=operator,
    )
    assert run_in_process(task) == "succeeded"
    client = page_client(viewer)
    url = f"/tasks/{task.id}/files/view/"
    long = client.get(url, {"path": "big.txt"})
    assert b'data-testid="file-truncated"' in long.content
    assert len(long.content) < files.VIEW_MAX_BYTES + 100_000
    binary = client.get(url, {"path": "blob.bin"})
    assert b'data-testid="file-binary"' in binary.content
    download = client.get(f"/tasks/{task.id}/files/download/", {"path": "blob.bin"})
    assert download.content == b"a\x00b"


def test_the_tree_downloads_as_zip_and_tar_gz_and_is_refused_over_the_bound(
    finished, viewer, settings
):
    client = page_client(viewer)
    url = f"/tasks/{finished.id}/files/archive/"
    response = client.get(url, {"format": "zip"})
    assert response.status_code == 200 and response.streaming
    assert response["Content-Disposition"].startswith("attachment;")
    with zipfile.ZipFile(io.BytesIO(_body(response))) as archive:
        assert archive.read("app.conf") == b"version = 3\n"
        assert archive.read("new.txt") == b"created after v1\n"
    early = checkpoint_after_step(finished, 1)
    response = client.get(url, {"format": "tar.gz", "checkpoint": str(early.id)})
    with tarfile.open(fileobj=io.BytesIO(_body(response)), mode="r:gz") as archive:
        assert archive.getnames() == ["app.conf"]
        assert archive.extractfile("app.conf").read() == b"version = 1\n"
    assert client.get(url, {"format": "rar"}).status_code == 422

    settings.HARNESS_ARCHIVE_MAX_FILES = 1
    refused = client.get(url, {"format": "zip"})
    assert refused.status_code == 422
    assert b"HARNESS_ARCHIVE_MAX_FILES" in refused.content
    tab = client.get(f"/tasks/{finished.id}/", {"tab": "files"}).content.decode()
    assert 'data-testid="archive-refused"' in tab and 'data-testid="archive-zip"' not in tab
    settings.HARNESS_ARCHIVE_MAX_FILES = 100
    settings.HARNESS_ARCHIVE_MAX_BYTES = 10
    assert b"HARNESS_ARCHIVE_MAX_BYTES" in client.get(url, {"format": "zip"}).content


def test_the_api_lists_files_and_returns_content_at_a_checkpoint(finished, viewer):
    api = ApiClient(viewer)
    listing = api.get(f"/api/v1/tasks/{finished.id}/files")
    assert listing.status_code == 200, listing.content
    body = listing.json()
    assert body["checkpoint"]["head"] is True
    assert [f["path"] for f in body["files"]] == ["app.conf", "new.txt"]
    assert body["total_files"] == 2 and body["truncated"] is False
    early = checkpoint_after_step(finished, 1)
    listing = api.get(f"/api/v1/tasks/{finished.id}/files", {"checkpoint_id": str(early.id)})
    assert [f["path"] for f in listing.json()["files"]] == ["app.conf"]

    content = api.get(
        f"/api/v1/tasks/{finished.id}/files/content",
        {"path": "app.conf", "checkpoint_id": str(early.id)},
    ).json()
    assert content["text"] == "version = 1\n"
    assert content["binary"] is False and content["checkpoint"]["seq"] == early.seq
    raw = api.get(f"/api/v1/tasks/{finished.id}/files/raw", {"path": "app.conf"})
    assert raw.content == b"version = 3\n"
    assert raw["Content-Disposition"] == 'attachment; filename="app.conf"'

    missing = api.get(f"/api/v1/tasks/{finished.id}/files/content", {"path": "nope.txt"})
    assert missing.status_code == 404
    bad = api.get(f"/api/v1/tasks/{finished.id}/files", {"checkpoint_id": "not-a-uuid"})
    assert bad.status_code == 422
    assert bad.json()["errors"][0]["field"] == "checkpoint_id"
    no_path = api.get(f"/api/v1/tasks/{finished.id}/files/content")
    assert no_path.status_code == 422 and no_path.json()["errors"][0]["field"] == "path"
