"""The login page (a "Sign in with <provider>" button when single sign-on is configured; the
password form only while HARNESS_LOCAL_LOGIN is on, or as the break-glass form), the two
single sign-on endpoints, thin over mozilla-django-oidc's views, and the page an invited person
sets their password on (the one-time link of accounts.invites)."""

from __future__ import annotations

import logging

import requests
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import ImproperlyConfigured, SuspiciousOperation
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse_lazy
from django.views import View
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from accounts.backends import oidc_setting
from accounts.invites import invite_tokens
from accounts.oidc import oidc_config, oidc_discovery
from tasks.services import audit_record

logger = logging.getLogger(__name__)


def login_context() -> dict:
    config = oidc_config()
    return {
        "sso_name": config.display_name if config else "",
        "local_login": settings.HARNESS_LOCAL_LOGIN,
    }


class LoginView(auth_views.LoginView):
    def get_context_data(self, **kwargs):
        return {**super().get_context_data(**kwargs), **login_context()}


class InviteConfirmView(auth_views.PasswordResetConfirmView):
    """Django's set-password-from-a-link page with the invite tokens: the link moves its token
    into the session and redirects (no token in a Referer), a used, expired or unknown link
    shows why it does not work. Setting the password uses the link up; audited."""

    token_generator = invite_tokens
    template_name = "registration/invite_confirm.html"
    success_url = reverse_lazy("login")

    def form_valid(self, form):
        with transaction.atomic():
            response = super().form_valid(form)
            audit_record(
                user=form.user, action="person_invite_accept", target=form.user.get_username()
            )
        messages.success(self.request, "Your password is set: sign in with it.")
        return response


def sso_failed(request: HttpRequest, message: str, *, status: int) -> HttpResponse:
    """The login page saying why single sign-on did not sign the visitor in."""
    context = {"form": AuthenticationForm(request), "sso_error": message, **login_context()}
    return render(request, "registration/login.html", context, status=status)


class SsoStart(OIDCAuthenticationRequestView):
    """Redirects to the provider with a fresh state, nonce and PKCE challenge."""

    get_settings = staticmethod(oidc_setting)

    def __init__(self, **kwargs) -> None:
        # The endpoints are read per request, once the configuration is known to exist.
        View.__init__(self, **kwargs)

    def get(self, request: HttpRequest) -> HttpResponse:
        config = oidc_config()
        if config is None:
            raise Http404("single sign-on is not configured")
        try:
            self.OIDC_OP_AUTH_ENDPOINT = oidc_discovery(config)["authorization_endpoint"]
        except ImproperlyConfigured as exc:
            logger.error("single sign-on unavailable: %s", exc)
            return sso_failed(request, f"{config.display_name} cannot be reached.", status=502)
        self.OIDC_RP_CLIENT_ID = config.client_id
        return super().get(request)


class SsoCallback(OIDCAuthenticationCallbackView):
    """The provider's redirect back: the state must be one this session started (and is used
    up), then the backend exchanges the code and verifies the ID token."""

    get_settings = staticmethod(oidc_setting)

    def get(self, request: HttpRequest) -> HttpResponse:
        if oidc_config() is None:
            raise Http404("single sign-on is not configured")
        try:
            return super().get(request)
        except SuspiciousOperation as exc:
            logger.warning("single sign-on refused: %s", exc)
            return sso_failed(request, f"Single sign-on refused: {exc}.", status=400)
        except (requests.RequestException, ValueError, ImproperlyConfigured) as exc:
            # The token endpoint refused the code (used already, expired) or answered nonsense.
            logger.error("single sign-on failed talking to the provider: %s", exc)
            return sso_failed(
                request,
                "Single sign-on failed: the provider refused the sign-in or did not answer.",
                status=502,
            )

    def login_failure(self) -> HttpResponse:
        return sso_failed(self.request, "Single sign-on did not sign you in.", status=403)
