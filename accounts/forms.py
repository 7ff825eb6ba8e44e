"""The people page's forms: they only parse; accounts.flows.people decides what is allowed."""

from __future__ import annotations

from django import forms

from accounts.flows.people import SIGN_IN_METHODS
from accounts.selectors import ROLE_LABELS

ROLE_CHOICES = [("", "none"), *ROLE_LABELS.items()]


class InviteForm(forms.Form):
    username = forms.CharField(max_length=150)
    email = forms.EmailField(required=False, max_length=254)
    role = forms.ChoiceField(choices=ROLE_CHOICES, required=False)
    admin = forms.BooleanField(required=False)
    sign_in = forms.ChoiceField(choices=[(m, m) for m in SIGN_IN_METHODS], initial="password")
    sso_subject = forms.CharField(required=False, max_length=255)


class RoleForm(forms.Form):
    role = forms.ChoiceField(choices=ROLE_CHOICES, required=False)
    admin = forms.BooleanField(required=False)


def form_problem(form: forms.Form) -> tuple[str, str]:
    """The first problem of an invalid form: (field, message)."""
    field, errors = next(iter(form.errors.items()))
    return field if field != "__all__" else "", " ".join(str(message) for message in errors)
