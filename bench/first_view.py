"""(7) First view of a task page in Chromium, cold cache: from navigation start to the page
being interactive (DOMContentLoaded: every deferred script, the page's own JavaScript, has run)
and to the timeline drawn (Plotly's figure rendered, `data-ready` set by static/dashboard.js,
which loads Plotly only after the page's scripts).

The page is served as `harness up` serves it: the static files collected (hashed names,
gzip/brotli, far-future caching: harness_site/staticfiles.py) and a gunicorn started here with
`harness up`'s options on this process's database. The task is a finished 20-step `write_file`
task run through the real loop. Each sample opens a new browser context (empty cache, the
logged-in session cookie only), goes to the task page and reads the moment the timeline was
drawn from a MutationObserver installed before the page's own scripts (performance.now(),
whose zero is the navigation start); DOMContentLoaded (every deferred script has run: the page's
JavaScript is ready) and the bytes transferred come from the Navigation and Resource Timing
entries. The reference is the same view a second time in the same context (warm cache: every
static file from the browser's cache, only the page itself from the server).

Debian's Chromium, headless, driven by Playwright. Expected run time (quiet 2-CPU machine):
smoke ~15 s, full ~1 min.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx

from bench.common import (
    BENCH_DIR,
    BenchError,
    database_url,
    figure,
    scripted_task,
    stats,
    tasks_delete,
    wait_for,
)

TITLE = "First view of a task page (Chromium, cold cache)"
SIZES = {"smoke": {"n": 2, "warmup": 1}, "full": {"n": 30, "warmup": 3}}
STEPS = 20
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
TARGET_MS = 1000.0

# Installed before any of the page's scripts: the moment the timeline is drawn.
READY_OBSERVER = """
new MutationObserver((_, observer) => {
  const el = document.getElementById("timeline");
  if (el && el.dataset.ready === "1") {
    window.__timelineDrawnAt = performance.now();
    observer.disconnect();
  }
}).observe(document, {subtree: true, attributes: true, attributeFilter: ["data-ready"]});
"""
TIMINGS = """() => {
  const nav = performance.getEntriesByType("navigation")[0];
  const resources = performance.getEntriesByType("resource");
  return {
    drawn: window.__timelineDrawnAt,
    dom_ready: nav.domContentLoadedEventEnd,
    server: nav.responseStart - nav.requestStart,
    bytes: nav.transferSize + resources.reduce((sum, r) => sum + r.transferSize, 0),
    static_bytes: resources.filter(r => r.name.includes("/static/"))
      .reduce((sum, r) => sum + r.transferSize, 0),
  };
}"""


def _task() -> Any:
    from agent.runtime.loop import task_run
    from tasks.models import Task

    script = [
        {"call": "write_file", "args": {"path": f"notes/{i}.md", "content": f"step {i}\n"}}
        for i in range(STEPS)
    ]
    task = scripted_task(script=[*script, {"final": "done"}], tools=["write_file"])
    if task_run(task_id=task.id) != "succeeded":
        raise BenchError(f"the benchmark task ended {Task.objects.get(id=task.id).status}")
    return task


def _session_cookie() -> tuple[Any, str]:
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group
    from django.test import Client

    user = get_user_model().objects.create_user(username=f"bench-viewer-{os.getpid()}")
    user.groups.add(Group.objects.get_or_create(name="viewers")[0])
    client = Client()
    client.force_login(user)
    return user, client.cookies["sessionid"].value


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _serve(*, port: int, log: Path) -> subprocess.Popen:
    """collectstatic as `harness up` runs it, then gunicorn with its options."""
    from django.conf import settings
    from django.core.management import call_command

    from harness_site.cli.common import child_env, static_collecting

    with static_collecting(Path(settings.STATIC_ROOT)):
        call_command("collectstatic", interactive=False, verbosity=0)
    env = child_env(DATABASE_URL=database_url(), REDIS_URL=settings.REDIS_URL)
    command = [sys.executable, "-m", "gunicorn", "harness_site.wsgi"]
    options = ["--bind", f"127.0.0.1:{port}", "--workers", "1", "--threads", "4"]
    with open(log, "wb") as output:
        server = subprocess.Popen(
            [*command, *options, "--no-control-socket"],
            cwd=BENCH_DIR.parent,
            env={**env, "HARNESS_STATIC_ROOT": str(settings.STATIC_ROOT)},
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def answers() -> bool:
        if server.poll() is not None:
            raise BenchError(f"gunicorn exited with {server.returncode}: {log.read_text()[-2000:]}")
        try:
            return httpx.get(f"http://127.0.0.1:{port}/accounts/login/").status_code == 200
        except httpx.HTTPError:
            return False

    wait_for(answers, timeout=60, interval=0.2, what="gunicorn to answer")
    return server


def _views(browser: Any, *, url: str, cookie: str, n: int, warmup: int) -> dict[str, list]:
    samples: dict[str, list] = {"cold": [], "warm": [], "dom_ready": [], "server": []}
    samples.update(warm_dom_ready=[])
    samples.update(bytes=[], static_bytes=[], warm_bytes=[])
    for i in range(warmup + n):
        context = browser.new_context()
        try:
            context.add_cookies(
                [{"name": "sessionid", "value": cookie, "domain": "127.0.0.1", "path": "/"}]
            )
            context.add_init_script(READY_OBSERVER)
            page = context.new_page()
            views = []
            for _ in range(2):  # cold, then warm
                page.goto(url)
                page.wait_for_function("window.__timelineDrawnAt !== undefined", timeout=30_000)
                views.append(page.evaluate(TIMINGS))
        finally:
            context.close()
        if i < warmup:
            continue
        cold, warm = views
        samples["cold"].append(cold["drawn"])
        samples["warm"].append(warm["drawn"])
        samples["dom_ready"].append(cold["dom_ready"])
        samples["warm_dom_ready"].append(warm["dom_ready"])
        samples["server"].append(cold["server"])
        samples["bytes"].append(cold["bytes"])
        samples["static_bytes"].append(cold["static_bytes"])
        samples["warm_bytes"].append(warm["bytes"])
    return samples


def run(size: str) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        raise BenchError(f"{CHROMIUM} is missing: apt-get install chromium")
    config = SIZES[size]
    task = _task()
    user, cookie = _session_cookie()
    port = _free_port()
    with tempfile.TemporaryDirectory(prefix="bench-first-view-") as tmp:
        server = _serve(port=port, log=Path(tmp) / "gunicorn.log")
        try:
            # Playwright's sync API runs an event loop on this thread; Django's ORM is not used
            # while it runs.
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                try:
                    samples = _views(
                        browser,
                        url=f"http://127.0.0.1:{port}/tasks/{task.id}/",
                        cookie=cookie,
                        n=config["n"],
                        warmup=config["warmup"],
                    )
                finally:
                    browser.close()
        finally:
            os.killpg(server.pid, 15)
            server.wait(timeout=30)
    tasks_delete([task.id])
    user.delete()

    cold, warm = stats(samples["cold"]), stats(samples["warm"])
    interactive = stats(samples["dom_ready"])
    kib = stats(samples["bytes"], scale=1 / 1024)
    return {
        "title": TITLE,
        "figures": [
            figure(
                figure=f"Cold task page ({STEPS} steps): navigation → interactive "
                "(DOMContentLoaded: the page's scripts have run)",
                unit="ms",
                ours=interactive,
                reference=stats(samples["warm_dom_ready"]),
                reference_label="the same view, warm cache",
                target=f"p95 ≤ {TARGET_MS:g} ms",
                met=interactive["p95"] <= TARGET_MS,
            ),
            figure(
                figure="Cold task page: navigation → timeline drawn (Plotly run after the page)",
                unit="ms",
                ours=cold,
                reference=warm,
                reference_label="the same view, warm cache",
                target="(info)",
            ),
            figure(
                figure="Cold task page: bytes transferred (page + static, compressed)",
                unit="KiB",
                ours=kib,
                reference=stats(samples["warm_bytes"], scale=1 / 1024),
                reference_label="warm cache",
                target="(info)",
            ),
        ],
        "notes": (
            f"Chromium headless, a new context per sample (cold cache) against gunicorn "
            f"(`harness up`'s options) serving the collected static files; {config['n']} "
            f"samples after {config['warmup']} warm-up. The server's own answer (request → "
            f"first byte) took {stats(samples['server'])['median']:.0f} ms (median); the "
            f"static files {stats(samples['static_bytes'], scale=1 / 1024)['median']:.0f} KiB."
        ),
        "details": {"steps": STEPS, "samples": samples},
    }
