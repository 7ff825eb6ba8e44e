"""The roles a sign-in sets (accounts.flows.oidc_login), called directly: exactly the mapped
roles, nothing else touched, and a claim that cannot be read grants nothing."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from accounts.config import OidcConfig
from accounts.flows.oidc_login import claimed_groups, oidc_login_complete
from accounts.models import SsoIdentity
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

CONFIG = OidcConfig(
    issuer="https://idp.example.com",
    client_id="harness",
    client_secret="s3cret",
    group_map={"idp-ops": "operators", "idp-dev": "creators", "staff": "viewers"},
)


def names(user) -> set[str]:
    return set(user.groups.values_list("name", flat=True))


@pytest.mark.parametrize(
    ("claim", "groups"),
    [
        (["b", "a", "a"], ["a", "b"]),
        ("idp-ops", ["idp-ops"]),
        ({"idp-ops": True}, []),
        (None, []),
        (["idp-ops", 7, None], ["idp-ops"]),
    ],
)
def test_the_groups_claim_is_read_as_a_list_of_names(claim, groups):
    assert claimed_groups(claim) == groups


def test_each_sign_in_sets_exactly_the_mapped_roles_and_leaves_other_groups(roles):
    user = oidc_login_complete(config=CONFIG, claims={"sub": "u1", "groups": ["idp-ops", "x"]})
    assert names(user) == {"operators"}
    user.groups.add(Group.objects.create(name="auditors"))

    user = oidc_login_complete(config=CONFIG, claims={"sub": "u1", "groups": ["idp-dev", "staff"]})
    assert names(user) == {"creators", "viewers", "auditors"}
    identity = SsoIdentity.objects.get(subject="u1")
    assert identity.roles == ["creators", "viewers"] and identity.groups == ["idp-dev", "staff"]

    # A claim that is not a list of names (or is missing) is no roles, not the old ones.
    user = oidc_login_complete(config=CONFIG, claims={"sub": "u1", "groups": {"idp-ops": 1}})
    assert names(user) == {"auditors"}


def test_a_new_user_gets_a_free_readable_username_and_no_password(roles):
    UserFactory(username="alice")

    user = oidc_login_complete(
        config=CONFIG, claims={"sub": "s-123", "preferred_username": "alice", "groups": []}
    )

    assert user.username == "alice-2"
    assert not user.has_usable_password()
    # The same issuer and subject is the same user, whatever name the provider sends now.
    again = oidc_login_complete(
        config=CONFIG, claims={"sub": "s-123", "preferred_username": "bob", "groups": []}
    )
    assert again.pk == user.pk


def test_the_same_subject_at_another_issuer_is_another_user(roles):
    first = oidc_login_complete(config=CONFIG, claims={"sub": "same"})
    other = OidcConfig(issuer="https://other.example.com", client_id="c", client_secret="s")

    assert oidc_login_complete(config=other, claims={"sub": "same"}).pk != first.pk
