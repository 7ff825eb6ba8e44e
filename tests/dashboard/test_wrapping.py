"""Issue #45 item 8: the inbox's target column wraps a path between its parts, never inside
`service.conf`; a long time-zone name is cut short in the nav, not pushing it apart."""

from __future__ import annotations

import re

import pytest
from django.conf import settings

from harness_site.filters import path_breaks
from tests.conftest import page_client

CSS = (settings.BASE_DIR / "static" / "harness.css").read_text()


def test_a_path_breaks_only_after_its_slashes_and_stays_escaped():
    assert path_breaks("etc/nginx/service.conf") == "etc/<wbr>nginx/<wbr>service.conf"
    assert path_breaks("<b>/x") == "&lt;b&gt;/<wbr>x"
    target = re.search(r"td\.target \{([^}]*)\}", CSS).group(1)
    assert "anywhere" not in target and "break-word" in target


def test_the_nav_cuts_a_long_zone_name_short():
    rule = re.search(r"\.topbar \[data-time-zone-label\] \{([^}]*)\}", CSS).group(1)
    assert "text-overflow:ellipsis" in rule and "max-width" in rule


@pytest.mark.django_db(transaction=True)
def test_the_inbox_target_has_break_opportunities_after_slashes(paused_review, operator):
    paused_review(
        script=[
            {"call": "delete_file", "args": {"path": "etc/nginx/service.conf"}},
            {"final": "done"},
        ],
        files={"etc/nginx/service.conf": "x\n"},
    )
    page = page_client(operator).get("/reviews/").content.decode()
    assert "<code>etc/<wbr>nginx/<wbr>service.conf</code>" in page


def test_compare_checkpoints_sits_on_its_own_line_under_the_recovery_form():
    rule = re.search(r"\.recover-bar \.compare-link \{([^}]*)\}", CSS).group(1)
    assert "flex-basis:100%" in rule and re.search(r"\.recover-bar \{[^}]*flex-wrap:wrap", CSS)
