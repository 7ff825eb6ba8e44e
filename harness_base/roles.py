"""The roles (DESIGN §6): `operators` create tasks, decide reviews and cancel, retry and roll
back tasks; `creators` create tasks (running code on the workers) and read; `viewers` only
read. A logged-in user in none of them sees nothing. All are plain Django groups, so admins
manage membership in the admin site."""

from __future__ import annotations

from django.contrib.auth.models import Group, Permission

ROLE_PERMISSIONS: dict[str, tuple[str, ...]] = {
    "operators": (
        "tasks.view_task",
        "tasks.add_task",
        "tasks.operate_task",
        "review.decide_review",
    ),
    "creators": ("tasks.view_task", "tasks.add_task"),
    "viewers": ("tasks.view_task",),
}


def roles_ensure() -> dict[str, Group]:
    """Create the groups and grant their permissions; safe to run any number of times.
    Needs the permissions that `migrate` creates."""
    groups: dict[str, Group] = {}
    for name, perms in ROLE_PERMISSIONS.items():
        group, _ = Group.objects.get_or_create(name=name)
        for dotted in perms:
            app_label, codename = dotted.split(".", 1)
            group.permissions.add(
                Permission.objects.get(content_type__app_label=app_label, codename=codename)
            )
        groups[name] = group
    return groups
