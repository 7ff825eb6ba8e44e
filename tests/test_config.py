"""harness.yaml is validated at start-up, and a bad key is named in the error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from harness_base.config import load_config, parse_duration


def test_the_shipped_harness_yaml_is_valid():
    config = load_config(Path(settings.BASE_DIR) / "harness.yaml")
    assert config.trigger("after_step").level == "step"
    assert any(rule.action == "deny" for rule in config.review_rules)


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("retry: {initial_s: 1, factr: 2}\n", r"retry\.factr"),
        (
            "checkpoint_triggers:\n  - {event: after_step, level: planet}\n",
            r"checkpoint_triggers\.0\.level",
        ),
        (
            "review_rules:\n  - {name: x, command_regex: '(', action: deny}\n",
            r"review_rules\.0\.command_regex",
        ),
        ("retry: [unclosed\n", "not valid YAML"),
        (
            "langgraph_graphs:\n  g: {graph: 'm:g', interrupt_resume: raw}\n",
            r"langgraph_graphs\.g\..*interrupt_resume",
        ),
        (
            "review_rules:\n  - {name: x, action: review, sla: {decide_within: soon}}\n",
            r"review_rules\.0\.sla\.decide_within: .*not a duration: 'soon' \(use e\.g\. 30s",
        ),
        (
            "review_rules:\n  - {name: x, action: review, sla: {decide_within: 0s}}\n",
            r"review_rules\.0\.sla\.decide_within: .*between 1s and 366d",
        ),
        (
            "review_rules:\n  - {name: x, risk: read, action: allow, sla: {decide_within: 5m}}\n",
            r"review_rules\.0: .*only a review rule has a time to decision, not allow",
        ),
        ("review_sla: {decide_within: 30m, warn: 1}\n", r"review_sla\.warn"),
    ],
    ids=[
        "unknown key",
        "bad trigger level",
        "bad regex in a rule",
        "invalid YAML",
        "bad interrupt_resume",
        "sla not a duration",
        "sla of zero",
        "sla on an allow rule",
        "unknown key in review_sla",
    ],
)
def test_a_bad_file_is_refused_naming_what_is_wrong(tmp_path, text, named):
    path = tmp_path / "harness.yaml"
    path.write_text(text)
    with pytest.raises(ImproperlyConfigured, match=named):
        load_config(path)


@pytest.mark.parametrize(("raw", "seconds"), [(90, 90), ("30s", 30), ("15m", 900), ("4h", 14400)])
def test_durations(raw, seconds):
    assert parse_duration(raw) == seconds


def test_a_graph_entry_with_options_is_read_and_a_bare_reference_has_the_defaults(tmp_path):
    from harness_base.config import langgraph_entry

    path = tmp_path / "harness.yaml"
    path.write_text(
        "langgraph_graphs:\n"
        "  bare: 'examples.langgraph_release:graph'\n"
        "  asks: {graph: 'tests.durable.graphs:asks_plain', interrupt_resume: value}\n"
    )
    graphs = load_config(path).langgraph_graphs
    assert langgraph_entry(graphs["bare"]).interrupt_resume == "envelope"
    assert langgraph_entry(graphs["asks"]).graph == "tests.durable.graphs:asks_plain"
    assert langgraph_entry(graphs["asks"]).interrupt_resume == "value"


@pytest.mark.parametrize("raw", ["-1", "soon", "nan"])
def test_a_bad_harness_drain_s_is_refused_at_start_naming_it(raw):
    env = {**os.environ, "HARNESS_DRAIN_S": raw, "PYTHONPATH": str(settings.BASE_DIR)}
    run = subprocess.run(
        [sys.executable, "-c", "import harness_site.settings"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert run.returncode != 0
    assert f"HARNESS_DRAIN_S={raw!r}" in run.stderr
