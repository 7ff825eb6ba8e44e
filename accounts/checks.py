"""`manage.py check --deploy` (and `harness up`) fail when single sign-on is configured but
the provider's discovery document cannot be fetched or does not match HARNESS_OIDC_ISSUER:
a clear error at start, not a failed login later."""

from __future__ import annotations

from django.core.checks import Error, Tags, register
from django.core.exceptions import ImproperlyConfigured

from accounts.oidc import oidc_config, oidc_discovery


@register(Tags.security, deploy=True)
def oidc_discovery_check(app_configs, **kwargs) -> list[Error]:
    if oidc_config() is None:
        return []
    try:
        oidc_discovery(refresh=True)
    except ImproperlyConfigured as exc:
        return [
            Error(
                str(exc),
                hint="check HARNESS_OIDC_ISSUER: it must be the provider's issuer exactly, "
                "reachable from here",
                id="harness.E010",
            )
        ]
    return []
