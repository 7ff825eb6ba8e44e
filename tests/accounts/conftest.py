from __future__ import annotations

import pytest

from accounts.config import OidcConfig
from tests.factories import UserFactory

SSO = OidcConfig(
    issuer="https://idp.example.com",
    client_id="harness",
    client_secret="s3cret",
    group_map={"idp-ops": "operators", "idp-read": "viewers"},
    provider_name="Test IdP",
)


@pytest.fixture(autouse=True)
def _harness_settings(harness_dirs, quiet_watchdog) -> None:
    pass


@pytest.fixture
def boss(roles):
    """An operator with the admin flag: manages people."""
    return UserFactory(username="boss", roles=["operators"], is_staff=True)


@pytest.fixture
def sso_mapped(settings):
    """Single sign-on on, with a group map."""
    settings.HARNESS_OIDC = SSO
    return SSO
