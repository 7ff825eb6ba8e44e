"""MCP configuration, names, annotations and argument schemas, without servers."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured
from pydantic import ValidationError

from harness_base.config import load_config
from tasks.agent_state import McpTool
from tasks.tools.mcp import args_model_for, mcp_tool_spec, tool_pattern_matches, tool_policy


def _load(tmp_path, text: str):
    path = tmp_path / "harness.yaml"
    path.write_text(text)
    return load_config(path)


def test_stdio_and_http_servers_are_configured(tmp_path):
    config = _load(
        tmp_path,
        """
mcp_servers:
  tickets:
    command: ["python", "-m", "ticket_server"]
    env: {TICKETS_DB: /data/tickets.db}
    ro_paths: [/opt/ticket_server]
  search:
    url: http://127.0.0.1:8765/mcp
    headers_env: {Authorization: SEARCH_MCP_TOKEN}
""",
    )
    assert config.mcp_servers["tickets"].transport == "stdio"
    assert config.mcp_servers["tickets"].network is False
    assert config.mcp_servers["search"].headers_env == {"Authorization": "SEARCH_MCP_TOKEN"}


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("mcp_servers:\n  a: {command: [x], url: 'http://h/mcp'}\n", r"mcp_servers\.a"),
        ("mcp_servers:\n  a: {}\n", r"mcp_servers\.a"),
        ("mcp_servers:\n  a: {url: 'ftp://h/mcp'}\n", r"mcp_servers\.a\.url"),
        ("mcp_servers:\n  a: {url: 'http://h/mcp', network: true}\n", r"mcp_servers\.a"),
        ("mcp_servers:\n  a: {command: [x], ro_paths: [relative]}\n", r"mcp_servers\.a\.ro_paths"),
        ("mcp_servers:\n  a: {command: [x], comand: [y]}\n", r"mcp_servers\.a\.comand"),
        (
            "mcp_servers:\n  a: {url: 'http://h/mcp', headers_env: {X: 'not a var'}}\n",
            "headers_env",
        ),
        # `<server>__<tool>` must split back unambiguously.
        ("mcp_servers:\n  my__srv: {url: 'http://h/mcp'}\n", r"mcp_servers\.my__srv"),
    ],
)
def test_bad_server_config_is_named(tmp_path, text, key):
    with pytest.raises(ImproperlyConfigured, match=key):
        _load(tmp_path, text)


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        # MCP's defaults: not read-only, destructive, not idempotent, open-world.
        ({}, ("destructive", True, False)),
        ({"readOnlyHint": True}, ("read", False, True)),
        ({"destructiveHint": True, "idempotentHint": True}, ("destructive", True, True)),
        ({"destructiveHint": False}, ("external", True, False)),
        ({"destructiveHint": False, "openWorldHint": False}, ("write", True, False)),
        (
            {"destructiveHint": False, "openWorldHint": False, "idempotentHint": True},
            ("write", True, True),
        ),
        # Hints of the wrong type count as not given.
        ({"readOnlyHint": "yes"}, ("destructive", True, False)),
    ],
)
def test_annotations_set_risk_side_effect_and_idempotency(annotations, expected):
    assert tool_policy(annotations) == expected


def test_arguments_are_checked_against_the_input_schema():
    tool = McpTool(
        server="tickets",
        tool="close",
        input_schema={
            "type": "object",
            "properties": {"id": {"type": "integer", "minimum": 1}},
            "required": ["id"],
            "additionalProperties": False,
        },
    )
    spec = mcp_tool_spec(tool)
    assert spec.name == "tickets__close" and spec.json_schema() == tool.input_schema
    assert spec.args_model.model_validate({"id": 3}).arguments() == {"id": 3}
    with pytest.raises(ValidationError, match="id: 0 is less than the minimum of 1"):
        spec.args_model.model_validate({"id": 0})
    with pytest.raises(ValidationError, match="'id' is a required property"):
        spec.args_model.model_validate({})
    with pytest.raises(ValidationError, match="Additional properties"):
        spec.args_model.model_validate({"id": 1, "force": True})
    # One model per tool: another tool's schema does not leak into this one.
    other = args_model_for(McpTool(server="tickets", tool="list"))
    assert other.model_validate({"anything": 1}).arguments() == {"anything": 1}


def test_server_wildcard_matches_only_that_server():
    assert tool_pattern_matches("tickets__*", "tickets__close")
    assert not tool_pattern_matches("tickets__*", "tickets2__close")
    assert tool_pattern_matches("tickets__close", "tickets__close")


def test_audio_and_binary_resources_are_described_never_passed_as_data():
    from mcp.types import AudioContent, BlobResourceContents, EmbeddedResource

    from tasks.tools.mcp import content_media, content_text

    audio = AudioContent(type="audio", data="UklGRiQAAABXQVZF", mime_type="audio/wav")
    blob = EmbeddedResource(
        type="resource",
        resource=BlobResourceContents(
            uri="demo://resource/blob/1", mime_type="application/gzip", blob="H4sIAAAA"
        ),
    )
    text = content_text([audio, blob])
    assert '[audio 1 (mime_type: "audio/wav", size: 12)]' in text
    assert '[embedded resource 2 (uri: "demo://resource/blob/1", mime_type: ' in text
    assert "H4sI" not in text and "UklG" not in text
    assert content_media([audio, blob]) == []
