from __future__ import annotations

from typing import Any

from django import forms

from dashboard.selectors import SEARCH_MAX_LENGTH, time_zones


def choices_set(form: forms.Form, name: str, choices: list[tuple[str, str]]) -> None:
    """Give the form's own copy of the choice field `name` choices known only at run time."""
    field = form.fields[name]
    assert isinstance(field, forms.ChoiceField), field
    field.choices = choices


class AuditFilterForm(forms.Form):
    actor = forms.CharField(required=False, max_length=150)
    action = forms.CharField(required=False, max_length=50)
    task = forms.UUIDField(required=False)
    date_from = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))
    date_to = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))


class ReviewFilterForm(forms.Form):
    """The inbox's filters and sort, kept in the URL. A bad value falls back (to "any", or to
    the default sort and status) with a message saying so, never an error page."""

    status = forms.ChoiceField(required=False)
    tool = forms.CharField(required=False, max_length=100)
    rule = forms.CharField(required=False, max_length=100)
    risk = forms.ChoiceField(required=False)
    # A username, "me" or "nobody".
    claimed_by = forms.CharField(required=False, max_length=150)
    # "me": assigned to me or to one of my groups.
    assigned = forms.ChoiceField(required=False, choices=[("", "anyone"), ("me", "me")])
    task = forms.CharField(required=False, max_length=200)
    sort = forms.ChoiceField(required=False)

    def __init__(self, data: Any, *, statuses: list[str], risks: list[str], sorts: tuple[str, ...]):
        super().__init__(data)
        choices_set(self, "status", [(s, s) for s in statuses])
        choices_set(self, "risk", [("", "any"), *((r, r) for r in risks)])
        choices_set(self, "sort", [(s, s) for s in sorts])
        self.defaults = {"status": statuses[1], "sort": sorts[0]}

    def values(self) -> tuple[dict[str, str], list[str]]:
        """(the valid values, every field's default for a bad one; what fell back, in words)."""
        self.is_valid()
        values, problems = {}, []
        for name in self.fields:
            raw = self.data.get(name, "")
            if name in self.errors:
                problems.append(f"Ignored {name}={raw[:100]!r}: not a valid {name}.")
                values[name] = self.defaults.get(name, "")
            else:
                values[name] = self.cleaned_data.get(name) or self.defaults.get(name, "")
        return values, problems


class SearchForm(forms.Form):
    """The navigation's search box: a task id (or its first digits), a title, a review id."""

    q = forms.CharField(required=False, max_length=SEARCH_MAX_LENGTH)


class PreferencesForm(forms.Form):
    time_zone = forms.ChoiceField(required=False, label="Time zone")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        choices_set(
            self,
            "time_zone",
            [("", "The browser's time zone"), *((zone, zone) for zone in sorted(time_zones()))],
        )
