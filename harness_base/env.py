"""Small typed readers for the environment: every bad value fails with a message naming it."""

from __future__ import annotations

import ipaddress
import math
import os

from django.core.exceptions import ImproperlyConfigured

# The development SECRET_KEY: fine for `harness up` on loopback, refused beyond it.
DEFAULT_SECRET_KEY = "dev-only-insecure-key-set-SECRET_KEY-in-production"

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str) -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r}: expected one of 1/0, true/false, yes/no, on/off")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r}: expected an integer") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name}={raw!r}: must be at least {minimum}")
    return value


def env_float(name: str, default: float, *, minimum: float | None = None) -> float:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r}: expected a number") from None
    if minimum is not None and not (math.isfinite(value) and value >= minimum):
        raise ImproperlyConfigured(f"{name}={raw!r}: expected a number of at least {minimum:g}")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return list(default)
    return [part.strip() for part in raw.split(",") if part.strip()]


def env_choice(name: str, choices: tuple[str, ...], default: str) -> str:
    """One of `choices` (compared stripped and lower-cased; unset or empty: `default`)."""
    value = os.environ.get(name, "").strip().lower() or default
    if value not in choices:
        expected = " or ".join(choices) if len(choices) == 2 else "one of " + ", ".join(choices)
        raise ImproperlyConfigured(f"{name}={value!r}: expected {expected}")
    return value


def env_networks(name: str) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    """A comma-separated list of networks (CIDR; host bits allowed)."""
    networks = []
    for raw in env_list(name, []):
        try:
            networks.append(ipaddress.ip_network(raw, strict=False))
        except ValueError:
            raise ImproperlyConfigured(f"{name}: {raw!r} is not a network (CIDR)") from None
    return networks
