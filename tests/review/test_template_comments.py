"""No template prints its own comment: Django's `{# #}` comment is one line only (a `{#` whose
`#}` is on a later line is sent as text), so a longer note is a `{% comment %}` block."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.conf import settings
from django.template.utils import get_app_template_dirs

from tests.conftest import page_client
from tests.factories import TaskFactory

pytestmark = pytest.mark.django_db(transaction=True)

UNCLOSED = re.compile(r"\{#(?!.*?#\})")


def test_no_template_opens_a_comment_it_does_not_close_on_the_same_line():
    dirs = [Path(d) for t in settings.TEMPLATES for d in t.get("DIRS", [])]
    dirs += [Path(d) for d in get_app_template_dirs("templates")]
    templates = [p for d in dirs for p in d.rglob("*.html")]
    assert len(templates) > 50
    unclosed = [
        f"{p}:{n}"
        for p in templates
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if UNCLOSED.search(line)
    ]
    assert unclosed == []


def test_pages_show_no_template_comment(paused_review, operator):
    review = paused_review(title="comment check")
    task = TaskFactory(status="succeeded", created_by=operator)
    client = page_client(operator)
    for url in (
        "/reviews/",
        "/reviews/?status=all",
        f"/reviews/{review.id}/",
        "/",
        "/tasks/",
        f"/tasks/{task.id}/",
        "/preferences/",
    ):
        response = client.get(url)
        assert response.status_code == 200, url
        assert "{#" not in response.content.decode(), url
