"""`{% load people %}`: `user|manages_people`, for the layout's "People" link (the page itself
checks again, accounts.people_views)."""

from __future__ import annotations

from django import template
from django.contrib.auth.models import User

from accounts.selectors import user_can_manage_people

register = template.Library()


@register.filter
def manages_people(user: User | None) -> bool:
    return user_can_manage_people(user)
