"""The review page links each workspace file the call names to that file at the task's head
checkpoint: what the file holds now, before the call runs."""

from __future__ import annotations

import re
from html import unescape

import pytest

from tests.conftest import page_client

pytestmark = pytest.mark.django_db(transaction=True)


def test_see_the_current_file_opens_the_file_at_the_head(paused_review, viewer):
    review = paused_review(files={"old.log": "stale\n", "keep.txt": "kept\n"})
    client = page_client(viewer)
    page = client.get(f"/reviews/{review.id}/").content.decode()
    links = re.findall(r'<a href="([^"]+)" data-testid="current-file">', page)
    assert links == [f"/tasks/{review.task_id}/files/view/?path=old.log"]
    current = client.get(unescape(links[0]))
    assert current.status_code == 200
    assert b"stale" in current.content and b'<span class="pill">head</span>' in current.content
