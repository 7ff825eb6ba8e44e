"""Every model has an admin; the append-only ones cannot be edited there."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.contrib import admin

from tests.factories import TaskFactory

pytestmark = pytest.mark.django_db

APPS = ("tasks", "checkpoints", "review")
# Kept out of the admin on purpose, with the reason.
NOT_IN_ADMIN = {
    # A template is its creator's alone, superusers included (it may hold private workspace
    # files): tasks.selectors.templates.access_template.
    "TaskTemplate",
}


def test_every_model_of_the_harness_apps_is_in_the_admin():
    """Registered, or shown inline on the admin page of the model it belongs to."""
    inline = {i.model for model_admin in admin.site._registry.values() for i in model_admin.inlines}
    missing = [
        m.__name__
        for app in APPS
        for m in apps.get_app_config(app).get_models()
        if m not in admin.site._registry and m not in inline and m.__name__ not in NOT_IN_ADMIN
    ]
    assert missing == []


@pytest.mark.parametrize(
    "model",
    [m for app in APPS for m in apps.get_app_config(app).get_models() if m in admin.site._registry],
    ids=lambda m: m._meta.label,
)
def test_admin_changelist_renders_for_a_superuser(as_user, admin_user, model):
    TaskFactory()
    url = f"/admin/{model._meta.app_label}/{model._meta.model_name}/"
    assert as_user(admin_user).get(url).status_code == 200


def test_tasks_events_and_audit_are_read_only_in_admin(rf, admin_user):
    from tasks.models import AuditEntry, Task, TaskEvent

    request = rf.get("/")
    request.user = admin_user
    for model in (Task, TaskEvent, AuditEntry):
        model_admin = admin.site._registry[model]
        assert not model_admin.has_change_permission(request)
        assert not model_admin.has_delete_permission(request)
