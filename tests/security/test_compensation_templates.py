"""Compensations named in harness.yaml fill their arguments from templates over a call's
arguments and result, both of which the model and a server control (THREATS.md: a
compensation runs as a reviewed call, never as code). The template language only looks paths
up: no expression, attribute, call or statement is ever evaluated; every size and depth is
bounded; a path that does not resolve is an error naming it; values put into a URL cannot
change its origin or add path segments. A bad template stops start-up naming its key; a
template that cannot be filled in lists the call under "cannot be undone" with the reason."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from harness_base.arg_templates import (
    MAX_RENDERED_CHARS,
    MAX_STRING_CHARS,
    TemplateError,
    template_check,
    template_render,
)
from harness_base.config import load_config
from tasks.selectors import Irreversible, compensation_for
from tests.factories import TaskFactory, ToolCallFactory

ROOTS = ("args", "result")
VALUES = {"args": {"project": "ops", "items": [{"id": 7}]}, "result": {"id": "T-1"}}


@pytest.mark.parametrize(
    "template",
    [
        "{{ __import__('os').system('touch /tmp/pwned') }}",
        "{{ args.project.upper() }}",
        "{{ args['project'] }}",
        "{{ args.project | upper }}",
        "{{ args.project + 1 }}",
        "{% for x in args %}{{ x }}{% endfor %}",
        "{# comment #}",
        "{{ lipsum.__globals__.os }}",
        "{{ self.__init__.__globals__ }}",
        "{{ config }}",
        "{{ args }} }}",
        "{{ args.a..b }}",
        "{{ }}",
    ],
)
def test_anything_but_a_path_is_refused(template):
    with pytest.raises(TemplateError):
        template_check({"x": template}, roots=ROOTS)
    with pytest.raises(TemplateError):
        template_render({"x": template}, values=VALUES)


def test_attributes_are_never_read_only_keys():
    # Python attributes of the dict, the list and the string: none is a key, so none resolves.
    for path in ("args.__class__", "args.keys", "args.items.0.__class__", "result.id.__len__"):
        with pytest.raises(TemplateError, match="has no|not an object"):
            template_render(f"{{{{ {path} }}}}", values=VALUES)


def test_missing_paths_are_errors_that_name_them():
    with pytest.raises(TemplateError, match=r"result\.key.*has no 'key'"):
        template_render({"key": "{{ result.key }}"}, values=VALUES)
    with pytest.raises(TemplateError, match=r"list of 1, no item '3'"):
        template_render("{{ args.items.3.id }}", values=VALUES)
    with pytest.raises(TemplateError, match="unknown root 'env'"):
        template_render("{{ env.SECRET_KEY }}", values=VALUES)
    with pytest.raises(TemplateError, match="is NoneType|is null|not an object"):
        template_render("{{ result.id.x }}", values={"args": {}, "result": {"id": None}})


def test_deep_paths_and_deep_templates_are_refused():
    with pytest.raises(TemplateError, match="at most 8 parts"):
        template_check("{{ result.a.b.c.d.e.f.g.h }}", roots=ROOTS)
    nested: dict = {"v": "{{ args.project }}"}
    for _ in range(9):
        nested = {"n": nested}
    with pytest.raises(TemplateError, match="deeper than"):
        template_check(nested, roots=ROOTS)
    with pytest.raises(TemplateError, match="larger than"):
        template_check({"x": "a" * 9000}, roots=ROOTS)
    with pytest.raises(TemplateError, match="more than 64 placeholders"):
        template_check(" ".join(["{{ args.project }}"] * 65), roots=ROOTS)


def test_huge_values_are_refused():
    huge = {"args": {}, "result": {"blob": "x" * (MAX_RENDERED_CHARS + 1)}}
    with pytest.raises(TemplateError, match="larger than"):
        template_render({"key": "{{ result.blob }}"}, values=huge)
    long = {"args": {}, "result": {"blob": "x" * (MAX_STRING_CHARS + 1)}}
    with pytest.raises(TemplateError, match="longer than"):
        template_render("key-{{ result.blob }}", values=long)
    with pytest.raises(TemplateError, match="only text, numbers and booleans"):
        template_render("id {{ args.items }}", values=VALUES)


def test_a_value_that_looks_like_a_template_stays_text():
    values = {"args": {}, "result": {"id": "{{ args.secret }}", "n": "{% raw %}"}}
    assert template_render({"id": "{{ result.id }}", "t": "n={{ result.n }}"}, values=values) == {
        "id": "{{ args.secret }}",
        "t": "n={% raw %}",
    }


def test_url_values_are_escaped_as_one_path_segment():
    values = {"args": {}, "result": {"json": {"id": "../../admin?all=1#@evil.example/"}}}
    url = template_render(
        "https://tracker.example/issues/{{ result.json.id }}",
        values=values,
        escape=lambda text: __import__("urllib.parse").parse.quote(text, safe=""),
    )
    assert url == "https://tracker.example/issues/..%2F..%2Fadmin%3Fall%3D1%23%40evil.example%2F"


@pytest.mark.parametrize(
    ("yaml_text", "key"),
    [
        (
            "mcp_servers:\n  tickets:\n    url: http://127.0.0.1:1/mcp\n    compensations:\n"
            "      create_issue: {tool: close_issue, args: {id: '{{ result.id.__class__() }}'}}\n",
            "mcp_servers.tickets.compensations.create_issue.args",
        ),
        (
            "http:\n  compensations:\n    - match: {method: POST, url: 'https://t.example/issues'}\n"
            "      request: {method: DELETE, url: 'https://{{ result.json.host }}/issues'}\n",
            "http.compensations.0.request.url",
        ),
        (
            "http:\n  compensations:\n    - match: {method: POST, url: 'https://t.example/issues'}\n"
            "      request: {method: DELETE, url: 'https://t.example/{% if 1 %}x{% endif %}'}\n",
            "http.compensations.0.request.url",
        ),
    ],
)
def test_a_bad_template_stops_start_up_naming_its_key(tmp_path, yaml_text, key):
    path = tmp_path / "harness.yaml"
    path.write_text(yaml_text)
    with pytest.raises(ImproperlyConfigured, match=key.replace(".", r"\.")):
        load_config(path)


@pytest.mark.django_db
def test_a_hostile_result_makes_the_call_irreversible_with_the_reason(harness_yaml):
    harness_yaml(
        "mcp_servers:\n  tickets:\n    url: http://127.0.0.1:1/mcp\n    compensations:\n"
        "      create_issue: {tool: close_issue, args: {id: '{{ result.id }}'}}\n"
    )
    task = TaskFactory()
    call = ToolCallFactory(
        task=task,
        tool="tickets__create_issue",
        status="succeeded",
        result={"id": "x" * (MAX_RENDERED_CHARS + 10)},
    )
    found = compensation_for(call, task=task)
    assert isinstance(found, Irreversible)
    assert found.why.startswith("compensation could not be computed:")
    assert "larger than" in found.why and len(found.why) <= 500


@pytest.mark.django_db
def test_a_header_value_smuggling_a_line_break_is_refused(harness_yaml):
    harness_yaml(
        "http:\n  compensations:\n    - match: {method: POST, url: 'https://t.example/issues'}\n"
        "      request:\n        method: DELETE\n"
        "        url: 'https://t.example/issues/{{ result.json.id }}'\n"
        "        headers: {X-Id: 'id {{ result.json.id }}'}\n"
    )
    task = TaskFactory()
    call = ToolCallFactory(
        task=task,
        tool="http_request",
        status="succeeded",
        arguments={"method": "POST", "url": "https://t.example/issues"},
        result={"status": 201, "body": '{"id": "7\\r\\nX-Admin: yes"}'},
    )
    found = compensation_for(call, task=task)
    assert isinstance(found, Irreversible)
    assert "http_request refuses the arguments: headers" in found.why
