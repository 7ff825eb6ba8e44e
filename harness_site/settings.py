"""The one settings module. Production differs from development only by environment."""

from __future__ import annotations

import os
from pathlib import Path

import dj_database_url

from accounts.config import local_login_checked, oidc_config_from_env
from harness_base.env import (
    DEFAULT_SECRET_KEY,
    env_bool,
    env_choice,
    env_float,
    env_int,
    env_list,
    env_networks,
    env_str,
)
from harness_base.queues import WORKER_QUEUES
from harness_site.settings_helpers import CSP as _CSP
from harness_site.settings_helpers import logging_config, postgres_idle_timeout, trace_url_template

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = Path(env_str("HARNESS_DATA_DIR", str(BASE_DIR / ".data")))

# The default only suits `harness up` on loopback: `harness up --host` beyond loopback refuses
# it and `manage.py check --deploy` reports it (harness.E001).
SECRET_KEY = env_str("SECRET_KEY", DEFAULT_SECRET_KEY)
DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_rq",
    # Swagger UI's JavaScript and CSS, served from the installed package (no CDN).
    "ninja",
    "tasks",
    "checkpoints",
    "review",
    "agent",
    "multiagent",
    "cases",
    "dashboard",
    "accounts",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    # WhiteNoise's, starting beside a collectstatic into the same folder (harness_site.staticfiles).
    "harness_site.staticfiles.WhiteNoiseMiddleware",
    # Before everything that writes the page: it compresses what they produced (HTML only;
    # tasks/web/compression.py says why the CSRF token stays safe).
    "tasks.web.compression.HtmlGZipMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "tasks.web.inputs.InputGuardMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "tasks.web.notfound.NotFoundMiddleware",
]

ROOT_URLCONF = "harness_site.urls"
WSGI_APPLICATION = "harness_site.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "review.context_processors.navigation",
                "dashboard.context_processors.preferences",
            ],
            "builtins": ["harness_site.filters"],
        },
    },
]

# --- Database -----------------------------------------------------------------------------
# SQLite (WAL, IMMEDIATE transactions so writers queue instead of failing) when DATABASE_URL
# is unset; PostgreSQL in production and in the test suite.
_default_sqlite = f"sqlite:///{DATA_DIR / 'harness.sqlite3'}"
DATABASES = {"default": dj_database_url.parse(env_str("DATABASE_URL", _default_sqlite))}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 30,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
else:
    DATABASES["default"]["CONN_MAX_AGE"] = env_int("DATABASE_CONN_MAX_AGE", 60, minimum=0)
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
    # A process cut off from PostgreSQL in the middle of a transaction (a worker host behind a
    # partition, frozen, powered off) leaves the server waiting for it with its locks held:
    # PostgreSQL notices a silent client only through TCP keepalives, two hours by default,
    # and until then every sweep and run that needs one of those rows waits. The server ends
    # such a session once it has been idle in a transaction this long (0: never). No
    # transaction of the harness waits on anything outside the database while open.
    HARNESS_DB_IDLE_IN_TRANSACTION_S = env_float("HARNESS_DB_IDLE_IN_TRANSACTION_S", 60.0)
    if HARNESS_DB_IDLE_IN_TRANSACTION_S > 0:
        _options = DATABASES["default"].setdefault("OPTIONS", {})
        _options["options"] = postgres_idle_timeout(
            _options.get("options", ""), seconds=HARNESS_DB_IDLE_IN_TRANSACTION_S
        )
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Redis / RQ ---------------------------------------------------------------------------
# Unset REDIS_URL means the embedded Redis that `harness up` starts on this unix socket.
REDIS_URL = env_str("REDIS_URL", f"unix://{DATA_DIR / 'redis.sock'}")
# Every queue, in the order a worker serves them (harness_base/queues.py): `resume` first.
HARNESS_QUEUES = WORKER_QUEUES
RQ_QUEUES = {name: {"URL": REDIS_URL, "DEFAULT_TIMEOUT": -1} for name in HARNESS_QUEUES}
# A job enqueued inside a transaction is sent to Redis only once that transaction commits.
# The worker class imports the agent loop once, before it forks a work horse per job.
RQ = {"COMMIT_MODE": "on_db_commit", "WORKER_CLASS": "agent.worker.Worker"}
RQ_SHOW_ADMIN_LINK = True

# --- Harness ------------------------------------------------------------------------------
HARNESS_CONFIG_FILE = Path(env_str("HARNESS_CONFIG", str(BASE_DIR / "harness.yaml")))
# This instance's own: two checkouts never share (or collide on) a task's directory. Tools
# reach nothing beyond their workspace: the sandbox mounts only it, and the file tools walk
# paths from its descriptor without following links (docs/sandbox.md).
HARNESS_WORKSPACE_ROOT = Path(env_str("HARNESS_WORKSPACE_ROOT", str(DATA_DIR / "workspaces")))
HARNESS_ENABLE_TEST_TOOLS = env_bool("HARNESS_ENABLE_TEST_TOOLS", False)
# Where snapshot blobs live: a dotted path to a checkpoints.blobstore.BlobStore subclass.
HARNESS_BLOB_STORE = env_str("HARNESS_BLOB_STORE", "checkpoints.blobstore.DatabaseBlobStore")
HARNESS_BLOB_DIR = Path(env_str("HARNESS_BLOB_DIR", str(DATA_DIR / "blobs")))
HARNESS_LEDGER_DIR = Path(env_str("HARNESS_LEDGER_DIR", str(DATA_DIR / "ledger")))
# The file browser's download of a whole tree (checkpoints.files): refused over these bounds.
HARNESS_ARCHIVE_MAX_BYTES = env_int("HARNESS_ARCHIVE_MAX_BYTES", 256 * 1024 * 1024, minimum=0)
HARNESS_ARCHIVE_MAX_FILES = env_int("HARNESS_ARCHIVE_MAX_FILES", 10_000, minimum=0)
# Dotted module paths whose @tool-decorated functions join the registry at start-up.
HARNESS_TOOL_MODULES = env_list("HARNESS_TOOL_MODULES", [])
# The agent kinds whose runners (and SDKs: seconds of imports each) a worker loads before its
# first job: `registered` (the kinds harness.yaml registers agents of), `none`, or a list of
# kinds (`langgraph,pydantic-ai,openai-agents`). A kind not loaded is imported by the job
# that needs it, before the task is taken (agent.jobs).
HARNESS_WORKER_PRELOAD = env_list("HARNESS_WORKER_PRELOAD", ["registered"])
# Origins `http_request` may call: `scheme://host[:port]` (`*.example.com` for subdomains); a
# bare host means https on 443 and http on 80 only.
HARNESS_HTTP_ALLOWLIST = env_list("HARNESS_HTTP_ALLOWLIST", [])
# Networks (CIDR) `http_request` may reach although they are loopback, private or link-local.
HARNESS_HTTP_ALLOW_NETWORKS = [str(net) for net in env_networks("HARNESS_HTTP_ALLOW_NETWORKS")]
# `/metrics` (dashboard/metrics.py, README "Metrics and alerts"): with HARNESS_METRICS_TOKEN a
# scrape must send `Authorization: Bearer <token>`; with HARNESS_METRICS_ALLOW (CIDRs) it must come
# from one of those networks (REMOTE_ADDR: the proxy's, behind one); with both, both. Neither
# set: /metrics answers 403 (fail closed).
HARNESS_METRICS_TOKEN = env_str("HARNESS_METRICS_TOKEN", "")
HARNESS_METRICS_ALLOW = env_networks("HARNESS_METRICS_ALLOW")
# The command sandbox (agent/tools/sandbox/): `bwrap` (bubblewrap from .venv, HARNESS_BWRAP,
# or PATH) or `off`, which runs run_command UNSANDBOXED as the worker's user (logged loudly).
HARNESS_SANDBOX = env_choice("HARNESS_SANDBOX", ("bwrap", "off"), "bwrap")
HARNESS_BWRAP = env_str("HARNESS_BWRAP", "")
# Durable execution (agent/sweep/): a running task heartbeats every HARNESS_HEARTBEAT_S; the
# sweep calls it stalled once its heartbeat is older than HARNESS_STALE_AFTER_S and redispatches
# it at most HARNESS_MAX_REDISPATCHES times; queued tasks whose RQ job vanished (a Redis restart
# or flush) are re-enqueued once they have waited HARNESS_REQUEUE_GRACE_S.
HARNESS_HEARTBEAT_S = env_float("HARNESS_HEARTBEAT_S", 5.0)
# An RQ worker heartbeats at least this often (idle: every TTL - 15 s; busy: every 30 s); /ops/
# shows one not heard from for longer as dead, and the sweep unregisters it after twice that.
HARNESS_WORKER_TTL_S = env_int("HARNESS_WORKER_TTL_S", 60, minimum=20)
HARNESS_WORKER_DEAD_SHOWN_S = env_float("HARNESS_WORKER_DEAD_SHOWN_S", 60.0)
HARNESS_STALE_AFTER_S = env_float("HARNESS_STALE_AFTER_S", 2 * HARNESS_HEARTBEAT_S)
# A work horse not heard from within its current phase's timeout plus this grace is killed by its
# worker and the task redispatched (tasks/beacon.py), not held until the job's hard timeout.
HARNESS_HORSE_GRACE_S = env_float("HARNESS_HORSE_GRACE_S", 60.0)
HARNESS_SWEEP_INTERVAL_S = env_float("HARNESS_SWEEP_INTERVAL_S", 5.0)
# A run that lost its database waits this long for it, then gives its task back (runtime.lease).
HARNESS_DB_RECONNECT_S = env_float("HARNESS_DB_RECONNECT_S", 60.0)
# A worker's Redis commands retry through a lost connection for HARNESS_REDIS_RETRY_S before it
# exits (agent.worker.redis_retry); on SIGTERM, its running task has HARNESS_DRAIN_S to reach a
# step boundary and be given back (agent.runtime.drain).
HARNESS_REDIS_RETRY_S = env_float("HARNESS_REDIS_RETRY_S", 30.0)
HARNESS_DRAIN_S = env_float("HARNESS_DRAIN_S", 30.0, minimum=0)
# The retention job the sweep runs on the schedule of harness.yaml's `retention` (a dotted path:
# checkpoints build on tasks, so the sweep names the job instead of importing it).
HARNESS_RETENTION_JOB = env_str("HARNESS_RETENTION_JOB", "checkpoints.retention.retention_run")
HARNESS_MAX_REDISPATCHES = env_int("HARNESS_MAX_REDISPATCHES", 3, minimum=0)
HARNESS_REQUEUE_GRACE_S = env_float("HARNESS_REQUEUE_GRACE_S", 10.0)
# A task that finds `max_concurrent_tasks` already running is put back after this delay.
HARNESS_CAPACITY_RETRY_S = env_float("HARNESS_CAPACITY_RETRY_S", 2.0)
# Model defaults for `{"kind": "openai"}` tasks. The API key is read from the environment
# variable bound to the endpoint (OPENAI_API_KEY for OPENAI_BASE_URL) when the call is made;
# it is never stored in a spec, a checkpoint or an event.
HARNESS_MODEL = env_str("HARNESS_MODEL", "")
OPENAI_BASE_URL = env_str("OPENAI_BASE_URL", "https://api.openai.com/v1").rstrip("/")
# Base URLs a task's own `model.base_url` may name besides OPENAI_BASE_URL, each bound to the
# variable holding its key: `URL=VAR` (key in $VAR), bare `URL` (no key), `*` (any URL, never a
# key). A key only ever goes to the endpoint it is bound to (agent/llm/openai.py).
HARNESS_MODEL_ENDPOINTS = env_list("HARNESS_MODEL_ENDPOINTS", [])
# The address people open links at (notifications, API `url`); `harness up` sets it from
# --host/--port when unset.
HARNESS_BASE_URL = env_str("HARNESS_BASE_URL", "http://127.0.0.1:8000")
# Notifications (review/notifications/): a failed send is retried after
# HARNESS_NOTIFY_RETRY_S, doubling each time up to an hour, HARNESS_NOTIFY_MAX_ATTEMPTS times in
# all; a channel whose last HARNESS_NOTIFY_FAILING_AFTER attempts failed is flagged on /ops/.
HARNESS_NOTIFY_RETRY_S = env_float("HARNESS_NOTIFY_RETRY_S", 30.0)
HARNESS_NOTIFY_MAX_ATTEMPTS = env_int("HARNESS_NOTIFY_MAX_ATTEMPTS", 6, minimum=1)
HARNESS_NOTIFY_FAILING_AFTER = env_int("HARNESS_NOTIFY_FAILING_AFTER", 3, minimum=1)
# Slack's Web API (users.info maps a button's clicker to a harness user by email).
HARNESS_SLACK_API_URL = env_str("HARNESS_SLACK_API_URL", "https://slack.com/api/")
# Mail for email channels, with Django's own names.
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25, minimum=1)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
EMAIL_TIMEOUT = env_int("EMAIL_TIMEOUT", 10, minimum=1)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "agent-harness@localhost")

# --- Deploy security ------------------------------------------------------------------------
# Off by default so `harness up` works over plain http on loopback; behind TLS turn them on
# (README "Deploying"). `manage.py check --deploy` lists what is still missing.
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = env_bool("HARNESS_SECURE_COOKIES", False)
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", False)
# Probes ask over plain HTTP from inside the deployment (harness_site/health.py).
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$"]
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
if env_bool("HARNESS_BEHIND_TLS_PROXY", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
X_FRAME_OPTIONS = "DENY"
# Content-Security-Policy (django-csp; the policy: settings_helpers.CSP), enforced by default;
# HARNESS_CSP=report-only or off.
HARNESS_CSP = env_choice("HARNESS_CSP", ("enforce", "report-only", "off"), "enforce")
if HARNESS_CSP == "enforce":
    CONTENT_SECURITY_POLICY = _CSP
elif HARNESS_CSP == "report-only":
    CONTENT_SECURITY_POLICY_REPORT_ONLY = _CSP

# --- Auth, i18n, static --------------------------------------------------------------------
# Single sign-on (accounts/, README "Single sign-on"): an OidcConfig from the HARNESS_OIDC_*
# variables, None without HARNESS_OIDC_ISSUER. HARNESS_LOCAL_LOGIN=off refuses every password
# login but a superuser's (break-glass); it needs single sign-on.
HARNESS_OIDC = oidc_config_from_env(os.environ)
HARNESS_LOCAL_LOGIN = local_login_checked(env_bool("HARNESS_LOCAL_LOGIN", True), HARNESS_OIDC)
# Sessions remember the backend that signed them in: with local login off, the sessions of
# Django's plain password backend end, and only break-glass superusers sign in again.
AUTHENTICATION_BACKENDS = [
    "django.contrib.auth.backends.ModelBackend"
    if HARNESS_LOCAL_LOGIN
    else "accounts.backends.LocalPasswordBackend",
    *(["accounts.backends.OidcBackend"] if HARNESS_OIDC else []),
]
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

# Uploads past tasks.web.uploads.UPLOAD_FILE_MAX_BYTES are dropped as they arrive (named and
# sized for the page to refuse), then Django's own handlers (memory, temporary file).
FILE_UPLOAD_HANDLERS = [
    "tasks.web.uploads.CappedUploadHandler",
    "django.core.files.uploadhandler.MemoryFileUploadHandler",
    "django.core.files.uploadhandler.TemporaryFileUploadHandler",
]

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
# `collectstatic` (which `harness up` and `harness test` run) writes every file here under a
# content-hashed name with gzip and brotli siblings (harness_site/staticfiles.py); WhiteNoise
# serves them from here only. Templates name files through `{% static %}`, which fails loudly
# for a file collectstatic did not see.
STATIC_ROOT = Path(env_str("HARNESS_STATIC_ROOT", str(DATA_DIR / "staticfiles")))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "harness_site.staticfiles.StaticFilesStorage"},
}

# Telemetry (harness_base/telemetry/): traces are configured by the standard OTEL_*
# variables; the task page links a trace when HARNESS_TRACE_URL_TEMPLATE is set (`{trace_id}`
# is replaced), e.g. http://jaeger:16686/trace/{trace_id}.
HARNESS_TRACE_URL_TEMPLATE = trace_url_template(env_str("HARNESS_TRACE_URL_TEMPLATE", ""))
# Log lines: `plain` text, or `json` (one JSON object a line, with task, call and trace ids).
HARNESS_LOG_FORMAT = env_choice("HARNESS_LOG_FORMAT", ("plain", "json"), "plain")

LOGGING = logging_config(log_format=HARNESS_LOG_FORMAT, level=env_str("LOG_LEVEL", "INFO"))
