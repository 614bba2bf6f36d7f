"""What every page shares: the settings, the cached engine, the user's identity, cached reads and
guarded actions. No SQL here: reads and actions are ``reconciler`` functions."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any, TypeVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import streamlit as st
from sqlalchemy import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

from dashboard import signin
from reconciler.config import Settings, load_config
from reconciler.errors import HookledgerError
from reconciler.ops.identity import Identity, require_operator, resolve_identity
from reconciler.storage.engine import make_engine
from reconciler.storage.failures import reason_of
from reconciler.storage.migrate import current_revision, head_revision

T = TypeVar("T")


@st.cache_resource(show_spinner=False, max_entries=4)
def _settings(path: str | None) -> Settings:
    return load_config(path).settings


@st.cache_resource(show_spinner=False, max_entries=4)
def _engine(url: str, connect_timeout: float) -> Engine:
    # The engine (a pool) is cached; sessions and connections never are. A database that hangs
    # fails a page's query after connect_timeout, which the page shows, instead of a blank page.
    return make_engine(url, connect_timeout=connect_timeout)


def settings() -> Settings:
    return _settings(os.environ.get("HOOKLEDGER_CONFIG"))


def engine() -> Engine:
    """The inbox database, which actions write to."""
    db = settings().database
    return _engine(db.url, db.connect_timeout_seconds)


def reader() -> Engine:
    """Where the pages read: ``[dashboard] database_url`` (a read replica), else the inbox database."""
    replica = settings().dashboard.database_url
    if not replica:
        return engine()
    return _engine(replica, settings().database.connect_timeout_seconds)


def db_key() -> str:
    """Part of every cache key, so two databases never share cached reads."""
    return settings().dashboard.database_url or settings().database.url


def link_base() -> str:
    """What links start with: ``[dashboard] public_url`` (absolute links that work pasted anywhere),
    else nothing (relative to this dashboard)."""
    return (settings().dashboard.public_url or "").rstrip("/")


def source_names() -> list[str]:
    return [s.name for s in settings().sources]


def identity() -> Identity:
    cfg = settings().dashboard
    user: dict[str, Any] | None = None
    if cfg.auth.enabled:
        info = st.user.to_dict()  # empty when nobody signed in (or sign-in is not configured)
        user = info if info.get("is_logged_in") else None
    address = st.context.ip_address  # None on the same machine (and outside a browser session)
    return resolve_identity(cfg, user, address if isinstance(address, str) else None)


def now() -> datetime:
    """Now, rounded UP to the next 10 s, so reruns within those seconds share cached reads and
    a range ending "now" still includes what was written a moment ago (ages read up to 10 s high)."""
    t = datetime.now(UTC).replace(microsecond=0)
    return t + timedelta(seconds=10 - t.second % 10)


@contextmanager
def connect() -> Iterator[Connection]:
    """A connection for reading (the replica when one is configured)."""
    with reader().connect() as conn:
        yield conn


def read(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run a read model function on a fresh connection (callers cache with ``cached``)."""
    with connect() as conn:
        return fn(conn, *args, **kwargs)


def ttl() -> int:
    return settings().dashboard.cache_ttl_seconds


def schema_problem() -> str | None:
    """A sentence for the page when the database (or the read replica the pages read) cannot be
    used, else None (within the connection timeout, even when the database hangs)."""
    problem = _problem_of(engine(), "the database", INIT)
    if problem is None and settings().dashboard.database_url:
        problem = _problem_of(
            reader(),
            "the read replica ([dashboard] database_url)",
            "is it replicating [database] url? (`hookledger doctor` checks both)",
        )
    return problem


INIT = "run `hookledger init` (or `hookledger demo`) first"


def _problem_of(eng: Engine, what: str, advice: str) -> str | None:
    timeout = settings().database.connect_timeout_seconds
    head = head_revision()
    answer: list[str | None] = []
    # A database that hangs (accepts, then never answers) blocks a driver call with no timeout of
    # its own: the check runs on a daemon thread the page waits for at most connect_timeout_seconds
    # (daemon, so a stuck one never holds up the server's shutdown).
    check = threading.Thread(
        target=lambda: answer.append(_schema_problem(eng, head, what, advice)),
        name="hookledger-db-check",
        daemon=True,
    )
    check.start()
    check.join(timeout)
    if not answer:
        return (
            f"Cannot reach {what} ({eng.url!r}): it did not answer within {timeout:g} s "
            "([database] connect_timeout_seconds)."
        )
    return answer[0]


def _schema_problem(eng: Engine, head: str | None, what: str, advice: str) -> str | None:
    try:
        current = current_revision(eng)
    except SQLAlchemyError as exc:
        return f"Cannot reach {what} ({eng.url!r}): {reason_of(exc)}"
    if current is None:
        return f"{what[0].upper()}{what[1:]} is empty: {advice}."
    if current != head:
        return f"{what[0].upper()}{what[1:]} is at schema revision {current}, not {head}: {advice}."
    return None


# how often a page that could not reach the database checks again, and comes back by itself
RETRY_SECONDS = 5


def guard() -> bool:
    """Render a clear message instead of the page when the database cannot be used; the page
    checks again every ``RETRY_SECONDS`` and reruns itself once the database answers."""
    with st.spinner("Checking the database…"):
        problem = schema_problem()
    if problem:
        st.error(problem)
        retry_until_reachable()
        return False
    return True


def lost(exc: SQLAlchemyError) -> str:
    """A database error that happened while a page read: one line naming the database."""
    return f"Cannot reach the database ({engine().url!r}) while reading this page: {reason_of(exc)}"


def retry_until_reachable() -> None:
    """Check the database again every ``RETRY_SECONDS`` (a fragment, so only the check reruns);
    once it answers, rerun the whole page."""
    st.caption(f"Checking again every {RETRY_SECONDS} s; the page comes back by itself.")
    st.session_state["_db_retry_first"] = True

    @st.fragment(run_every=RETRY_SECONDS)
    def check() -> None:
        if st.session_state.pop("_db_retry_first", False):
            return  # the page's own run has just checked
        if schema_problem() is None:
            st.rerun(scope="app")

    check()


@dataclass(frozen=True)
class ActionResult:
    ok: bool
    message: str


def act(fn: Callable[[str], str]) -> ActionResult:
    """Run an operator action (a ``reconciler.ops.operator_actions`` function given the actor), or refuse it.

    The identity is checked here, on the server, whatever the page showed."""
    try:
        actor = require_operator(identity())
        message = fn(actor)
    except HookledgerError as exc:  # a refused action, or the database's failure (one line)
        return ActionResult(False, str(exc))
    except SQLAlchemyError as exc:  # SQLAlchemy's own, no statement's (a pool that timed out)
        return ActionResult(False, f"the database refused the action: {reason_of(exc)}")
    finally:
        # every page shows the new state at once, a failed action's too (a failed run is recorded)
        st.cache_data.clear()
    return ActionResult(True, message)


def act_and_refresh(fn: Callable[[str], str]) -> None:
    """Run an action, then rerun the page at once so it shows what the action left, whether it
    succeeded or failed; its message is shown next to the form that asked for it. A refusal
    before anything was done (a read-only user) is shown there too."""
    form = st.session_state.pop("_submitted_form", None)
    result = act(fn)
    flash(result, at=form)
    if result.ok and form is not None:
        st.session_state["_clear_form"] = form
    st.rerun()


def flash(result: ActionResult, at: str | None = None) -> None:
    """Show ``result`` on the next run: next to the form or button ``at`` (``here(at)``), else at
    the top of the page."""
    st.session_state["flash"] = (result.ok, result.message, at)


def show_flash() -> None:
    """At the top of every run: the message of the action that led to it, once. One that belongs
    next to its form is drawn here too and moved there when the form is drawn (``here``), so a
    page that no longer draws the form (the item it acted on left the page's view) still says it."""
    shown = st.session_state.pop("flash", None)
    st.session_state.pop("_flash_here", None)
    if not shown:
        return
    ok, message, at = shown
    slot = st.empty()
    with slot:
        show_result(ActionResult(ok, message))
    if at is not None:
        st.session_state["_flash_here"] = (ok, message, at, slot)


def here(at: str) -> None:
    """Where the form or button ``at`` is: the message of the action it just did, moved here from
    the top of the page."""
    waiting = st.session_state.get("_flash_here")
    if waiting and waiting[2] == at:
        del st.session_state["_flash_here"]
        waiting[3].empty()
        show_result(ActionResult(waiting[0], waiting[1]))


def tz() -> tzinfo:
    """The zone datetimes are shown in: UTC, or the browser's when the sidebar's toggle is on."""
    if st.session_state.get("local_time") and st.context.timezone:
        try:
            return ZoneInfo(st.context.timezone)
        except (ZoneInfoNotFoundError, ValueError):
            return UTC
    return UTC


def tz_name() -> str:
    zone = tz()
    return "UTC" if zone is UTC else str(zone)


def confirmed_form(
    key: str, confirm_label: str, submit_label: str, extra: Callable[[], T] | None = None
) -> tuple[bool, str, T | None]:
    """A form with a required reason and a confirmation box (widget keys ``{key}_reason`` and
    ``{key}_confirm``); ``extra`` renders more widgets inside it. True only when submitted and
    confirmed; the reason is checked again by the action itself."""
    if st.session_state.get("_clear_form") == key:
        # the action this form asked for was done: start the next one from an empty form
        del st.session_state["_clear_form"]
        st.session_state.pop(f"{key}_reason", None)
        st.session_state.pop(f"{key}_confirm", None)
    with st.form(f"{key}_form"):
        value = extra() if extra is not None else None
        reason = st.text_input("Reason (required, recorded in the audit log)", key=f"{key}_reason")
        confirm = st.checkbox(confirm_label, key=f"{key}_confirm")
        submitted = st.form_submit_button(submit_label)
    if submitted and not confirm:
        st.warning("Tick the confirmation first.")
    if submitted and confirm:
        st.session_state["_submitted_form"] = key
    here(key)
    return bool(submitted and confirm), reason, value


def show_result(result: ActionResult) -> None:
    (st.success if result.ok else st.error)(result.message)


def sidebar() -> None:
    """What every page shows in the sidebar: who acts, the time zone toggle."""
    actor_caption()
    st.sidebar.toggle(
        "Local time",
        key="local_time",
        help="Show times in this browser's time zone instead of UTC.",
    )


def sign_in_banner() -> None:
    """With sign-in off, say so on every page: anyone who reaches the port can act."""
    if not settings().dashboard.auth.enabled:
        st.warning(
            "Sign-in is off: everyone who reaches this port can act. Actions are audited as "
            f"`{identity().name}`; turn on `[dashboard.auth]` to know who acted.",
            icon=":material/lock_open:",
        )


def actor_caption() -> None:
    who = identity()
    if who.auth_enabled:
        signin.remember_on_click()  # signing in or out comes back to this page's link
    if who.auth_enabled and not who.signed_in:
        st.sidebar.caption("Read-only: sign in to act.")
        if st.sidebar.button("Sign in", key=signin.SIGN_IN_KEY):
            st.login()
    elif not who.can_act:
        st.sidebar.caption(f"Signed in as {who.name} (read-only)")
    else:
        st.sidebar.caption(f"Acting as **{who.name}**")
    if who.signed_in and st.sidebar.button("Sign out", key=signin.SIGN_OUT_KEY):
        st.logout()
