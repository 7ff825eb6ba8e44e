"""The settings built from more than one value, for harness_site.settings: PostgreSQL's
connection options, the content security policy, the logging configuration. Nothing here
reads the environment: settings.py reads it and passes what it read."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured

# Content-Security-Policy (django-csp): scripts only from this site (Plotly and HTMX are
# served locally; no inline scripts or handlers in templates), no plugins, no framing.
# Styles allow inline because Plotly and HTMX set them.
CSP = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'", "'unsafe-inline'"],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}


def postgres_idle_timeout(options: str, *, seconds: float) -> str:
    """libpq's `options` with the server's idle_in_transaction_session_timeout added."""
    return " ".join(
        filter(
            None,
            [
                options,
                f"-c idle_in_transaction_session_timeout={int(seconds * 1000)}",
            ],
        )
    )


def logging_config(*, log_format: str, level: str) -> dict[str, Any]:
    """LOGGING: one console handler whose lines carry the loop's ids (LogContext), as `plain`
    text or `json` lines."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"ids": {"()": "harness_base.telemetry.LogContext"}},
        "formatters": {
            "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
            "json": {"()": "harness_base.telemetry.JsonFormatter"},
        },
        "handlers": {
            "console": {
                "class": "logging.StreamHandler",
                "formatter": log_format,
                "filters": ["ids"],
            }
        },
        "root": {"handlers": ["console"], "level": level},
        # The MCP SDK logs every HTTP request and session event at INFO.
        "loggers": {
            "django.db.backends": {"level": "WARNING"},
            "httpx2": {"level": "WARNING"},
            "mcp": {"level": "WARNING"},
        },
    }


def trace_url_template(template: str) -> str:
    """HARNESS_TRACE_URL_TEMPLATE checked: empty, or a URL with `{trace_id}` in it."""
    if template and "{trace_id}" not in template:
        raise ImproperlyConfigured(
            f"HARNESS_TRACE_URL_TEMPLATE={template!r}: must contain {{trace_id}}"
        )
    return template
