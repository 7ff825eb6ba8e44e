"""`/preferences/`: a user's own settings: the time zone the pages show times in. It also shows
the Slack user id whose clicks on review buttons decide as them, which only an administrator
sets (review.services.reviewer_slack_id_set): a person who could set their own could claim
another's, whose clicks would then decide as them."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from dashboard import selectors, services
from dashboard.forms import PreferencesForm
from harness_base.http import AuthedRequest
from review import selectors as review_selectors
from tasks.web.access import viewer_required


@require_http_methods(["GET", "POST"])
@viewer_required
def preferences(request: AuthedRequest) -> HttpResponse:
    if request.method == "POST":
        form = PreferencesForm(request.POST)
        if "slack_user_id" in request.POST:
            form.add_error(None, "slack_user_id: only an administrator sets your Slack user id")
        if form.is_valid():
            zone = form.cleaned_data["time_zone"]
            services.preference_time_zone_set(user=request.user, time_zone=zone)
            messages.success(request, f"Times are shown in {zone or 'the browser’s time zone'}.")
            return redirect("dashboard:preferences")
        return render(request, "dashboard/preferences.html", _context(request, form), status=422)
    form = PreferencesForm(initial={"time_zone": selectors.user_time_zone(user=request.user)})
    return render(request, "dashboard/preferences.html", _context(request, form))


def _context(request: AuthedRequest, form: PreferencesForm) -> dict[str, object]:
    return {"form": form, "slack_user_id": review_selectors.slack_user_id_of(user=request.user)}
