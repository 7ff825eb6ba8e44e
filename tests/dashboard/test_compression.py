"""HTML pages arrive gzip-compressed (issue #45 item 8), with the BREACH defences of
tasks/web/compression.py: the CSRF token is masked afresh in every response, a page showing a
secret unmasked beside reflected input (the invite link) is sent as it is, and JSON is left
alone."""

from __future__ import annotations

import gzip
import re

import pytest

from tests.accounts.conftest import boss  # noqa: F401 (fixture)
from tests.conftest import ApiClient, page_client

pytestmark = pytest.mark.django_db

GZIP = {"Accept-Encoding": "gzip, deflate, br"}


def _csrf(html: str) -> str:
    return re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html).group(1)


def test_an_html_page_arrives_compressed_with_a_csrf_token_masked_per_response(operator):
    client = page_client(operator)
    pages = []
    for _ in range(2):
        response = client.get("/tasks/", headers=GZIP)
        assert response["Content-Encoding"] == "gzip"
        assert "Accept-Encoding" in response["Vary"]
        html = gzip.decompress(response.content).decode()
        assert "</html>" in html
        assert len(response.content) < len(html.encode()) / 2
        pages.append(html)
    # The same session's secret, masked differently in each response.
    assert _csrf(pages[0]) != _csrf(pages[1])
    plain = client.get("/tasks/")
    assert not plain.has_header("Content-Encoding") and b"</html>" in plain.content


def test_json_and_the_invite_link_are_not_compressed(operator, boss):  # noqa: F811
    api = ApiClient(operator)
    response = api.client.get("/api/v1/tasks", headers=GZIP)
    assert response.status_code == 200 and not response.has_header("Content-Encoding")
    invited = page_client(boss).post(
        "/people/invite/",
        {"role": "viewers", "sign_in": "password", "username": "newbie", "email": "n@x.example"},
        headers=GZIP,
    )
    assert invited.status_code == 200 and not invited.has_header("Content-Encoding")
    assert b'data-testid="invite-link"' in invited.content
