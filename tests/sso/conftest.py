from __future__ import annotations

import pytest

from tests.sso.fixtures import (  # noqa: F401  (shared fixtures)
    idp,
    idp_server,
    local_login_off,
    sso,
    sso_login,
    token_standin,
)


@pytest.fixture(autouse=True)
def _harness_settings(harness_dirs, quiet_watchdog) -> None:
    pass
