"""Reading `harness.yaml`: `load_config` validates a file (an error names each bad key as the
file spells it), `harness_config` is the configured file, read once."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import yaml
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from pydantic import ValidationError

from harness_base.config.harness import HarnessConfig
from harness_base.config.notifications import CHANNEL_KINDS


def _key(loc: tuple[Any, ...]) -> str:
    parts = [str(part) for part in loc]
    # A channel's `kind` selects its model; pydantic names it in the location, the file does not.
    if parts[:2] == ["notifications", "channels"] and len(parts) > 3 and parts[3] in CHANNEL_KINDS:
        del parts[3]
    return ".".join(parts) or "(top level)"


def _describe(error: ValidationError, source: Path) -> str:
    lines = [f"{source}: invalid configuration"]
    for item in error.errors():
        key = _key(item["loc"])
        lines.append(f"  {key}: {item['msg']}")
    return "\n".join(lines)


def load_config(path: Path) -> HarnessConfig:
    if not path.exists():
        return HarnessConfig()
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ImproperlyConfigured(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise ImproperlyConfigured(f"{path}: the top level must be a mapping of keys")
    try:
        return HarnessConfig.model_validate(raw)
    except ValidationError as exc:
        raise ImproperlyConfigured(_describe(exc, path)) from None


@functools.cache
def harness_config() -> HarnessConfig:
    return load_config(Path(settings.HARNESS_CONFIG_FILE))
