"""The dashboard behind OpenID Connect (dashboard.oidc_issuer, docs/deploy.md), end to end in
headless Chromium against a real OpenID provider process on loopback: oidc-provider-mock (Authlib
and Flask; clients must register, as at a real issuer; the login form picks the user).

Asserted: an anonymous visitor sees only the login button, no page; after logging in at the
issuer as alice, the fleet page renders with her name and email in the sidebar; a client id the
issuer does not know (another audience) is refused by the issuer and the visitor stays anonymous;
a wrong client secret is refused at the token exchange; an issuer whose discovery document names
another issuer is refused before the dashboard starts (OpenID Connect Discovery 1.0, 4.3)."""

from __future__ import annotations

import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.dashboard.browser import CHROMIUM, Browser, dashboard_server, free_port

pytestmark = pytest.mark.skipif(shutil.which(CHROMIUM) is None, reason="chromium is not installed")

ROOT = Path(__file__).parents[2]
ALICE = {"name": "Alice Liddell", "email": "alice@example.org"}


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


def wait_for(check: object, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if callable(check) and check():
            return
        time.sleep(0.1)
    raise AssertionError(f"{what} not ready after {timeout_s} s")


@pytest.fixture(scope="module")
def issuer() -> Iterator[str]:
    """The provider as its own process, registration required; alice's claims stored. One for
    the module, as one issuer serves many clients: each test registers a client of its own."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "oidc_provider_mock", "--host", "127.0.0.1", "--port", str(port),
         "--require-registration", "true", "--require-nonce", "true"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _answers(url + "/.well-known/openid-configuration"), 60, "provider")
        put = urllib.request.Request(
            f"{url}/users/alice", data=json.dumps(ALICE).encode(), method="PUT",
            headers={"Content-Type": "application/json"},
        )  # fmt: skip
        with urllib.request.urlopen(put, timeout=10) as resp:
            assert resp.status == 204
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def register(issuer: str, redirect_uri: str) -> tuple[str, str]:
    """Register the dashboard as a client at the issuer (RFC 7591); its id and secret."""
    body = json.dumps({"redirect_uris": [redirect_uri]}).encode()
    request = urllib.request.Request(
        issuer + "/oauth2/clients", data=body, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10) as resp:
        client = json.load(resp)
    return str(client["client_id"]), str(client["client_secret"])


def oidc_env(tmp_path: Path, issuer: str, client: tuple[str, str], port: int) -> dict[str, str]:
    """An embedded-mode dashboard on an empty data folder, behind the issuer."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETSCOPE_")}
    return {
        **env,
        "FLEETSCOPE_CORE_DATA_DIR": str(tmp_path / "data"),
        "FLEETSCOPE_DASHBOARD_OIDC_ISSUER": issuer,
        "FLEETSCOPE_DASHBOARD_OIDC_CLIENT_ID": client[0],
        "FLEETSCOPE_DASHBOARD_OIDC_CLIENT_SECRET": client[1],
        "FLEETSCOPE_DASHBOARD_OIDC_REDIRECT_URI": f"http://127.0.0.1:{port}/oauth2callback",
        "FLEETSCOPE_DASHBOARD_OIDC_COOKIE_SECRET": "a-test-cookie-secret-of-32-chars!",
    }


def log_in_at_the_issuer(browser: Browser, dashboard: str, sub: str) -> str:
    """Click the dashboard's login button, then pick `sub` on the issuer's form; the text of the
    issuer's page when it shows no form (it refused)."""
    browser.navigate(dashboard)
    browser.wait_for_text("Log in to see the fleet.", timeout_s=120)
    click = (
        "(() => { const b = [...document.querySelectorAll('button')]"
        ".find(b => b.innerText.trim() === 'Log in'); if (!b) return false; b.click();"
        " return true; })()"
    )
    deadline = time.monotonic() + 120
    while not browser.evaluate(click):  # the button draws a moment after the page's text
        assert time.monotonic() < deadline, browser.text()
        time.sleep(0.2)
    deadline = time.monotonic() + 120
    while True:  # the dashboard sends the browser to the issuer: its form or its error page
        at_issuer = not str(browser.evaluate("location.href")).startswith(dashboard + "/")
        if at_issuer and browser.evaluate("document.readyState") == "complete":
            break
        assert time.monotonic() < deadline, browser.text()
        time.sleep(0.1)
    if not browser.evaluate("!!document.querySelector('input[name=sub]')"):
        return str(browser.text())
    browser.evaluate(
        f"(() => {{ const sub = document.querySelector('input[name=sub]');"
        f" sub.value = {json.dumps(sub)}; sub.form.submit(); }})()"
    )
    return ""


def test_anonymous_sees_only_the_login_and_alice_sees_the_fleet_with_her_identity(
    issuer: str, tmp_path: Path
) -> None:
    port = free_port()
    client = register(issuer, f"http://127.0.0.1:{port}/oauth2callback")
    with dashboard_server(oidc_env(tmp_path, issuer, client, port), 120, port) as url:
        browser = Browser()
        try:
            browser.navigate(url)
            anonymous = browser.wait_for_text("Log in to see the fleet.", timeout_s=120)
            assert "Log in" in anonymous and "Jobs" not in anonymous and "Hosts" not in anonymous
            browser.screenshot(tmp_path / "anonymous.png")
            log_in_at_the_issuer(browser, url, "alice")
            page = browser.wait_for_text(
                "Logged in as Alice Liddell (alice@example.org)", "Jobs", "Hosts", timeout_s=120
            )
            assert "Log in to see the fleet." not in page
            browser.screenshot(tmp_path / "alice.png")
        finally:
            browser.close()


def test_a_client_the_issuer_does_not_know_is_refused_and_the_visitor_stays_anonymous(
    issuer: str, tmp_path: Path
) -> None:
    port = free_port()
    register(issuer, f"http://127.0.0.1:{port}/oauth2callback")  # the real one, not used
    stranger = ("another-audience", "whatever")
    with dashboard_server(oidc_env(tmp_path, issuer, stranger, port), 120, port) as url:
        browser = Browser()
        try:
            refused = log_in_at_the_issuer(browser, url, "alice")
            assert "invalid_client" in refused or "Invalid client" in refused, refused
            browser.navigate(url)
            again = browser.wait_for_text("Log in to see the fleet.", timeout_s=120)
            assert "Logged in as" not in again and "Jobs" not in again
        finally:
            browser.close()


def test_a_wrong_client_secret_is_refused_at_the_token_exchange(
    issuer: str, tmp_path: Path
) -> None:
    port = free_port()
    client_id, _ = register(issuer, f"http://127.0.0.1:{port}/oauth2callback")
    env = oidc_env(tmp_path, issuer, (client_id, "not-the-secret"), port)
    with dashboard_server(env, 120, port) as url:
        browser = Browser()
        try:
            log_in_at_the_issuer(browser, url, "alice")
            deadline = time.monotonic() + 120
            while not str(browser.evaluate("location.href")).startswith(url + "/"):
                assert time.monotonic() < deadline, browser.text()
                time.sleep(0.1)
            back = browser.wait_for_text("Log in to see the fleet.", timeout_s=120)
            assert "Logged in as" not in back and "Jobs" not in back
        finally:
            browser.close()


class _Relay(http.server.BaseHTTPRequestHandler):
    """A reverse proxy: the issuer reached under another name (its document names itself)."""

    target = ""

    def do_GET(self) -> None:
        with urllib.request.urlopen(self.target + self.path, timeout=10) as resp:
            body = resp.read()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_an_issuer_whose_document_names_another_issuer_is_refused_before_start(
    issuer: str, tmp_path: Path
) -> None:
    relay = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), type("R", (_Relay,), {"target": issuer})
    )
    threading.Thread(target=relay.serve_forever, daemon=True).start()
    claimed = f"http://127.0.0.1:{relay.server_address[1]}"
    port = free_port()
    env = oidc_env(tmp_path, claimed, register(issuer, f"http://127.0.0.1:{port}/x"), port)
    env["FLEETSCOPE_DASHBOARD_OIDC_REDIRECT_URI"] = f"http://127.0.0.1:{port}/oauth2callback"
    try:
        result = subprocess.run(
            [sys.executable, "-m", "app.cli", "dashboard", "--port", str(port)],
            env=env, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
    finally:
        relay.shutdown()
        relay.server_close()
    assert result.returncode != 0
    assert result.stdout == ""
    assert result.stderr.strip() == (
        f"fleetscope: error: {claimed}/.well-known/openid-configuration names issuer "
        f"'{issuer}', not '{claimed}' (dashboard.oidc_issuer): refused (OpenID Connect "
        "Discovery 1.0, 4.3)"
    )
