"""Email: one message per recipient through Django's email backend, with decision links
signed for that recipient while the review is pending."""

from __future__ import annotations

import smtplib

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import EmailMultiAlternatives, get_connection
from django.template.loader import render_to_string

from harness_base.config import EmailChannelConfig
from review.email_links import decision_link_urls
from review.transports.base import NotificationFailed, ReviewMessage, Transport


class Email(Transport):
    kind = "email"

    def __init__(self, config: EmailChannelConfig) -> None:
        self.config = config

    def recipients(self) -> list[str]:
        if self.config.to:
            return list(self.config.to)
        return sorted(
            get_user_model()
            .objects.filter(groups__name=self.config.group, is_active=True)
            .exclude(email="")
            .values_list("email", flat=True)
            .distinct()
        )

    def notify(self, *, message: ReviewMessage, delivery_id: str) -> dict[str, str] | None:
        to = self.recipients()
        if not to:
            raise NotificationFailed(
                f"group {self.config.group!r} has no active member with an email address"
            )
        subject = f"[Agent Harness] {message.title}: {message.tool} in {message.task_title}"
        # One message per recipient: nobody sees who else was told, and a pending review's
        # mail carries decision links signed for its recipient alone (review.email_links).
        mails = []
        for address in to:
            links = (
                decision_link_urls(
                    review_id=message.review_id,
                    arguments_hash=message.arguments_hash,
                    email=address,
                    decisions=message.decisions,
                )
                if message.status == "pending"
                else {}
            )
            context = {"message": message, "links": links}
            mail = EmailMultiAlternatives(
                # A title's line breaks would be header injection (Django refuses them).
                subject=" ".join(subject.split())[:200],
                body=render_to_string("review/notification_email.txt", context),
                from_email=settings.DEFAULT_FROM_EMAIL,
                to=[address],
                headers={"X-Harness-Notification": delivery_id},
            )
            mail.attach_alternative(
                render_to_string("review/notification_email.html", context), "text/html"
            )
            mails.append(mail)
        try:
            get_connection().send_messages(mails)
        except (smtplib.SMTPException, OSError) as exc:
            raise NotificationFailed(f"{type(exc).__name__}: {exc}"[:300]) from None
        return None
