"""Request safety in a real browser.

A page from another origin (another loopback port, as a malicious page open in the same browser
would be) auto-submits forms to launch, cancel and import: each is refused with 403 and nothing
is stored, while the same forms on the dashboard's own pages still work. Every page works
under the Content-Security-Policy (no inline script) with no violation on the console, and in
the logged-in mode a person logs in, makes an API key and logs out.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from playwright.sync_api import ConsoleMessage, Page, expect

from tests.app.test_rollouts import step_payload
from tests.e2e.test_rollouts_in_browser import reporting_run
from tests.locked_stack import ADMIN, PASSWORD, locked_stack
from tests.stack import Stack, free_port

TRAINER_STATE = json.dumps({"global_step": 2, "log_history": [
    {"step": 1, "loss": 0.1, "reward": 0.2}, {"step": 2, "loss": 0.1, "reward": 0.3}]})


def attack_pages(target: str, run_id: int, finished_id: int) -> dict[str, str]:
    """What a hostile site would serve: forms that submit themselves to the dashboard."""
    launch = f"""<form id="f" method="post" action="{target}/runs/new">
      <input name="name" value="pwned"><input name="model" value="builtin:tiny-random">
      <input name="dataset" value="builtin:short-prompts"><input name="reward_0_name" value="length_target">
      <input name="reward_0_weight" value="1"><input name="max_steps" value="2"></form>
      <script>document.getElementById("f").submit()</script>"""
    cancel = f"""<form id="f" method="post" action="{target}/runs/{run_id}/cancel"></form>
      <script>document.getElementById("f").submit()</script>"""
    # a form cannot pre-fill a file input, but a script can post the same multipart body
    imports = f"""<script>
      var body = new FormData();
      body.append("log", new Blob([{json.dumps(TRAINER_STATE)}]), "trainer_state.json");
      body.append("name", "pwned-import");
      fetch("{target}/runs/import", {{method: "POST", mode: "no-cors", credentials: "include",
                                     body: body}});
      </script>"""
    api = f"""<script>
      fetch("{target}/api/runs/{run_id}/cancel", {{method: "POST", mode: "no-cors",
                                                   credentials: "include"}});
      </script>"""
    delete = f"""<form id="f" method="post" action="{target}/runs/{finished_id}/delete"></form>
      <script>document.getElementById("f").submit()</script>"""
    return {"/launch": launch, "/cancel": cancel, "/import": imports, "/api-cancel": api,
            "/delete": delete}


class Hostile:
    """A second origin on loopback that serves the attack pages."""

    def __init__(self, pages: dict[str, str]) -> None:
        self.pages = pages
        pages_ref = self.pages

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = f"<!doctype html><html><body>{pages_ref.get(self.path, '')}</body></html>"
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.end_headers()
                self.wfile.write(body.encode())

            def log_message(self, *args: object) -> None:
                pass

        self.port = free_port()
        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@pytest.fixture
def hostile() -> Iterator[Hostile]:
    site = Hostile({})
    try:
        yield site
    finally:
        site.server.shutdown()


def csp_violations(page: Page) -> list[str]:
    """Collects what chromium prints when the policy blocks something, and page errors."""
    seen: list[str] = []

    def on_console(msg: ConsoleMessage) -> None:
        # HTTP errors (the wrong password's 401, no favicon) are not what this looks for
        if "Content Security Policy" in msg.text or (
                msg.type == "error" and "Failed to load resource" not in msg.text):
            seen.append(f"{page.url}: {msg.text}")

    page.on("console", on_console)
    page.on("pageerror", lambda exc: seen.append(f"{page.url}: {exc}"))
    return seen


def without_replaced_requests(seen: list[str]) -> list[str]:
    """htmx logs a request that ``hx-sync="this:replace"`` aborts (a newer filter change won) as
    an error, "htmx:afterRequest" then "htmx:sendAbort": by design, not a policy violation."""
    aborted = {line.replace("htmx:sendAbort", "htmx:afterRequest") for line in seen
               if "htmx:sendAbort" in line}
    return [line for line in seen if "htmx:sendAbort" not in line and line not in aborted]


def test_forms_posted_from_another_origin_are_refused_and_store_nothing(
        page: Page, live: Stack, hostile: Hostile) -> None:
    run_id, headers = reporting_run(live)
    imported = httpx.post(f"{live.url}/runs/import", files={"log": ("t.json", TRAINER_STATE)},
                          data={"name": "finished"}, timeout=30)
    finished_id = int(imported.headers["location"].rsplit("/", 1)[1])
    hostile.pages.update(attack_pages(live.url, run_id, finished_id))
    before = httpx.get(f"{live.url}/api/runs", timeout=10).json()

    for path, target in (("/launch", "/runs/new"), ("/cancel", f"/runs/{run_id}/cancel"),
                         ("/delete", f"/runs/{finished_id}/delete")):
        with page.expect_response(f"{live.url}{target}") as answer:
            page.goto(f"{hostile.url}{path}")
        assert answer.value.status == 403, path
        expect(page.locator("body")).to_contain_text("cross-origin request refused")
    for path, target in (("/import", "/runs/import"), ("/api-cancel", f"/api/runs/{run_id}/cancel")):
        with page.expect_response(f"{live.url}{target}") as answer:
            page.goto(f"{hostile.url}{path}")
        assert answer.value.status == 403, path

    after = httpx.get(f"{live.url}/api/runs", timeout=10).json()
    assert [r["id"] for r in after] == [r["id"] for r in before]  # none made, none deleted
    run = httpx.get(f"{live.url}/api/runs/{run_id}", timeout=10).json()
    assert run["status"] == "running" and run["cancel_requested"] is False

    # the dashboard's own forms still work: import, then cancel with the button
    page.goto(f"{live.url}/runs/import")
    page.set_input_files("#f-log", files=[{"name": "trainer_state.json", "mimeType": "application/json",
                                           "buffer": TRAINER_STATE.encode()}])
    page.fill("#f-import-name", "same-origin-import")
    page.click("#import")
    page.wait_for_url("**/runs/*")
    expect(page.locator("h1")).to_contain_text("same-origin-import")
    page.on("dialog", lambda d: d.accept())
    page.goto(f"{live.url}/runs/{run_id}")
    page.click("text=Cancel run")
    expect(page.locator("#status-panel")).to_contain_text("stopping")
    assert httpx.get(f"{live.url}/api/runs/{run_id}", timeout=10).json()["cancel_requested"]
    assert httpx.post(f"{live.url}/api/runs/{run_id}/finished", json={"returncode": 0},
                      headers=headers).status_code == 200
    page.goto(f"{live.url}/runs/{finished_id}")
    page.click("#delete-run")
    page.wait_for_url(f"{live.url}/runs")
    assert httpx.get(f"{live.url}/api/runs/{finished_id}", timeout=10).status_code == 404


def test_every_page_works_under_the_content_security_policy(page: Page, live: Stack) -> None:
    run_id, headers = reporting_run(live)
    body = {"rows": [{"step": s, "metrics": {"reward": 0.1 * s, "kl": 0.01}} for s in (1, 2, 3)],
            "rollouts": [step_payload(s) for s in (1, 2, 3)]}
    assert httpx.post(f"{live.url}/api/runs/{run_id}/metrics", json=body,
                      headers=headers).status_code == 200
    violations = csp_violations(page)
    for path in ("/runs", "/runs/new", "/runs/import", "/account"):
        page.goto(f"{live.url}{path}")
        expect(page.locator("#dev-mode")).to_be_visible()  # the banner on every page
        page.wait_for_load_state("networkidle")
    page.goto(f"{live.url}/docs")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("GRPO Deck")
    # the run page: charts drawn by static/charts.js, live polling appends a new point
    page.goto(f"{live.url}/runs/{run_id}")
    expect(page.locator("#dev-mode")).to_be_visible()
    expect(page.locator("#chart-reward .main-svg").first).to_be_visible()
    more = {"rows": [{"step": 4, "metrics": {"reward": 0.5, "kl": 0.01}}]}
    assert httpx.post(f"{live.url}/api/runs/{run_id}/metrics", json=more,
                      headers=headers).status_code == 200
    expect(page.locator("#chart-reward .scatterlayer .trace").first.locator("path.point")
           ).to_have_count(4, timeout=15_000)
    expect(page.locator("#run-step")).to_contain_text("4", timeout=15_000)  # htmx poll
    page.goto(f"{live.url}/runs/{run_id}/rollouts")
    expect(page.locator(".chart .main-svg").first).to_be_visible()
    page.select_option("#f-step", "1")
    page.select_option("#f-outcome", "all_fail")
    expect(page.locator("#groups article")).to_have_count(1)  # htmx swap under the policy
    assert without_replaced_requests(violations) == []
    httpx.post(f"{live.url}/api/runs/{run_id}/finished", json={"returncode": 0}, headers=headers)


@pytest.fixture(scope="module")
def locked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with locked_stack(tmp_path_factory.mktemp("locked-e2e")) as stack:
        yield stack


def test_log_in_make_an_api_key_and_log_out(page: Page, locked: Stack) -> None:
    violations = csp_violations(page)
    page.goto(f"{locked.url}/runs/new")
    page.wait_for_url("**/login?next=*")
    expect(page.locator("#dev-mode")).to_have_count(0)
    page.fill("#f-email", ADMIN)
    page.fill("#f-password", "wrong password")
    page.click("#login")
    expect(page.locator("#login-error")).to_contain_text("wrong email or password")
    page.fill("#f-password", PASSWORD)
    page.click("#login")
    page.wait_for_url("**/runs/new")
    cookie = next(c for c in page.context.cookies() if c["name"] == "grpodeck_session")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Lax"
    assert page.evaluate("document.cookie") == ""  # out of reach of scripts
    page.goto(f"{locked.url}/account")
    page.fill("#f-key-name", "laptop")
    page.click("#create-key")
    key = page.locator("#new-key-value").inner_text()
    assert httpx.get(f"{locked.url}/api/runs", headers={"X-API-Key": key}).status_code == 200
    page.goto(f"{locked.url}/account")
    page.click("#api-keys button:has-text('Revoke')")
    expect(page.locator("#api-keys")).to_contain_text("revoked")
    assert httpx.get(f"{locked.url}/api/runs", headers={"X-API-Key": key}).status_code == 401
    page.goto(f"{locked.url}/docs")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("GRPO Deck")
    page.goto(f"{locked.url}/runs")
    page.click("#logout")
    page.wait_for_url("**/login")
    page.goto(f"{locked.url}/runs")
    page.wait_for_url("**/login?next=*")
    assert violations == []
