"""Forms for the task pages: the list's filters (kept in the URL) and bulk actions."""

from __future__ import annotations

import uuid
from typing import Any

from django import forms

from dashboard.forms import choices_set
from tasks.selectors import TASK_SORTS
from tasks.states import TaskStatus

BULK_LIMIT = 500


class TaskFilterForm(forms.Form):
    status = forms.MultipleChoiceField(choices=TaskStatus.choices, required=False)
    tool = forms.CharField(required=False, max_length=100)
    # Named as BaseForm's error-list class, which it does not replace: the form's metaclass
    # takes declared fields off the class (the stubs do not model that).
    error_class = forms.CharField(  # type: ignore[assignment]  # a field, not BaseForm's
        required=False,
        max_length=50,
    )
    fingerprint = forms.CharField(required=False, max_length=16)
    creator = forms.CharField(required=False, max_length=150)
    created_from = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))
    created_to = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))
    finished_from = forms.DateTimeField(required=False, widget=forms.HiddenInput)
    finished_to = forms.DateTimeField(required=False, widget=forms.HiddenInput)
    q = forms.CharField(required=False, max_length=200)
    # Not a filter, but kept in the URL with them; an unknown sort is dropped like a bad filter.
    sort = forms.ChoiceField(choices=[(s, s) for s in TASK_SORTS], required=False)

    def filters(self) -> dict[str, Any]:
        """Keyword arguments for tasks.selectors.tasks_list (invalid fields are dropped), the
        sort included."""
        self.is_valid()
        data = getattr(self, "cleaned_data", {})
        return {name: data[name] for name in self.fields if data.get(name)}


class UUIDListField(forms.Field):
    widget = forms.MultipleHiddenInput

    def to_python(self, value: Any) -> list[uuid.UUID]:
        try:
            return [uuid.UUID(str(v)) for v in value or []]
        except ValueError:
            raise forms.ValidationError("not a task id") from None


class BulkActionForm(forms.Form):
    """Bulk cancel / retry: either the ticked ids, or every task matching the list's filters
    (`select=matching`), at most BULK_LIMIT at once."""

    action = forms.ChoiceField()
    select = forms.ChoiceField(
        choices=[("ids", "ticked tasks"), ("matching", "all matching")], required=False
    )
    ids = UUIDListField(required=False)
    confirmed = forms.BooleanField(required=False)
    reason = forms.CharField(required=False, max_length=500)
    next = forms.CharField(required=False, max_length=2000)

    def __init__(self, *args: Any, actions: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        choices_set(self, "action", [(a, a) for a in actions])

    def clean_next(self) -> str:
        # Only ever redirect back into the task list.
        target = self.cleaned_data.get("next") or ""
        return target if target.startswith("/tasks/") else "/tasks/"
