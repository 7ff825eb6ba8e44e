from __future__ import annotations

from django.urls import path

from accounts import views

urlpatterns = [
    path("login/", views.LoginView.as_view(), name="login"),
    path("oidc/login/", views.SsoStart.as_view(), name="oidc_authentication_init"),
    path("invite/<uidb64>/<token>/", views.InviteConfirmView.as_view(), name="invite_confirm"),
    path("oidc/callback/", views.SsoCallback.as_view(), name="oidc_authentication_callback"),
]
