"""The web helpers the apps' `api.py` and `views.py` share: access decorators (`access`), API
authentication (`api_auth`), request and response helpers (`api_utils`, `inputs`, `htmx`,
`pagination`, `downloads`, `csv_export`) and the not-found handling (`notfound`). They sit with
the core they depend on (HackSoft's styleguide keeps API mixins in a core app), so nothing in an
app reaches up into `harness_site`."""
