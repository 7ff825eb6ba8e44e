"""Text that tools and models produce is shown, never run: HTML in a tool's error, a command's
output, a model's final answer, a call's arguments, and an MCP server's tool descriptions and
results (a real stdio server from harness.yaml: html_mcp_server.py), opened in headless
Chromium on the task page, its calls tab, its timeline (hover labels included) and the review
page, creates no element, runs no script and raises no CSP violation (an injected inline
script or handler would, as the enforced policy blocks it)."""

from __future__ import annotations

import pytest

from review.models import ReviewRequest
from tests.conftest import BROWSER, ROOT
from tests.factories import run_in_process, scripted_task
from tests.security.html_mcp_server import PAYLOAD

pytestmark = [*BROWSER, pytest.mark.integration]

HTML_SERVER = """mcp_servers:
  html:
    command: ["{python}", "-m", "tests.security.html_mcp_server"]
    env: {PYTHONPATH: "{harness}"}
    ro_paths: ["{harness}/tests/security"]
"""
RECORD = """
window.__csp = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__csp.push(e.violatedDirective + " " + (e.blockedURI || "inline"));
});
"""
INJECTED = (
    'img[src="x"], a[data-evil], a[href^="https://evil"],'
    ' script:not([src]):not([type="application/json"])'
)


def assert_inert(page, where: str) -> None:
    assert page.evaluate("window.__xss") is None, where
    assert page.evaluate("window.__csp") == [], where
    assert page.query_selector_all(INJECTED) == [], where
    # Shown, as text (perhaps in a closed <details>).
    shown = page.evaluate("document.body.textContent")
    assert "<img src=" in shown and "window.__xss=1" in shown, where


@pytest.fixture
def tasks(operator, commands_allowed, harness_dirs):
    """One finished task whose tool error, command output and answer carry the payload, and
    one waiting for review of a delete whose path is the payload."""
    done = scripted_task(
        [
            {"call": "read_file", "args": {"path": f"missing{PAYLOAD}.txt"}},
            {"call": "run_command", "args": {"command": f"printf '%s' '{PAYLOAD}'"}},
            {"final": PAYLOAD},
        ],
        ["read_file", "run_command"],
        user=operator,
    )
    assert run_in_process(done) == "succeeded", done.error_message
    paused = scripted_task(
        [{"call": "delete_file", "args": {"path": PAYLOAD}}, {"final": "ok"}],
        ["delete_file"],
        user=operator,
        workspace={"files": {"keep.txt": "x"}},
    )
    assert run_in_process(paused) == "paused"
    return done, ReviewRequest.objects.get(task=paused, status="pending")


def test_tool_and_model_text_is_shown_inert_on_every_page(open_page, live_server, operator, tasks):
    done, review = tasks
    page = open_page(operator, "/", init_script=RECORD)
    for path in (
        f"/tasks/{done.id}/",
        f"/tasks/{done.id}/?tab=calls",
        f"/tasks/{review.task_id}/?tab=calls",
        f"/reviews/{review.id}/",
        "/reviews/",
    ):
        page.goto(f"{live_server.url}{path}")
        page.wait_for_load_state("load")
        assert_inert(page, path)

    page.goto(f"{live_server.url}/tasks/{done.id}/?tab=timeline")
    page.wait_for_selector("#timeline[data-ready='1']")
    # Hover the failed read's error mark: Plotly reads hover text as markup of its own.
    hovered = page.evaluate(
        """() => {
          const el = document.getElementById("timeline");
          const curve = el.data.findIndex((trace) => (trace.meta || {}).kind === "errors");
          const point = el.data[curve].hovertext.findIndex((text) => text.includes("onerror"));
          Plotly.Fx.hover(el, [{curveNumber: curve, pointNumber: point}]);
          const layer = document.querySelector(".hoverlayer");
          return [layer.textContent, layer.querySelectorAll("a").length];
        }"""
    )
    assert hovered[1] == 0, hovered  # no link of the text's making
    assert '<a href="https://evil.example/"' in hovered[0], hovered
    assert_inert(page, "timeline")


def test_an_mcp_servers_descriptions_and_results_are_shown_inert(
    open_page, live_server, operator, harness_dirs, harness_yaml
):
    config = (ROOT / "harness.yaml").read_text()
    harness_yaml(config.replace("mcp_servers:\n", HTML_SERVER, 1))
    task = scripted_task(
        [
            {"call": "html__peek", "args": {}},
            {"call": "html__show", "args": {}},
            {"call": "html__wipe", "args": {"target": PAYLOAD}},
            {"final": "ok"},
        ],
        ["html__*"],
        user=operator,
    )
    assert run_in_process(task) == "paused", task.error_message
    review = ReviewRequest.objects.get(task=task, status="pending")
    page = open_page(operator, "/", init_script=RECORD)
    for path in (f"/tasks/{task.id}/?tab=calls", f"/reviews/{review.id}/"):
        page.goto(f"{live_server.url}{path}")
        page.wait_for_load_state("load")
        assert_inert(page, path)
        if "tab=calls" in path:
            # Content blocks: the PNG shown (same-origin download), the SVG only offered as a
            # download, a resource link a link only when it is https.
            page.wait_for_function(
                "() => [...document.querySelectorAll('[data-testid=output-image]')]"
                ".every(img => img.complete && img.naturalWidth === 1)"
            )
            assert page.locator("[data-testid=output-image]").count() == 1
            links = page.locator("[data-testid=output-link]")
            assert links.count() == 1
            assert links.get_attribute("href") == "https://example.org/doc"
            assert page.locator("a[href^='javascript']").count() == 0
    assert "Wipe. <a href=" in page.inner_text("[data-testid=mcp-description]")
