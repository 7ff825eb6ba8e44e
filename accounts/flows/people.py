"""Managing people (/people/): invite, change a role or the admin flag, deactivate. Each is
done by someone who may manage people (accounts.selectors.user_can_manage_people), checked here
whatever the caller, and audited in the same transaction.

What no one may do here: raise their own rights; touch a superuser without being one; change a
role the identity provider's group map owns (it would be overwritten at the next sign-in, and
the provider is where that person's access is decided); leave no active admin. Every refusal
is a `PeopleError` naming the field."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, User
from django.contrib.sessions.models import Session
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Field
from django.utils import timezone

from accounts.invites import invite_path
from accounts.models import SsoIdentity
from accounts.oidc import oidc_config
from accounts.selectors import (
    ROLE_LABELS,
    admins_active,
    role_mapped_by_provider,
    role_of,
    user_can_manage_people,
)
from harness_base.roles import roles_ensure
from tasks.services import api_tokens_revoke, audit_record

SIGN_IN_METHODS = ("password", "sso")


class PeopleError(Exception):
    """A refused change: `status` 403 (not allowed), 404, 409 (conflicts with the state) or
    422 (bad input), `field` the input it is about ("" for none)."""

    def __init__(self, message: str, *, field: str = "", status: int = 422) -> None:
        super().__init__(message)
        self.message, self.field, self.status = message, field, status


@dataclass(frozen=True)
class Invited:
    user: User
    # The one-time set-password link's path (None for an identity of the provider).
    link_path: str | None


def _manager(by: User) -> None:
    if not user_can_manage_people(by):
        raise PeopleError(
            "only operators with the admin flag, or superusers, manage people", status=403
        )


def _rank(role: str, admin: bool) -> tuple[int, int]:
    roles = list(ROLE_LABELS)
    return (len(roles) - roles.index(role) if role in roles else 0, int(admin))


def _role_groups_set(user: User, role: str) -> None:
    groups = {g.name: g for g in Group.objects.filter(name__in=ROLE_LABELS)}
    if len(groups) < len(ROLE_LABELS):
        groups = roles_ensure()
    user.groups.remove(*(g for name, g in groups.items() if name in ROLE_LABELS and name != role))
    if role:
        user.groups.add(groups[role])


def _target(*, by: User, user_id: int) -> User:
    """The person to change, locked, after the admins were (see admins_active)."""
    admins_active(lock=True)
    user = get_user_model().objects.select_for_update().filter(pk=user_id).first()
    if user is None:
        raise PeopleError("no such person", status=404)
    if user.is_superuser and not by.is_superuser:
        raise PeopleError("only a superuser changes a superuser's account", status=403)
    return user


def _last_admin_guard(*, user: User, field: str) -> None:
    """Refuse when `user`, about to lose the right to manage people, is the last who has it
    (the admins' rows are locked by _target)."""
    if not any(admin.pk != user.pk for admin in admins_active()):
        raise PeopleError(
            "this is the last active admin: make another admin first", field=field, status=409
        )


def _valid(**values: str) -> None:
    model = get_user_model()
    for name, value in values.items():
        field = model._meta.get_field(name)
        assert isinstance(field, Field), field  # the user model's own columns
        try:
            field.clean(value, None)
        except ValidationError as exc:
            raise PeopleError(" ".join(exc.messages), field=name) from None


def person_invite(
    *,
    by: User,
    username: str,
    email: str = "",
    role: str,
    admin: bool = False,
    sign_in: str = "password",
    sso_subject: str = "",
) -> Invited:
    """A new active account with `role` (a role group name, "" for none) and the admin flag.
    `password`: it has no password until its one-time link sets one. `sso`: it signs in at the
    configured provider as `sso_subject` (its `sub`) — with a group map, its role then comes
    from there and none is given here."""
    _manager(by)
    _valid(username=username, email=email)
    if role and role not in ROLE_LABELS:
        raise PeopleError(f"expected one of {', '.join(ROLE_LABELS)}", field="role")
    if sign_in not in SIGN_IN_METHODS:
        raise PeopleError("expected password or sso", field="sign_in")
    config = oidc_config()
    if sign_in == "password" and not settings.HARNESS_LOCAL_LOGIN:
        raise PeopleError(
            "password sign-in is off (HARNESS_LOCAL_LOGIN): invite an identity of the provider",
            field="sign_in",
        )
    subject = sso_subject.strip()
    # The provider's issuer for an identity of the provider (`sso`); None for a password.
    issuer = None
    if sign_in == "sso":
        if config is None:
            raise PeopleError("single sign-on is not configured", field="sign_in")
        issuer = config.issuer
        if not 0 < len(subject) <= 255 or "\x00" in subject:
            raise PeopleError(
                "the provider's subject (sub), 1 to 255 characters", field="sso_subject"
            )
        if config.group_map:
            role = ""
    try:
        with transaction.atomic():
            # No password (an unusable one) until the link sets it.
            user = get_user_model().objects.create_user(username, email=email, is_staff=admin)
            _role_groups_set(user, role)
            if issuer is not None:
                SsoIdentity.objects.create(user=user, issuer=issuer, subject=subject)
            audit_record(
                user=by,
                action="person_invite",
                target=username[:200],
                reason=f"signs in with {'the provider' if sign_in == 'sso' else 'a password'}",
                after={"role": role or None, "admin": admin, "sign_in": sign_in},
            )
    except IntegrityError:
        if get_user_model().objects.filter(username=username).exists():
            raise PeopleError(
                "an account with this username exists", field="username", status=409
            ) from None
        raise PeopleError(
            "another account signs in as this subject", field="sso_subject", status=409
        ) from None
    return Invited(user=user, link_path=invite_path(user=user) if sign_in == "password" else None)


def person_role_set(*, by: User, user_id: int, role: str, admin: bool) -> User:
    """Give the person `role` (a role group name, "" for none) and the admin flag."""
    _manager(by)
    if role and role not in ROLE_LABELS:
        raise PeopleError(f"expected one of {', '.join(ROLE_LABELS)}", field="role")
    with transaction.atomic():
        user = _target(by=by, user_id=user_id)
        before_role, before_admin = role_of(user), bool(user.is_staff)
        if role != before_role and role_mapped_by_provider(user):
            raise PeopleError(
                "this role comes from the identity provider's groups: change it there",
                field="role",
                status=403,
            )
        if user.pk == by.pk and _rank(role, admin) > _rank(before_role, before_admin):
            raise PeopleError("nobody raises their own role", field="role", status=403)
        if (role, admin) == (before_role, before_admin):
            return user
        was_admin = user_can_manage_people(user)
        _role_groups_set(user, role)
        user.is_staff = admin
        user.save(update_fields=["is_staff"])
        user = get_user_model().objects.get(pk=user.pk)  # fresh: no cached groups
        if was_admin and not user_can_manage_people(user):
            _last_admin_guard(user=user, field="admin" if before_admin != admin else "role")
        audit_record(
            user=by,
            action="person_role",
            target=user.get_username()[:200],
            before={"role": before_role or None, "admin": before_admin},
            after={"role": role or None, "admin": admin},
        )
    return user


def _sessions_end(user: User) -> int:
    """Delete every stored session signed in as `user` (the database session store keeps
    the user id inside the signed data, so each live one is read)."""
    ended = []
    for session in Session.objects.filter(expire_date__gt=timezone.now()).iterator():
        if session.get_decoded().get("_auth_user_id") == str(user.pk):
            ended.append(session.pk)
    Session.objects.filter(pk__in=ended).delete()
    return len(ended)


def person_deactivate(*, by: User, user_id: int) -> User:
    """Deactivate the person: no sign-in from now, their sessions ended and their API tokens
    revoked in the same transaction (the token check also refuses an inactive user's)."""
    _manager(by)
    with transaction.atomic():
        user = _target(by=by, user_id=user_id)
        if not user.is_active:
            raise PeopleError("already deactivated", status=409)
        if user_can_manage_people(user):
            _last_admin_guard(user=user, field="")
        user.is_active = False
        user.save(update_fields=["is_active"])
        tokens = api_tokens_revoke(user=user)
        sessions = _sessions_end(user)
        audit_record(
            user=by,
            action="person_deactivate",
            target=user.get_username()[:200],
            before={"active": True},
            after={"active": False, "api_tokens_revoked": tokens, "sessions_ended": sessions},
        )
    return user
