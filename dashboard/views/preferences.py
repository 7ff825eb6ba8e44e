"""`/preferences/`: a user's own settings for the pages (the time zone times are shown in)."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from dashboard import selectors, services
from dashboard.forms import PreferencesForm
from tasks.web.access import viewer_required


@require_http_methods(["GET", "POST"])
@viewer_required
def preferences(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        form = PreferencesForm(request.POST)
        if form.is_valid():
            zone = form.cleaned_data["time_zone"]
            services.preference_time_zone_set(user=request.user, time_zone=zone)
            messages.success(request, f"Times are shown in {zone or 'the browser’s time zone'}.")
            return redirect("dashboard:preferences")
        return render(request, "dashboard/preferences.html", {"form": form}, status=422)
    form = PreferencesForm(initial={"time_zone": selectors.user_time_zone(user=request.user)})
    return render(request, "dashboard/preferences.html", {"form": form})
