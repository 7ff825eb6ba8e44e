"""Standing rules ("approve and always allow…"): what a review suggests, what a standing rule
matches, and whether it may stand in for a human's approval of a call.

A standing rule is an allow that stands in for one operator's approval. So it is consulted only
for a call the policy sends to review (a `deny` is final before it is looked at), and only
where that operator's single approval would have been enough: never for a review that needs
more than one approval, never for a call of a task its own creator made under a four-eyes rule
(`forbid_creator`), never for a task whose spec asks to review every call of the tool, never
once its creator may no longer decide reviews, never while paused, once revoked, or after
`until`.

The rule fields come from the server only: `suggestions` derives them from the call under
review, and a decision names one of them by its id (a hash of its fields). Matching is stricter
than the policy's review rules, which must catch a call if any of its paths matches: here every
path of the call must match, path by path and segment by segment (`*` never crosses a `/`), in
normal form (no `.`, `..` or empty segment); a command prefix admits no shell operator after it;
a URL must have exactly the origin. Every other argument is pinned (the call must carry it
exactly as the approved call did, or leave it out as that call did) or a free payload
(write_file's content, http_request's body): `arguments`.

The modules, from the bottom: `arguments` (pinned, free and patterned arguments), `offers`
(Suggestion, suggestions, review_suggestions, review_rememberable, until_parse) and `matching`
(rule_allows, held_reason, standing_rule_lapsed, standing_rule_for). Callers import from this
package.
"""

from __future__ import annotations

from review.standing.arguments import COMMAND_TOOL, URL_TOOL, rule_matches
from review.standing.matching import (
    held_reason,
    rule_allows,
    standing_rule_for,
    standing_rule_lapsed,
)
from review.standing.offers import (
    DEFAULT_DAYS,
    MAX_DAYS,
    Suggestion,
    normal_path,
    review_rememberable,
    review_suggestions,
    suggestions,
    until_parse,
    url_origin,
)

__all__ = [
    "COMMAND_TOOL",
    "DEFAULT_DAYS",
    "MAX_DAYS",
    "URL_TOOL",
    "Suggestion",
    "held_reason",
    "normal_path",
    "review_rememberable",
    "review_suggestions",
    "rule_allows",
    "rule_matches",
    "standing_rule_for",
    "standing_rule_lapsed",
    "suggestions",
    "until_parse",
    "url_origin",
]
