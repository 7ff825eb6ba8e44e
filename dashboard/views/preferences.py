"""`/preferences/`: a user's own settings: the time zone the pages show times in, and the Slack
user id whose clicks on review buttons decide as them (review.services.reviewer_slack_id_set)."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from dashboard import selectors, services
from dashboard.forms import PreferencesForm
from review import selectors as review_selectors
from review import services as review_services
from tasks.web.access import viewer_required


@require_http_methods(["GET", "POST"])
@viewer_required
def preferences(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        form = PreferencesForm(request.POST)
        if form.is_valid():
            try:
                review_services.reviewer_slack_id_set(
                    user=request.user, slack_user_id=form.cleaned_data["slack_user_id"]
                )
            except review_services.ReviewError as exc:
                form.add_error("slack_user_id", exc.message)
        if form.is_valid():
            zone = form.cleaned_data["time_zone"]
            services.preference_time_zone_set(user=request.user, time_zone=zone)
            messages.success(request, f"Times are shown in {zone or 'the browser’s time zone'}.")
            return redirect("dashboard:preferences")
        return render(request, "dashboard/preferences.html", {"form": form}, status=422)
    form = PreferencesForm(
        initial={
            "time_zone": selectors.user_time_zone(user=request.user),
            "slack_user_id": review_selectors.slack_user_id_of(user=request.user),
        }
    )
    return render(request, "dashboard/preferences.html", {"form": form})
