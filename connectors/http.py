"""The shared HTTP layer: one client per run, explicit timeouts, and the retry policy in one place.

Retried: 429, 5xx, connection errors and timeouts, with exponential backoff and full jitter, honouring
``Retry-After`` (Shopify, GitHub secondary limits), GitHub's ``x-ratelimit-remaining: 0`` +
``x-ratelimit-reset`` (on 403 or 429), and Stripe's ``Stripe-Should-Retry`` (docs/providers.md §1B,
§2B, §3B). Shopify's call-limit bucket (``X-Shopify-Shop-Api-Call-Limit: used/size``) slows requests
down before it overflows. Everything is bounded by a retry budget (attempts and total wait), then
raises :class:`UnavailableError`. 401/403 become :class:`AuthError` naming the permission the call needs.

Every request also goes through the source's :class:`connectors.budget.RequestBudget` (its rate and
requests in flight, shared by all its requests), which hears of each answer: refusals slow it down,
Shopify's and GitHub's allowance headers cap it.
"""

from __future__ import annotations

import json
import logging
import queue
import random
import re
import threading
import time
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import orjson

from connectors.budget import BudgetSettings, RequestBudget
from connectors.errors import (
    AuthError,
    ConnectorError,
    MalformedResponseError,
    NotFoundError,
    UnavailableError,
)
from connectors.retry import full_jitter, parse_retry_after, transient_status

if TYPE_CHECKING:
    import httpx

log = logging.getLogger(__name__)

SECRET_PARAM = re.compile(r"(token|key|secret|signature|password|sig|auth)", re.I)
USER_AGENT = "hookledger-connector"


@dataclass(frozen=True)
class RetryPolicy:
    """How one request is retried: ``max_attempts`` transient failures (5xx, a transport error, an
    answer that is not JSON, a bare 429), and refusals for the rate that say when to come back for
    as long as the waits add up to no more than ``max_total_wait`` (a run's ``[reconcile]
    max_wait_seconds``)."""

    max_attempts: int = 6
    base_delay: float = 0.5
    max_delay: float = 30.0
    max_total_wait: float = 300.0


# sends of one request at most, whatever the waits: a provider answering 429 with ``Retry-After: 0``
# for ever must still end the run
MAX_SENDS = 200


def redact_url(url: str | httpx.URL) -> str:
    """The URL with secret-looking query values masked (for errors and logs)."""
    text = str(url)
    if not SECRET_PARAM.search(text.partition("?")[2]):  # the common case: nothing to mask
        return text
    parts = urlsplit(text)
    query = [(k, "***" if SECRET_PARAM.search(k) else v) for k, v in parse_qsl(parts.query)]
    return urlunsplit(parts._replace(query=urlencode(query, safe="[]*,:")))


def retry_after_seconds(response: httpx.Response, now: float) -> float | None:
    """The wait the provider asks for, if any."""
    asked = parse_retry_after(response.headers.get("retry-after"), now)
    if asked is not None:
        return asked
    if response.headers.get("x-ratelimit-remaining") == "0":
        reset = response.headers.get("x-ratelimit-reset")
        if reset and reset.isdigit():
            return max(0.0, int(reset) - now) + 1.0
    if response.headers.get("ratelimit-remaining") == "0":
        # the IETF draft's headers (GoCardless): the reset as seconds to wait, or an HTTP date
        return parse_retry_after(response.headers.get("ratelimit-reset"), now)
    return None


def provider_paced(response: httpx.Response, asked: float | None) -> bool:
    """A refusal for the rate in which the provider says to come back (when, or just that it
    should): waited out within the run's patience, not counted as a failed attempt."""
    return asked is not None or response.headers.get("stripe-should-retry") == "true"


def is_rate_limited(response: httpx.Response) -> bool:
    if response.status_code == 429:
        return True
    # GitHub signals primary and secondary rate limits with 403 too.
    if response.status_code == 403:
        if (
            response.headers.get("x-ratelimit-remaining") == "0"
            or "retry-after" in response.headers
        ):
            return True
        return "rate limit" in response.text[:500].lower()
    return False


class ProviderClient:
    """An httpx client for one source with the project's retry and error policy."""

    def __init__(
        self,
        source: str,
        base_url: str,
        *,
        headers: Mapping[str, str] | None = None,
        auth_hint: str = "",
        transport: httpx.BaseTransport | None = None,
        timeout: float = 30.0,
        policy: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
        budget: RequestBudget | None = None,
    ) -> None:
        self.source = source
        # no client-side limit unless configured; the provider's signals still slow it down
        self.budget = budget or RequestBudget(BudgetSettings(None, 64), sleep=sleep)
        self.auth_hint = auth_hint
        self.policy = policy or RetryPolicy()
        self._sleep = sleep
        self._rng = rng or random.Random()
        import httpx  # here, not at the top: the configuration imports the providers, not HTTP

        self._httpx = httpx
        self._client = httpx.Client(
            base_url=base_url,
            headers={"User-Agent": USER_AGENT, "Accept": "application/json", **(headers or {})},
            timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)),
            transport=transport,
            # one pooled connection for each request the budget lets be in flight at once
            limits=httpx.Limits(
                max_connections=self.budget.concurrency,
                max_keepalive_connections=self.budget.concurrency,
            ),
            follow_redirects=False,
        )
        self.requests_made = 0

    def close(self) -> None:
        self._client.close()

    def pause(self, seconds: float) -> None:
        """Wait as this client waits between retries (tests pass a sleep that only records)."""
        self._sleep(seconds)

    def set_header(self, name: str, value: str) -> None:
        self._client.headers[name] = value

    def request(
        self,
        method: str,
        url: str,
        *,
        params: Any = None,
        json: Any = None,
        permission: str = "",
        expected: tuple[int, ...] = (200,),
        form: Mapping[str, str] | None = None,
        auth: tuple[str, str] | None = None,
    ) -> httpx.Response:
        """Send with retries; return a response whose status is in ``expected`` (``form``: a
        form-encoded body; ``auth``: HTTP Basic credentials for this request alone, as an OAuth
        token request carries them)."""
        return self._send(
            method, url, params, json, permission, expected, decode=False, form=form, auth=auth
        )[1]

    def get_json(
        self, url: str, *, params: Any = None, permission: str = ""
    ) -> tuple[Any, httpx.Response]:
        return self._send("GET", url, params, None, permission, (200,), decode=True)

    def post_json(self, url: str, body: Any, *, permission: str = "") -> tuple[Any, httpx.Response]:
        """A read made as a POST (a GraphQL query): the JSON answer and the response."""
        return self._send("POST", url, None, body, permission, (200,), decode=True)

    def _send(
        self,
        method: str,
        url: str,
        params: Any,
        json: Any,
        permission: str,
        expected: tuple[int, ...],
        *,
        decode: bool,
        form: Mapping[str, str] | None = None,
        auth: tuple[str, str] | None = None,
    ) -> tuple[Any, httpx.Response]:
        """The retry loop. Transient failures (a transport error, 408/5xx, a bare 429, and with
        ``decode`` an answer that is not JSON: a proxy's HTML page, a body cut short) take one of
        ``max_attempts``; a refusal for the rate that says when to come back (``Retry-After``,
        GitHub's reset, ``Stripe-Should-Retry: true``) takes none. Both stop when the next wait
        would pass ``max_total_wait``."""
        waited = 0.0
        last: str = ""
        malformed: str | None = None
        failures = 0
        target, params = with_query(url, params)
        sends = 0
        while sends < MAX_SENDS:
            sends += 1
            try:
                with self.budget.slot():
                    response = self._client.request(
                        method, target, params=params, json=json, data=form, auth=auth
                    )
                self.requests_made += 1
            except self._httpx.TransportError as exc:
                last, malformed = f"{exc.__class__.__name__}: {exc}", None
                failures += 1
                delay = self._backoff(failures)
            else:
                if response.status_code in expected:
                    self.budget.succeeded(response.headers)
                    if not decode:
                        return None, response
                    try:
                        return decode_json(response.content), response
                    except (UnicodeDecodeError, ValueError):
                        last = malformed = self._not_json(response)
                        failures += 1
                        delay = self._backoff(failures)
                else:
                    malformed = None
                    target = redact_url(response.request.url)
                    if is_rate_limited(response):
                        last = f"HTTP {response.status_code} (rate limited)"
                        asked = retry_after_seconds(response, time.time())
                        self.budget.throttled(asked)
                        if not provider_paced(response, asked):
                            failures += 1
                        delay = asked or self._backoff(max(1, failures))
                    elif transient_status(response.status_code):
                        last = f"HTTP {response.status_code}"
                        failures += 1
                        delay = self._backoff(failures)
                    elif response.status_code in (401, 403):
                        raise AuthError(self._auth_message(response, target, permission))
                    elif response.status_code == 404:
                        raise NotFoundError(
                            f"source '{self.source}': {method} {target} answered 404: {_snippet(response)}"
                        )
                    else:
                        raise ConnectorError(
                            f"source '{self.source}': {method} {target} answered HTTP {response.status_code}: {_snippet(response)}"
                        )
                    if response.headers.get("stripe-should-retry") == "false":
                        raise UnavailableError(
                            f"source '{self.source}': {method} {target}: {last}, and Stripe-Should-Retry is false"
                        )
            if failures >= self.policy.max_attempts or waited + delay > self.policy.max_total_wait:
                break
            log.info(
                "retrying %s %s in %.1fs after %s",
                method,
                redact_url(url),
                delay,
                last,
                extra={"source": self.source},
            )
            self._sleep(delay)
            waited += delay
        if malformed is not None:
            raise MalformedResponseError(
                f"{malformed} (after {sends} attempt(s) and {waited:.1f}s of waiting)"
            )
        raise UnavailableError(
            f"source '{self.source}': {method} {redact_url(url)} failed after {sends} attempt(s) and "
            f"{waited:.1f}s of waiting; last error: {last}"
        )

    def _not_json(self, response: httpx.Response) -> str:
        return (
            f"source '{self.source}': {response.request.method} {redact_url(response.request.url)} did not return JSON "
            f"({response.headers.get('content-type', 'no content type')}): {_snippet(response)}"
        )

    def _backoff(self, attempt: int) -> float:
        return full_jitter(attempt, self.policy.base_delay, self.policy.max_delay, self._rng)

    def _auth_message(self, response: httpx.Response, target: str, permission: str) -> str:
        what = "rejected the credentials" if response.status_code == 401 else "refused the request"
        need = f"; this call needs {permission}" if permission else ""
        hint = f" Check {self.auth_hint}." if self.auth_hint else ""
        return (
            f"source '{self.source}': {target} {what} (HTTP {response.status_code}: "
            f"{_snippet(response)}){need}.{hint}"
        )


def with_query(url: str, params: Any) -> tuple[str, Any]:
    """``url`` with ``params`` encoded onto it by httpx's own encoder (``httpx.QueryParams``: the same
    query string, byte for byte), and no params left to pass. Given as ``params=``, httpx parses and
    rebuilds the URL twice more for every request, and a scan requests every page from its paging
    thread. A URL that has a query already (a ``Link``
    header's next page) is left to httpx, which merges the two."""
    if not params or "?" in url:
        return url, params
    import httpx

    return f"{url}?{httpx.QueryParams(params)}", None


def decode_json(content: bytes) -> Any:
    """A provider's JSON document. orjson decodes a page in well under half the time ``json`` takes
    (a scan decodes every page; docs/benchmarks.md); what it refuses and ``json`` accepts (a byte order
    mark, NaN) falls back to ``json``. Integers beyond 64 bits come back as floats (no provider API
    sends them: ids are strings or 64-bit, amounts are minor units)."""
    try:
        return orjson.loads(content)
    except orjson.JSONDecodeError:
        return json.loads(content)


def _snippet(response: httpx.Response) -> str:
    return response.text[:200].replace("\n", " ")


def require(document: Any, key: str, *, source: str, url: str, kind: type = object) -> Any:
    """``document[key]`` or a MalformedResponseError naming the source, URL and the missing field."""
    if (
        not isinstance(document, Mapping)
        or key not in document
        or not isinstance(document[key], kind)
    ):
        got = (
            type(document.get(key)).__name__
            if isinstance(document, Mapping) and key in document
            else "nothing"
        )
        raise MalformedResponseError(
            f"source '{source}': {redact_url(url)} returned no '{key}' of type {kind.__name__} (got {got})"
        )
    return document[key]


def parse_link_header(value: str | None) -> dict[str, str]:
    """``<url>; rel="next", <url>; rel="prev"`` → {"next": url, "prev": url}."""
    links: dict[str, str] = {}
    if not value:
        return links
    for part in value.split(","):
        match = re.match(r'\s*<([^>]*)>\s*;\s*rel="?([^";]+)"?', part)
        if match:
            links[match.group(2)] = match.group(1)
    return links


_END = object()


def fetch_ahead(
    fetch: Callable[[Any], Any], first: Any, following: Callable[[Any], Any]
) -> Generator[Any, None, None]:
    """``fetch(first)``, then ``fetch(following(result))`` while that is not None, each result
    yielded in order, fetched by a worker thread that runs ahead of the caller.

    Cursor paging is sequential (a page's request needs the previous page), so its pace is the
    provider's latency plus the client's own work on each response. The worker asks for the next page
    as soon as it has decoded one (``following`` reads the next cursor off it), without waiting for
    the caller to take the page: records are built and the page's database work is done while the
    next request is out. At most one request is in flight and one decoded page waits in the hand-over
    queue. Submitting the next request from the caller, on taking a page, sent it later every page
    (waking the caller, then handing the interpreter back).

    An error raised by ``fetch`` or ``following`` is raised to the caller, after the pages before it.
    Closing the generator (the caller stops early, or fails) stops the worker after its current
    request; use ``contextlib.closing`` where the caller may stop early."""
    handover: queue.Queue[tuple[Any, BaseException | None]] = queue.Queue(maxsize=1)
    stop = threading.Event()

    def put(item: tuple[Any, BaseException | None]) -> bool:
        while not stop.is_set():
            try:
                handover.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def work() -> None:
        arg = first
        try:
            while arg is not None and not stop.is_set():
                result = fetch(arg)
                arg = following(result)
                if not put((result, None)):
                    return
            put((_END, None))
        except BaseException as exc:  # handed to the caller, which raises it
            put((_END, exc))

    worker = threading.Thread(target=work, name="fetch-ahead", daemon=True)
    worker.start()
    try:
        while True:
            result, error = handover.get()
            if error is not None:
                raise error
            if result is _END:
                return
            yield result
    finally:
        stop.set()
        while worker.is_alive():  # a worker blocked on a full queue sees ``stop`` within 0.1 s
            worker.join(timeout=0.2)
