"""`collectstatic` beside a site serving the same folder (harness_site.staticfiles): the files it
rewrites are replaced in place, never deleted first. A web process starting while another one
collected (or `harness up` beside a running site, or the test run's own live servers beside a
`harness up` test) listed a file and found it gone."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.staticfiles.management.commands import collectstatic
from django.core.management import call_command

from harness_site.staticfiles import StaticFilesStorage


@pytest.fixture
def static_copy(tmp_path: Path) -> Path:
    """The collected static files as `harness test` left them, linked (not copied) into a
    folder of this test's own: a collect there rewrites its own links only."""
    copy = tmp_path / "static"
    shutil.copytree(settings.STATIC_ROOT, copy, copy_function=os.link)
    return copy


def test_a_collect_over_collected_files_removes_none_of_them(static_copy, monkeypatch):
    before = set(p.relative_to(static_copy) for p in static_copy.rglob("*") if p.is_file())
    removed: list[str] = []
    for name in ("remove", "unlink"):
        real = getattr(os, name)

        def recording(path, *args, real=real, **kwargs):
            removed.append(str(path))
            return real(path, *args, **kwargs)

        monkeypatch.setattr(os, name, recording)
    command = collectstatic.Command()
    command.storage = StaticFilesStorage(location=str(static_copy), base_url=settings.STATIC_URL)
    call_command(command, interactive=False, verbosity=0)
    monkeypatch.undo()

    assert [path for path in removed if path.startswith(str(static_copy))] == []
    after = set(p.relative_to(static_copy) for p in static_copy.rglob("*") if p.is_file())
    assert after >= before
    assert not [p for p in after if p.name.endswith(".partial")]
    # The manifest was written anew, whole, and every file it names is there.
    manifest = json.loads((static_copy / "staticfiles.json").read_text())
    assert manifest["paths"]
    assert all((static_copy / hashed).is_file() for hashed in manifest["paths"].values())


def test_a_web_process_starts_beside_a_collect_that_is_rewriting_the_folder(tmp_path, settings):
    """WhiteNoise lists the folder, then reads each entry: a file written aside and renamed
    in between (`….partial`), or deleted and written again, is gone when it reads it. A dangling
    link is such an entry, every time. The process starts, serves what is there, and never
    serves a file written aside."""
    from django.test import RequestFactory

    from harness_site.staticfiles import WhiteNoiseMiddleware

    root = tmp_path / "static"
    (root / "css").mkdir(parents=True)
    (root / "css" / "site.abc123.css").write_text("body { color: black }")
    (root / "review.abc123.js").write_text("half of the scri")
    (root / "review.abc123.js.4242.partial").write_text("half of the scri")
    (root / "gone.abc123.js").symlink_to(root / "renamed-since")
    settings.STATIC_ROOT = str(root)

    middleware = WhiteNoiseMiddleware(lambda request: None)

    served = set(middleware.files)
    assert f"{settings.STATIC_URL}css/site.abc123.css" in served
    assert f"{settings.STATIC_URL}review.abc123.js" in served
    assert not [url for url in served if url.endswith(".partial") or "gone" in url]
    response = middleware(RequestFactory().get(f"{settings.STATIC_URL}css/site.abc123.css"))
    assert response.status_code == 200
