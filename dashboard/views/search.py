"""`/search/`: the navigation's search box. One match opens it; several are listed."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from dashboard import selectors
from dashboard.forms import SearchForm
from tasks.web.access import viewer_required


@viewer_required
def search(request: HttpRequest) -> HttpResponse:
    form = SearchForm(request.GET)
    if not form.is_valid():
        context = {"form": form, "id_min": selectors.SEARCH_ID_MIN}
        return render(request, "dashboard/search.html", context, status=422)
    q = form.cleaned_data["q"]
    found = selectors.search(q=q) if q else None
    if found is not None and found.count == 1:
        if found.tasks:
            return redirect(reverse("tasks:detail", kwargs={"task_id": found.tasks[0].id}))
        return redirect(reverse("review:detail", kwargs={"review_id": found.reviews[0].id}))
    return render(
        request,
        "dashboard/search.html",
        {
            "form": form,
            "q": q,
            "found": found,
            "limit": selectors.SEARCH_LIMIT,
            "id_min": selectors.SEARCH_ID_MIN,
        },
    )
