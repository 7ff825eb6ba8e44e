"""The page's JSON payloads (timeline, figures, group lanes) are embedded in <script> elements
by `json_data`: a tool name, an error message or a model-chosen text must not end the element
or open another one, and what the browser parses back is the value itself."""

from __future__ import annotations

import json
import re

import pytest
from django.template import Context, Template
from django.utils.html import json_script

HOSTILE = [
    "</script><script>alert(1)</script>",
    "<!-- <script>",
    "a & b <b>bold</b> ]]>",
    "\u2028\u2029 line separators",
    "plain",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_json_data_cannot_close_its_script_element(text: str) -> None:
    value = {"tool": text, "rows": [text, {"nested": text}]}
    html = Template('{{ value|json_data:"timeline-data" }}').render(Context({"value": value}))

    body = re.fullmatch(
        r'<script id="timeline-data" type="application/json">(.*)</script>', html, re.S
    )
    assert body, html
    assert "<" not in body.group(1) and ">" not in body.group(1) and "&" not in body.group(1)
    assert json.loads(body.group(1)) == value
    # Byte for byte what Django's own json_script writes.
    assert html == json_script(value, "timeline-data")


def test_json_data_escapes_the_element_id() -> None:
    html = Template("{{ value|json_data:element_id }}").render(
        Context({"value": [1], "element_id": '"><script>x</script>'})
    )
    assert "<script>x" not in html
