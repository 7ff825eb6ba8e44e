from __future__ import annotations

from django.urls import path

from accounts import people_views

app_name = "people"

urlpatterns = [
    path("people/", people_views.people, name="list"),
    path("people/invite/", people_views.invite, name="invite"),
    path("people/<int:user_id>/role/", people_views.role, name="role"),
    path("people/<int:user_id>/deactivate/", people_views.deactivate, name="deactivate"),
]
