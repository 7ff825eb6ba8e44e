"""Who may manage people, and the people page's rows: each user's role, how they sign in
(a password or the identity provider, whose group map may own their role), their last sign-in
and their API tokens."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.db.models import Count, Max, Prefetch, Q

from accounts.config import MAPPABLE_ROLES
from accounts.models import SsoIdentity
from accounts.oidc import oidc_config
from tasks.selectors import user_can_operate

# The roles, most rights first (harness_base.roles), with the word the pages use.
ROLE_LABELS = {"operators": "operator", "creators": "creator", "viewers": "viewer"}
assert tuple(ROLE_LABELS) == MAPPABLE_ROLES[: len(ROLE_LABELS)]


def user_can_manage_people(user: User | None) -> bool:
    """Superusers, and operators with the admin flag (`is_staff`), manage people."""
    if not (user is not None and user.is_authenticated and user.is_active):
        return False
    return bool(user.is_superuser or (user.is_staff and user_can_operate(user)))


def role_of(user: User) -> str:
    """The user's role group with the most rights, "" for none."""
    names = {g.name for g in user.groups.all()}
    return next((role for role in ROLE_LABELS if role in names), "")


def role_mapped_by_provider(user: User) -> bool:
    """Whether the identity provider owns this user's role: single sign-on with a group map
    is on and the user signs in there (their role is set from the groups claim at every
    sign-in, accounts.flows.oidc_login), so it may not be changed here."""
    config = oidc_config()
    if config is None or not config.group_map:
        return False
    return SsoIdentity.objects.filter(user_id=user.pk, issuer=config.issuer).exists()


def admins_active(*, lock: bool = False) -> list[User]:
    """The active users who may manage people. `lock`: every active superuser and staff row
    is locked (FOR UPDATE), so two changes that would each leave the other admin as the last
    one run one after the other and the second sees the first."""
    qs = (
        get_user_model()
        .objects.filter(is_active=True)
        .filter(Q(is_superuser=True) | Q(is_staff=True))
    )
    if lock:
        qs = qs.select_for_update().order_by("pk")
    return [user for user in qs if user_can_manage_people(user)]


@dataclass(frozen=True)
class PersonRow:
    user: User
    role: str
    role_label: str
    is_admin: bool
    sign_in: str  # "sso" or "password"
    sso_pending: bool  # an SSO identity made ahead of its first sign-in
    role_from_provider: bool
    tokens: int
    token_last_used: datetime | None


def people_list() -> list[PersonRow]:
    """Every user, active first, then by username: a few queries whatever the number."""
    config = oidc_config()
    mapped_issuer = config.issuer if config is not None and config.group_map else None
    users = (
        get_user_model()
        .objects.select_related("sso_identity")
        .prefetch_related(Prefetch("groups"))
        .annotate(
            tokens=Count("api_tokens", filter=Q(api_tokens__revoked=False)),
            token_last_used=Max("api_tokens__last_used_at"),
        )
        .order_by("-is_active", "username")
    )
    rows = []
    for user in users:
        identity = getattr(user, "sso_identity", None)
        role = role_of(user)
        rows.append(
            PersonRow(
                user=user,
                role=role,
                role_label="superuser" if user.is_superuser else ROLE_LABELS.get(role, "none"),
                is_admin=bool(user.is_staff),
                sign_in="sso" if identity is not None else "password",
                sso_pending=identity is not None and identity.last_login_at is None,
                role_from_provider=identity is not None and identity.issuer == mapped_issuer,
                tokens=user.tokens,
                token_last_used=user.token_last_used,
            )
        )
    return rows
