"""The review SLA statistics: who first viewed a review when, and the roll-up tables
(written only by review.rollups)."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from review.models.request import ReviewRequest


class ReviewView(models.Model):
    """When a user who may decide first opened a review's page (review.rollups.review_viewed):
    the review SLA statistics' time to first view, and whether (and how long before) the
    decider looked at the page, which always shows the diff or command, before deciding."""

    review = models.ForeignKey(ReviewRequest, on_delete=models.CASCADE, related_name="views")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    first_viewed_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["review", "user"], name="reviewview_review_user")
        ]

    def __str__(self) -> str:
        return f"review {self.review_id} first viewed by {self.user_id} at {self.first_viewed_at}"


class ReviewRolledHour(models.Model):
    """One row per hour of `requested_at` the review roll-ups cover (empty hours included).
    `stale`: a review of that hour was decided, viewed or had a notification fail since it was
    rolled; `pending`: reviews still open when it was rolled (rolled again while young)."""

    hour = models.DateTimeField(unique=True)
    pending = models.PositiveIntegerField(default=0)
    stale = models.BooleanField(default=False)
    rolled_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"reviews of {self.hour:%Y-%m-%d %H:00} ({self.pending} pending)"


class ReviewCounts(models.Model):
    """Review SLA counts of the reviews opened in a period, by `dim` (rule, tool, operator —
    who decided, "" for nobody — or via, where the decision was made) and its `key`."""

    dim = models.CharField(max_length=10)
    key = models.CharField(max_length=150)
    opened = models.PositiveIntegerField(default=0)
    # Approved, rejected or answered by a person.
    decided = models.PositiveIntegerField(default=0)
    approved = models.PositiveIntegerField(default=0)
    rejected = models.PositiveIntegerField(default=0)
    expired = models.PositiveIntegerField(default=0)
    edited = models.PositiveIntegerField(default=0)
    notifications_failed = models.PositiveIntegerField(default=0)
    unviewed = models.PositiveIntegerField(default=0)
    # Decided or expired after the target time to decision (review.rollups.targets).
    breached = models.PositiveIntegerField(default=0)

    class Meta:
        abstract = True


class ReviewHourly(ReviewCounts):
    """ReviewCounts of the reviews opened in one hour."""

    hour = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["hour", "dim"], name="reviewhourly_hour_dim")]

    def __str__(self) -> str:
        return f"{self.hour:%Y-%m-%d %H:00} {self.dim}={self.key}: {self.opened} opened"


class ReviewTimeHourly(models.Model):
    """Log-scale histograms (tasks.rollups.bucket_value) of the seconds to first view, to
    decision and on the page before deciding, of the reviews opened in one hour."""

    hour = models.DateTimeField()
    dim = models.CharField(max_length=10)
    key = models.CharField(max_length=150)
    kind = models.CharField(max_length=12)
    bucket = models.IntegerField()
    reviews = models.PositiveIntegerField()

    class Meta:
        indexes = [models.Index(fields=["hour", "dim"], name="reviewtimehourly_hour_dim")]

    def __str__(self) -> str:
        return f"{self.hour:%Y-%m-%d %H:00} {self.dim}={self.key} {self.kind}[{self.bucket}]"


class ReviewDaily(ReviewCounts):
    """ReviewHourly summed over one UTC day (review.rollups keeps it in step with the hours):
    a window of days reads 30 rows per key, not 720."""

    day = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["day", "dim"], name="reviewdaily_day_dim")]

    def __str__(self) -> str:
        return f"{self.day:%Y-%m-%d} {self.dim}={self.key}: {self.opened} opened"


class ReviewTimeDaily(models.Model):
    """ReviewTimeHourly summed over one UTC day, one row per (dim, key, kind) holding its whole
    histogram ({bucket: reviews}): a day fills a few thousand buckets, and a window of 30 days
    would otherwise sum ~100,000 rows."""

    day = models.DateTimeField()
    dim = models.CharField(max_length=10)
    key = models.CharField(max_length=150)
    kind = models.CharField(max_length=12)
    histogram = models.JSONField()

    class Meta:
        indexes = [models.Index(fields=["day", "dim"], name="reviewtimedaily_day_dim")]

    def __str__(self) -> str:
        return f"{self.day:%Y-%m-%d} {self.dim}={self.key} {self.kind}"
