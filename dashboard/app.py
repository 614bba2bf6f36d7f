"""Entry script: routes to the pages (``st.navigation``); it renders nothing itself.

Started by ``hookledger dashboard``, which passes the configuration in ``$HOOKLEDGER_CONFIG``.
"""

from __future__ import annotations

import sys
from pathlib import Path

# `streamlit run dashboard/app.py` puts dashboard/ on sys.path, not the project: make both importable.
_ROOT = str(Path(__file__).resolve().parents[1])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

import streamlit as st  # noqa: E402
from sqlalchemy.exc import SQLAlchemyError  # noqa: E402

from dashboard import context, data, signin  # noqa: E402

st.set_page_config(page_title="hookledger", page_icon=":ledger:", layout="wide")

PAGES = [
    st.Page("views/overview.py", title="Overview", icon=":material/monitoring:", default=True),
    st.Page("views/discrepancies.py", title="Discrepancies", icon=":material/rule:"),
    st.Page("views/events.py", title="Events", icon=":material/search:"),
    st.Page("views/dead_letters.py", title="Dead letters", icon=":material/report:"),
    st.Page("views/issues.py", title="Issues", icon=":material/bug_report:"),
    st.Page("views/outbox.py", title="Outbox", icon=":material/outbox:"),
    st.Page("views/runs.py", title="Runs", icon=":material/history:"),
]
page = st.navigation(PAGES)
landing = "_landed" not in st.session_state  # the session's first page
st.session_state["_landed"] = True
signin.come_back(PAGES, page)  # after signing in or out, the link that was open
context.sidebar()
context.sign_in_banner()
context.show_flash()
try:
    if landing and page.url_path == "" and not st.query_params:
        # The bare address lands where something needs a person. The database is checked first,
        # within its timeout: a database that hangs would otherwise hold the landing page's count
        # of issues, with no timeout of its own, once its cached answer expired.
        if not context.guard():
            st.stop()
        if data.issues_waiting():
            st.switch_page("views/issues.py")
    page.run()
except SQLAlchemyError as exc:  # lost after the page's check: one line, not a traceback
    st.error(context.lost(exc))
    context.retry_until_reachable()
