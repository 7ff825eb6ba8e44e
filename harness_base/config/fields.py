"""The building blocks of the sections: durations (`parse_duration`), patterns on RE2
(`compile_pattern`, `Regex`), environment variable names (`EnvName`) and `Strict`, the base of
every section (unknown keys are errors, values frozen)."""

from __future__ import annotations

import functools
import re
from typing import Annotated, Any

import re2
from pydantic import AfterValidator, BaseModel, ConfigDict, StringConstraints

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, None: 1}


def parse_duration(value: object) -> float:
    """`90`, `"90s"`, `"15m"`, `"4h"` -> seconds."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    match = _DURATION.match(str(value))
    if not match:
        raise ValueError(f"not a duration: {value!r} (use e.g. 30s, 15m, 4h)")
    return float(match.group(1)) * _UNITS[match.group(2)]


_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False
_RE2_OPTIONS.max_mem = 8 * 1024**2


@functools.lru_cache(maxsize=512)
def compile_pattern(value: str, *, multiline: bool = False) -> Any:
    """Compile a pattern from a spec, a model or a rule on RE2, which matches in linear time
    (no backtracking, so no pattern can pin a CPU). RE2 has no backreferences or lookaround:
    such a pattern is a ValueError saying so."""
    try:
        return re2.compile(("(?m)" if multiline else "") + value, _RE2_OPTIONS)
    except re2.error as exc:
        detail = exc.args[0].decode(errors="replace") if exc.args else "invalid"
        raise ValueError(
            f"invalid regular expression ({detail}); patterns run on RE2, a linear-time "
            "engine without backreferences or lookaround"
        ) from None


def check_regex(value: str) -> str:
    compile_pattern(value)
    return value


# A pattern that compiles on RE2 (a ValueError names the field otherwise).
Regex = Annotated[str, AfterValidator(check_regex)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


EnvName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=100)]
