"""``hookledger send``: a realistic sample event for a configured source, signed with the source's own
secret exactly as its provider signs (``Provider.sign``), posted to the running receiver. The samples
live with the providers (each provider package's ``samples``, ``connectors/providers/<kind>/``)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx

from reconciler.config import Settings, SourceSettings
from reconciler.errors import ActionRefusedError, ConfigError
from reconciler.sources import options_of, provider

RETRY_EVERY = 0.2  # seconds between connection attempts while waiting for the receiver


@dataclass(frozen=True)
class Sent:
    n: int
    event_id: str  # as the receiver named it (the sample's own where it did not say)
    status: int
    said: str


def receiver_url(settings: Settings, source: str) -> str:
    """This configuration's receiver, as a process on this host reaches it."""
    host = settings.receiver.host
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{settings.receiver.port}/webhooks/{source}"


def _signed_url(settings: Settings, to: str, chosen: bool) -> str:
    """The URL a provider that signs the URL signs. A URL chosen with ``--to`` is signed as it is,
    as the provider signs the URL it calls; this configuration's own receiver checks its
    ``public_url`` with the path and query when it has one, so that one is signed."""
    public = settings.receiver.public_url
    if chosen or not public:
        return to
    parts = urlsplit(to)
    return public.rstrip("/") + parts.path + (f"?{parts.query}" if parts.query else "")


def check_http_url(value: str, option: str = "--to") -> str:
    """An http(s) URL httpx can send to, or a one-line ConfigError naming the option."""
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{option} {value!r}: not an http(s) URL")
    try:
        httpx.URL(value)
    except (httpx.InvalidURL, ValueError) as exc:
        raise ConfigError(f"{option} {value!r}: {exc}") from None
    return value


def _source(settings: Settings, name: str) -> SourceSettings:
    source = settings.source(name)
    if source is None:
        names = ", ".join(s.name for s in settings.sources) or "none"
        raise ConfigError(f"SOURCE {name!r}: no source of that name (configured: {names})")
    return source


def send_samples(
    settings: Settings,
    name: str,
    *,
    event_type: str | None = None,
    body: bytes | None = None,
    to: str | None = None,
    count: int = 1,
    client: httpx.Client | None = None,
    clock: Callable[[], float] = time.time,
    wait: float = 0.0,
) -> Sequence[Sent]:
    """``wait``: seconds to keep retrying a receiver that refuses the connection (one just started
    with ``serve &`` listens only after its start-up), before the one-line refusal."""
    source = _source(settings, name)
    own = provider(source.kind)
    catalogue = own.samples
    if catalogue is None:
        why = (
            "its deliveries are confirmed through the provider's own API"
            if own.confirm is not None
            else "only the provider can sign its deliveries"
        )
        raise ActionRefusedError(
            f"source '{name}': hookledger cannot send a '{source.kind}' event ({why})"
        )
    if event_type is not None and event_type not in catalogue.types:
        raise ConfigError(
            f"--type {event_type!r}: the '{source.kind}' samples are {', '.join(catalogue.types)} "
            "(or send your own body with --file)"
        )
    if body is not None and own.sign is None:
        raise ConfigError(
            f"--file: a '{source.kind}' body is signed inside each item, which hookledger does "
            "only for its own samples: use --type"
        )
    secret = source.signing_secrets()[0]
    options = options_of(source, secrets=False)
    url = check_http_url(to) if to else receiver_url(settings, name)
    signed_url = _signed_url(settings, url, chosen=bool(to))
    http = client or httpx.Client(timeout=30, follow_redirects=False)
    deadline = time.monotonic() + wait
    out = []
    try:
        for n in range(1, count + 1):
            sample = catalogue.sample(options, event_type, secret)
            content = sample.body if body is None else body
            headers = dict(sample.headers)
            if own.sign is not None:
                headers |= own.sign(options, sample.headers, content, secret, clock(), signed_url)
            response = _post(http, url, content, headers, deadline, wait, hint=not to)
            # an answer the provider expects instead of the receiver's JSON (Twilio's TwiML or
            # empty 200) says no more than its status
            event_id, said = sample.event_id, response.text[:120].strip() or "(empty answer)"
            try:
                document = response.json()
            except ValueError:
                document = None
            if isinstance(document, dict):
                event_id = str(document.get("event_id") or event_id)
                said = str(document.get("status") or said)
                if document.get("reason"):
                    said += f": {document['reason']}"
            out.append(Sent(n, event_id, response.status_code, said))
    finally:
        if client is None:
            http.close()
    return out


def _post(
    http: httpx.Client,
    url: str,
    content: bytes,
    headers: dict[str, str],
    deadline: float,
    wait: float,
    *,
    hint: bool,
) -> httpx.Response:
    """One POST; a refused connection is tried again until ``deadline`` (``time.monotonic``). Only
    the connection is retried: a request the receiver read is never sent twice."""
    while True:
        try:
            return http.post(url, content=content, headers=headers)
        except httpx.ConnectError as exc:
            left = deadline - time.monotonic()
            if left <= 0:
                raise _unreachable(url, exc, hint=hint, waited=wait) from None
            time.sleep(min(RETRY_EVERY, left))
        except httpx.HTTPError as exc:
            raise _unreachable(url, exc, hint=hint, waited=0) from None


def _unreachable(url: str, exc: Exception, *, hint: bool, waited: float) -> ActionRefusedError:
    said = f"{url}: cannot be reached ({exc.__class__.__name__})"
    if waited:
        said += f" after waiting {waited:g} s"
    if hint:
        said += " (is 'hookledger serve' running? else --to URL)"
    return ActionRefusedError(said)
