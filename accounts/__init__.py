"""Sign-in: single sign-on through an OpenID Connect provider (mozilla-django-oidc, with the
verification and discovery it lacks) and the local password login it can turn off."""
