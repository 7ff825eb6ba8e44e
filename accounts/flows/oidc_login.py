"""The end of a single sign-on: the verified claims become a user, matched by (issuer, sub),
whose roles are set from the groups claim through HARNESS_OIDC_GROUP_MAP — at every login, so
a group removed in the provider is a role removed at the next one (without a group map, logins
leave the roles an admin gave on /people/). Groups other than the three
roles are never touched. The login and the mapping it applied are audited. The account's email
is the provider's only when the provider says `email_verified: true` (verified_email)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, User
from django.db import IntegrityError, transaction
from django.db.models import CharField
from django.utils import timezone

from accounts.config import MAPPABLE_ROLES, OidcConfig
from accounts.models import SsoIdentity
from harness_base.roles import roles_ensure
from tasks.services import audit_record

# A groups claim is bounded by the token's size; what is stored of it is bounded here.
STORED_GROUPS_MAX = 200


def claimed_groups(value: Any) -> list[str]:
    """The groups claim as a list of names (a single string is one group; anything else,
    none: an unreadable claim grants nothing)."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return []
    return sorted({g for g in value if isinstance(g, str)})


def roles_for(*, config: OidcConfig, groups: list[str]) -> list[str]:
    return sorted({config.group_map[g] for g in groups if g in config.group_map})


def _username_free(claims: Mapping[str, Any]) -> str:
    """A readable, unused username (display only: logins never match by it)."""
    user_model = get_user_model()
    field = user_model._meta.get_field(user_model.USERNAME_FIELD)
    # The username is a bounded text column (Django's User: 150 characters).
    assert isinstance(field, CharField) and field.max_length is not None, field
    base = next(
        (
            str(claims[k]).strip()
            for k in ("preferred_username", "email", "sub")
            if isinstance(claims.get(k), str) and claims[k].strip()
        ),
        "sso-user",
    )[: field.max_length - 8]
    name, number = base, 1
    while user_model.objects.filter(**{user_model.USERNAME_FIELD: name}).exists():
        number += 1
        name = f"{base}-{number}"
    return name


def verified_email(claims: Mapping[str, Any]) -> str:
    """The email the provider vouches for: `email` only with `email_verified: true` (some
    providers send the string "true"), else "". People are matched to their Slack and email
    identities by this address (review.identities), so an address anyone can type
    into their provider account must never be stored."""
    email, verified = claims.get("email"), claims.get("email_verified")
    if not isinstance(email, str) or not 0 < len(email.strip()) <= 254 or "\x00" in email:
        return ""
    if verified is True or (isinstance(verified, str) and verified.lower() == "true"):
        return email.strip()
    return ""


def _email_link(*, user: User, claims: Mapping[str, Any]) -> None:
    """Keep the account's email what the provider verifies: a verified address is stored
    (linked); an address the provider does not verify is cleared if the account holds it
    (stored before this check existed, or unverified since), and never stored. Audited."""
    claimed, verified = claims.get("email"), verified_email(claims)
    if verified:
        after = verified
    elif isinstance(claimed, str) and user.email and user.email.lower() == claimed.lower():
        after = ""
    else:
        return
    if after == user.email:
        return
    before = user.email
    user.email = after
    user.save(update_fields=["email"])
    audit_record(
        user=user,
        action="sso_email",
        target=user.get_username()[:200],
        reason="the provider verifies it" if after else "the provider does not verify it",
        before={"email": before or None},
        after={"email": after or None},
    )


def _identity_create(*, config: OidcConfig, claims: Mapping[str, Any]) -> SsoIdentity:
    user_model = get_user_model()
    email = verified_email(claims)
    try:
        with transaction.atomic():
            user = user_model.objects.create_user(_username_free(claims), email=email[:254])
            # Signs in through the provider only; never with a password.
            user.set_unusable_password()
            user.save(update_fields=["password"])
            return SsoIdentity.objects.create(
                user=user,
                issuer=config.issuer,
                subject=claims["sub"],
                last_login_at=timezone.now(),
            )
    except IntegrityError:
        # The same person's first login, twice at once: the other one created the identity.
        return SsoIdentity.objects.select_for_update().get(
            issuer=config.issuer, subject=claims["sub"]
        )


def oidc_login_complete(*, config: OidcConfig, claims: Mapping[str, Any]) -> User:
    """The user for verified ID token claims (`sub` required), with the roles the groups
    claim maps to now."""
    groups = claimed_groups(claims.get(config.groups_claim))
    roles = roles_for(config=config, groups=groups)
    with transaction.atomic():
        # Locked: two logins of one person apply their mappings one after the other.
        identity = (
            SsoIdentity.objects.select_for_update()
            .filter(issuer=config.issuer, subject=claims["sub"])
            .first()
        ) or _identity_create(config=config, claims=claims)
        user = identity.user
        _email_link(user=user, claims=claims)
        role_groups = {g.name: g for g in Group.objects.filter(name__in=MAPPABLE_ROLES)}
        if len(role_groups) < len(MAPPABLE_ROLES):
            role_groups = roles_ensure()
        before = sorted(user.groups.filter(name__in=MAPPABLE_ROLES).values_list("name", flat=True))
        # No group map: roles are given on /people/ (accounts.flows.people), not by logins.
        after = roles if config.group_map else before
        if config.group_map:
            user.groups.remove(*(g for name, g in role_groups.items() if name not in roles))
            user.groups.add(*(role_groups[name] for name in roles))
        identity.last_login_at = timezone.now()
        identity.groups = groups[:STORED_GROUPS_MAX]
        identity.roles = roles
        identity.save(update_fields=["last_login_at", "groups", "roles"])
        audit_record(
            user=user,
            action="sso_login",
            target=f"{config.issuer} {claims['sub']}"[:200],
            reason=f"roles from the {config.groups_claim!r} claim"
            if config.group_map
            else "roles kept: no group map",
            before={"roles": before},
            after={"roles": after, "groups": groups[:STORED_GROUPS_MAX]},
        )
    return user
