"""harness.yaml is validated at start-up, and a bad key is named in the error."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from harness_site.config import load_config, parse_duration


def test_the_shipped_harness_yaml_is_valid():
    config = load_config(Path(settings.BASE_DIR) / "harness.yaml")
    assert config.trigger("after_step").level == "step"
    assert any(rule.action == "deny" for rule in config.review_rules)


def test_unknown_key_is_named(tmp_path):
    path = tmp_path / "harness.yaml"
    path.write_text("retry: {initial_s: 1, factr: 2}\n")
    with pytest.raises(ImproperlyConfigured, match=r"retry\.factr"):
        load_config(path)


def test_bad_trigger_level_is_named(tmp_path):
    path = tmp_path / "harness.yaml"
    path.write_text("checkpoint_triggers:\n  - {event: after_step, level: planet}\n")
    with pytest.raises(ImproperlyConfigured, match=r"checkpoint_triggers\.0\.level"):
        load_config(path)


def test_bad_regex_in_rule_is_named(tmp_path):
    path = tmp_path / "harness.yaml"
    path.write_text("review_rules:\n  - {name: x, command_regex: '(', action: deny}\n")
    with pytest.raises(ImproperlyConfigured, match=r"review_rules\.0\.command_regex"):
        load_config(path)


def test_invalid_yaml_is_reported(tmp_path):
    path = tmp_path / "harness.yaml"
    path.write_text("retry: [unclosed\n")
    with pytest.raises(ImproperlyConfigured, match="not valid YAML"):
        load_config(path)


@pytest.mark.parametrize(("raw", "seconds"), [(90, 90), ("30s", 30), ("15m", 900), ("4h", 14400)])
def test_durations(raw, seconds):
    assert parse_duration(raw) == seconds
