"""`/people/`: who has an account here, with what role, signing in how, holding which API
tokens; invite, change a role, deactivate. Open to operators with the admin flag and to
superusers; every rule is the service's (accounts.flows.people), the views only parse and
render. Refusals render the page with the field and the reason, with the refusal's status."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from accounts.flows.people import (
    Invited,
    PeopleError,
    person_deactivate,
    person_invite,
    person_role_set,
)
from accounts.forms import ROLE_CHOICES, InviteForm, RoleForm, form_problem
from accounts.oidc import oidc_config
from accounts.selectors import people_list, user_can_manage_people
from harness_base.http import AuthedRequest
from tasks.web.access import forbidden
from tasks.web.compression import uncompressed


def people_required(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    @login_required
    @wraps(view)
    def wrapper(request: AuthedRequest, *args, **kwargs) -> HttpResponse:
        if not user_can_manage_people(request.user):
            return forbidden(
                request, "only operators with the admin flag, or superusers, manage people"
            )
        return view(request, *args, **kwargs)

    return wrapper


def _page(
    request: AuthedRequest,
    *,
    status: int = 200,
    error: PeopleError | None = None,
    form: InviteForm | None = None,
    invited: Invited | None = None,
) -> HttpResponse:
    config = oidc_config()
    context = {
        "rows": people_list(),
        "form": form or InviteForm(),
        "roles": ROLE_CHOICES,
        "error": error,
        "invited": invited,
        "invite_link": request.build_absolute_uri(invited.link_path)
        if invited is not None and invited.link_path
        else "",
        "invite_days": round(settings.PASSWORD_RESET_TIMEOUT / 86400, 1),
        "sso_name": config.display_name if config else "",
        "sso_mapped": bool(config and config.group_map),
        "local_login": settings.HARNESS_LOCAL_LOGIN,
    }
    return render(request, "accounts/people.html", context, status=status)


@require_GET
@people_required
def people(request: AuthedRequest) -> HttpResponse:
    return _page(request)


@require_POST
@people_required
@uncompressed  # the one-time link, unmasked, beside the name and email the form was sent
def invite(request: AuthedRequest) -> HttpResponse:
    form = InviteForm(request.POST)
    if not form.is_valid():
        field, message = form_problem(form)
        return _page(request, status=422, form=form, error=PeopleError(message, field=field))
    try:
        invited = person_invite(by=request.user, **form.cleaned_data)
    except PeopleError as exc:
        return _page(request, status=exc.status, form=form, error=exc)
    return _page(request, invited=invited)


@require_POST
@people_required
def role(request: AuthedRequest, user_id: int) -> HttpResponse:
    form = RoleForm(request.POST)
    if not form.is_valid():
        field, message = form_problem(form)
        return _page(request, status=422, error=PeopleError(message, field=field))
    try:
        user = person_role_set(by=request.user, user_id=user_id, **form.cleaned_data)
    except PeopleError as exc:
        return _page(request, status=exc.status, error=exc)
    messages.success(request, f"{user.get_username()}: role saved.")
    return redirect("people:list")


@require_POST
@people_required
def deactivate(request: AuthedRequest, user_id: int) -> HttpResponse:
    try:
        user = person_deactivate(by=request.user, user_id=user_id)
    except PeopleError as exc:
        return _page(request, status=exc.status, error=exc)
    messages.success(
        request, f"{user.get_username()} is deactivated: signed out, API tokens revoked."
    )
    return redirect("people:list")
