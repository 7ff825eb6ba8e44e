"""Review SLA statistics (`/stats/reviews/`, `GET /api/v1/stats/reviews`) and their roll-ups.

Reviews are windowed by `requested_at`. Per rule (a review counts for each rule it matched),
tool, operator (who decided; "" for nobody) and `via` (where the decision was made): reviews
opened, approved, rejected, expired, approvals of edited arguments, notifications that failed,
decisions made without the decider having viewed the review page, and log-scale histograms of
the seconds to the first view by a user who may decide, to the decision, and on the page before
deciding. The review page always shows the diff or command under review, so "viewed the page"
is the signal for "opened the diff"; decisions made without a page view (the API, a link in a
message) count as `unviewed`, by `via`.

The sweep rolls each hour once it ended ROLL_LAG ago into ReviewHourly / ReviewTimeHourly
(`review_rollups_advance`). An hour is marked stale when one of its reviews is decided or
expired (review_transition), first viewed (review_viewed) or has a notification fail, and
rolled again; an hour with reviews still pending is also rolled again every RESETTLE_EVERY
while it is younger than RESETTLE_WITHIN. A roll holds the review roll lock, and marking an
hour stale waits for it, so a change committed during a roll is rolled by the next sweep. The
statistics read the rolled hours and the rest of
the window (its ragged start, the hours not rolled yet) from the reviews themselves, through the
same aggregation, so both agree.

The modules, from the bottom: `aggregation` (what is counted: the facts of each review,
folded into counts and histograms), `roll` (rolling hours and days, the sweep's step, the review
roll lock), `changes` (review_viewed, review_rollups_stale), `sla` (review_sla, the reads),
`series` (review_sla_series, the SLA over time) and `targets` (each review's target time to
decision, from harness.yaml).
Callers import from this package.
"""

from __future__ import annotations

from review.rollups.aggregation import COUNTS, DIMS, HUMAN, TIMES, Key
from review.rollups.changes import review_rollups_stale, review_viewed
from review.rollups.roll import (
    DAILY,
    REVIEW_ROLL_LOCK,
    review_days_roll,
    review_hours_roll,
    review_rollups_advance,
)
from review.rollups.series import review_sla_series
from review.rollups.sla import review_sla

__all__ = [
    "COUNTS",
    "DAILY",
    "DIMS",
    "HUMAN",
    "REVIEW_ROLL_LOCK",
    "TIMES",
    "Key",
    "review_days_roll",
    "review_hours_roll",
    "review_rollups_advance",
    "review_rollups_stale",
    "review_sla",
    "review_sla_series",
    "review_viewed",
]
