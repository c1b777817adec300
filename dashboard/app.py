"""The dashboard's one entrypoint: `streamlit run dashboard/app.py` (or `fleetscope dashboard`).

Fleet -> job -> trace in three clicks; hosts on the side. Pages are files under `views/`, routed by
`st.navigation`; settings reach the app only through `FLEETSCOPE_*` variables and the TOML file.
Read-only: no page writes telemetry. The project's errors (a wrong setting, a source that cannot be
reached) are shown as their message.
"""

from __future__ import annotations

import streamlit as st

from dashboard import auth, glossary
from fleetscope.errors import FleetscopeError
from fleetscope.settings import load_settings

st.set_page_config(page_title="fleetscope", page_icon=":material/monitoring:", layout="wide")


def _home() -> None:
    """The root URL shows the fleet page; `/fleet` is the fleet page itself (a default page is
    served only at the root, so a default page named "fleet" left `/fleet` a "Page not found")."""
    from dashboard.views import fleet

    fleet.render()


PAGES = [
    st.Page(_home, title="Fleet", url_path="home", default=True, visibility="hidden"),
    st.Page("views/fleet.py", title="Fleet", icon=":material/dashboard:", url_path="fleet"),
    st.Page("views/jobs.py", title="Jobs", icon=":material/list:", url_path="jobs"),
    st.Page("views/job.py", title="Job", icon=":material/work:", url_path="job"),
    st.Page("views/traces.py", title="Traces", icon=":material/timeline:", url_path="traces"),
    st.Page("views/trace.py", title="Trace", icon=":material/query_stats:", url_path="trace"),
    st.Page("views/hosts.py", title="Hosts", icon=":material/dns:", url_path="hosts"),
    st.Page("views/gpus.py", title="GPUs", icon=":material/memory:", url_path="gpus"),
    st.Page("views/sharing.py", title="Sharing", icon=":material/join:", url_path="sharing"),
]

auth.require_login(load_settings())  # dashboard.oidc_issuer: log in first (dashboard/auth.py)
try:
    st.navigation(PAGES).run()
except FleetscopeError as exc:  # a setting or an unreachable source: said, never a traceback
    st.error(str(exc), icon=":material/error:")
glossary.show(st.sidebar)  # below each page's own sidebar controls
