"""The file browser serves only what a checkpoint's manifest holds, to those who may read the
task: a path parameter is a key looked up in the manifest, never joined to a folder (`..`,
absolute paths, NUL, `./` spellings and paths the manifest lacks get nothing); a checkpoint of
another task is unknown here; a download is an attachment with a safe name that a browser
never sniffs or renders; names and contents are escaped on the pages."""

from __future__ import annotations

import pytest
from django.conf import settings

from tests.conftest import ApiClient, page_client
from tests.factories import run_in_process, scripted_task

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "harness-secret-outside-the-workspace"
HOSTILE_NAME = "<img src=x onerror=alert(1)>.txt"
SCRIPT = "<script>alert(document.cookie)</script>"
# Made by a command, so the names are whatever a model asks for.
COMMAND = (
    f"printf 'ok\\n' > notes.txt && printf '{SCRIPT}' > 'evil\";.html' && "
    f"printf 'x' > '{HOSTILE_NAME}'"
)
PAGES = ("/files/view/", "/files/download/")
APIS = ("/files/content", "/files/raw")


@pytest.fixture
def workspace_task(operator, commands_allowed):
    # A file beside the workspace: what `..` would reach if a path were ever joined.
    root = settings.HARNESS_WORKSPACE_ROOT
    root.mkdir(parents=True, exist_ok=True)
    (root / "secret.txt").write_text(SECRET)
    task = scripted_task(
        [{"call": "run_command", "args": {"command": COMMAND}}, {"final": "done"}],
        ["run_command"],
        user=operator,
    )
    assert run_in_process(task) == "succeeded"
    (task.workspace_path / "later.txt").write_text(SECRET)  # on disk, in no checkpoint
    return task


def _hostile_paths(task) -> list[str]:
    return [
        "../secret.txt",
        f"../{task.id}/notes.txt",
        "./notes.txt",
        "notes.txt/",
        "/etc/passwd",
        str(settings.HARNESS_WORKSPACE_ROOT / "secret.txt"),
        "later.txt",
        "nope.txt",
        "",
    ]


def test_only_manifest_paths_are_served(workspace_task, viewer):
    task = workspace_task
    client, api = page_client(viewer), ApiClient(viewer)
    for path in _hostile_paths(task):
        for suffix in PAGES:
            response = client.get(f"/tasks/{task.id}{suffix}", {"path": path})
            assert response.status_code in (404, 422), (suffix, path, response.status_code)
            assert SECRET.encode() not in response.content
        for suffix in APIS:
            response = api.get(f"/api/v1/tasks/{task.id}{suffix}", {"path": path})
            assert response.status_code in (404, 422), (suffix, path, response.status_code)
            assert SECRET.encode() not in response.content
    # NUL never reaches a lookup (the input guard refuses it, naming the field).
    for url in (f"/tasks/{task.id}/files/view/", f"/api/v1/tasks/{task.id}/files/content"):
        response = client.get(url, {"path": "notes.txt\x00.png"})
        assert 400 <= response.status_code < 500 and b"path" in response.content
    # The real file is served.
    assert client.get(f"/tasks/{task.id}/files/download/", {"path": "notes.txt"}).content == (
        b"ok\n"
    )


def test_a_checkpoint_of_another_task_is_not_found_here(workspace_task, viewer, operator):
    other = scripted_task([{"final": "done"}], [], user=operator)
    assert run_in_process(other) == "succeeded"
    foreign = other.head_checkpoint_id
    client, api = page_client(viewer), ApiClient(viewer)
    task = workspace_task
    for suffix in PAGES:
        response = client.get(
            f"/tasks/{task.id}{suffix}", {"path": "notes.txt", "checkpoint": str(foreign)}
        )
        assert response.status_code == 404
    assert (
        client.get(f"/tasks/{task.id}/files/archive/", {"checkpoint": str(foreign)}).status_code
        == 404
    )
    response = client.get(f"/tasks/{task.id}/files/diff/", {"path": "notes.txt", "a": str(foreign)})
    assert response.status_code == 404
    assert (
        client.get(f"/tasks/{task.id}/", {"tab": "files", "checkpoint": str(foreign)}).status_code
        == 404
    )
    # Each with the parameters it declares (another is a 422 naming it, before any lookup).
    for suffix, query in (
        ("/files", {}),
        *((api_path, {"path": "notes.txt"}) for api_path in APIS),
    ):
        response = api.get(
            f"/api/v1/tasks/{task.id}{suffix}", {**query, "checkpoint_id": str(foreign)}
        )
        assert response.status_code == 404


def test_downloads_are_attachments_never_sniffed_and_pages_escape_names(workspace_task, viewer):
    task = workspace_task
    client, api = page_client(viewer), ApiClient(viewer)
    for response in (
        client.get(f"/tasks/{task.id}/files/download/", {"path": 'evil";.html'}),
        api.get(f"/api/v1/tasks/{task.id}/files/raw", {"path": 'evil";.html'}),
    ):
        assert response.status_code == 200
        assert response.content == SCRIPT.encode()
        assert response["Content-Type"] == "application/octet-stream"
        assert response["X-Content-Type-Options"] == "nosniff"
        assert response["Content-Disposition"] == 'attachment; filename="evil_.html"'
        assert "sandbox" in response["Content-Security-Policy"]
    archive = client.get(f"/tasks/{task.id}/files/archive/", {"format": "zip"})
    assert archive["Content-Disposition"].startswith('attachment; filename="task-')
    assert archive["X-Content-Type-Options"] == "nosniff"

    page = client.get(f"/tasks/{task.id}/files/view/", {"path": 'evil";.html'}).content.decode()
    assert SCRIPT not in page and "&lt;script&gt;alert(document.cookie)&lt;/script&gt;" in page
    tab = client.get(f"/tasks/{task.id}/", {"tab": "files"}).content.decode()
    assert "<img src=x" not in tab and "&lt;img src=x onerror=alert(1)&gt;.txt" in tab


def test_who_may_not_read_the_task_gets_nothing(workspace_task, outsider):
    task = workspace_task
    urls = [
        f"/tasks/{task.id}/files/view/?path=notes.txt",
        f"/tasks/{task.id}/files/download/?path=notes.txt",
        f"/tasks/{task.id}/files/archive/?format=zip",
        f"/tasks/{task.id}/?tab=files",
    ]
    for url in urls:
        assert page_client(outsider).get(url).status_code == 403, url
        anonymous = page_client(None).get(url)
        assert anonymous.status_code == 302 and "/accounts/login/" in anonymous["Location"]
    for suffix in ("/files", "/files/content?path=notes.txt", "/files/raw?path=notes.txt"):
        assert ApiClient(outsider).get(f"/api/v1/tasks/{task.id}{suffix}").status_code == 403
        assert ApiClient(None).get(f"/api/v1/tasks/{task.id}{suffix}").status_code == 401
