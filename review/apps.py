from django.apps import AppConfig


class ReviewConfig(AppConfig):
    name = "review"
    verbose_name = "Review"

    def ready(self) -> None:
        from review import compensation, receivers
        from tasks import signals

        # Strong references, one connection each (dispatch_uid): recovery and retention
        # reach reviews only through these.
        signals.history_superseded.connect(
            receivers.on_history_superseded, dispatch_uid="review.history_superseded"
        )
        signals.calls_undone.connect(receivers.on_calls_undone, dispatch_uid="review.calls_undone")
        signals.review_outcomes_recount.connect(
            receivers.on_review_outcomes_recount, dispatch_uid="review.review_outcomes_recount"
        )
        signals.checkpoints_needed.connect(
            receivers.on_checkpoints_needed, dispatch_uid="review.checkpoints_needed"
        )
        signals.compensation_review.connect(
            compensation.on_compensation_review, dispatch_uid="review.compensation_review"
        )
