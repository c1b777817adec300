"""The dashboard behind OpenID Connect (`dashboard.oidc_issuer`), with Streamlit's own st.login.

Streamlit (1.42+) runs the authorization-code flow itself through Authlib: it reads the issuer's
discovery document, sends the visitor there, and on the callback checks the ID token's signature
(the issuer's JWKS), issuer, audience (our client id), expiry and nonce, then keeps the identity in
a signed cookie. It takes its settings from an `[auth]` table of its secrets, so `fleetscope
dashboard` writes that table from ours into a private file (mode 0600) and points Streamlit at it
(`--secrets.files`); the app asks for a login before any page when the issuer is set.

Checked here, before Streamlit starts: every setting the flow needs is set, and the issuer's
discovery document names exactly the configured issuer (OpenID Connect Discovery 1.0, section 4.3:
a document naming another issuer is refused, so tokens from another issuer cannot be accepted on
its word). This module must never see a password or a token.
"""

from __future__ import annotations

import json
import os
import tempfile
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fleetscope.errors import ConfigError

if TYPE_CHECKING:
    from fleetscope.settings import Settings

DISCOVERY = "/.well-known/openid-configuration"
REQUIRED = ("oidc_client_id", "oidc_client_secret", "oidc_redirect_uri")


def enabled(settings: Settings) -> bool:
    return bool(settings.dashboard.oidc_issuer)


def metadata_url(issuer: str) -> str:
    return issuer.rstrip("/") + DISCOVERY


def _fetch_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return json.load(resp)


def check(settings: Settings, fetch: Callable[[str], Any] = _fetch_json) -> None:
    """ConfigError unless the login can work: the settings it needs, a discovery document that
    names the configured issuer."""
    dash = settings.dashboard
    for name in REQUIRED:
        if not getattr(dash, name):
            raise ConfigError(f"dashboard.{name} must be set when dashboard.oidc_issuer is")
    if not dash.oidc_redirect_uri.endswith("/oauth2callback"):
        raise ConfigError(
            "dashboard.oidc_redirect_uri must be the dashboard's public URL plus /oauth2callback, "
            f"not {dash.oidc_redirect_uri}"
        )
    url = metadata_url(dash.oidc_issuer)
    try:
        document = fetch(url)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read {url} (dashboard.oidc_issuer): {exc}") from exc
    named = document.get("issuer") if isinstance(document, dict) else None
    if named != dash.oidc_issuer:
        raise ConfigError(
            f"{url} names issuer {named!r}, not {dash.oidc_issuer!r} (dashboard.oidc_issuer): "
            "refused (OpenID Connect Discovery 1.0, 4.3)"
        )


def secrets_toml(settings: Settings) -> str:
    """Streamlit's `[auth]` table (docs.streamlit.io, st.login) from our settings."""
    dash = settings.dashboard
    values = {
        "redirect_uri": dash.oidc_redirect_uri,
        "cookie_secret": dash.oidc_cookie_secret or os.urandom(32).hex(),
        "client_id": dash.oidc_client_id,
        "client_secret": dash.oidc_client_secret,
        "server_metadata_url": metadata_url(dash.oidc_issuer),
    }
    return "[auth]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in values.items())


def write_secrets(settings: Settings) -> Path:
    """The `[auth]` table in a file only this user can read, for `--secrets.files`."""
    fd, name = tempfile.mkstemp(prefix="fleetscope-dashboard-auth-", suffix=".toml")
    with os.fdopen(fd, "w") as out:  # mkstemp: mode 0600
        out.write(secrets_toml(settings))
    return Path(name)


def require_login(settings: Settings) -> None:
    """Before any page: an anonymous visitor sees the login button only; a logged-in one sees
    who they are and a log-out button in the sidebar. Nothing when no issuer is set."""
    import streamlit as st

    if not enabled(settings):
        return
    if not st.user.is_logged_in:
        st.title("fleetscope")
        st.write("Log in to see the fleet.")
        st.button("Log in", on_click=st.login, type="primary")
        st.stop()
    who = st.user.get("name") or st.user.get("email") or st.user.get("sub")
    st.sidebar.caption(f"Logged in as **{who}** ({st.user.get('email') or st.user.get('sub')})")
    st.sidebar.button("Log out", on_click=st.logout)
