"""Mailgun's events API, read to reconcile its event webhooks (``kind = "mailgun"``).

Facts, each with its source:

- **Endpoint.** ``GET /v3/{domain_name}/events``, one sending domain a request; HTTP Basic with the
  user ``api`` and an account API key: "Domain Sending Keys … only allow sending messages via a POST
  call on /messages and /messages.mime"
  (https://documentation.mailgun.com/docs/mailgun/api-reference/authentication/). ``begin``/``end`` in epoch seconds, ``ascending`` ``yes`` or
  ``no`` ("Must be provided if the range end time is not specified"), ``limit`` "(300 max)", filters
  such as ``event`` and ``message-id``
  (https://documentation.mailgun.com/docs/mailgun/api-reference/send/mailgun/events/get-v3-domain_name-events).
  The API is marked deprecated in favour of the Logs API there, and still served.
- **Paging.** Each page carries ``paging.next`` (and ``previous``): "keep requesting the next page
  URLs returned along with result pages until an empty result page is reached"; the next URL of
  the last page "always returns an empty result page"
  (https://documentation.mailgun.com/docs/mailgun/user-manual/events/). The page token is in the
  URL's path (``/v3/<domain>/events/W3siY…``: the examples of Mailgun's own libraries, e.g.
  mailgun-php ``tests/Model/Event/EventResponseTest.php``), so the URL is followed as given.
- **Order and window.** An ascending range with no end "is extended all the time as the time goes
  on" (same page): a scan asks ``begin=<since>&ascending=yes`` and reads to the empty page.
- **Identity.** Every event has ``event``, ``timestamp`` (Unix seconds with a fraction) and ``id``,
  "unique within a day", meant to tell events apart across overlapping ranges
  (https://documentation.mailgun.com/docs/mailgun/user-manual/events/event-structure): the same
  ``id`` as a webhook's ``event-data.id``, which the receiver stores.
- **Retention.** The sources disagree: "at least 3 days" (the API reference above); "one day for
  free accounts and up to 30 days for paid accounts based on the subscription plan" (the user
  manual above, older revision); "30 days. Access to this data varies by plan" (its current
  revision). hookledger assumes the 3 days every plan is promised; a source on a longer plan sets
  ``retention_days`` (a Free plan: 1).
- **Errors and rate limit.** A wrong key is answered 401 with the text ``Forbidden``
  (https://github.com/mailgun/mailgun.js/issues/393, https://github.com/anymail/django-anymail/issues/237);
  the response-codes page calls auth errors 403 and says of 429 only that "Mailgun does have rate
  limits in place … Please retry these requests as defined in the response", with no number
  (https://documentation.mailgun.com/docs/mailgun/quickstart-guide/responses). The official SDK
  honours ``Retry-After`` on 429 (mailgun 1.10.0 ``mailgun/config.py`` ``RetryPolicy``).
- **A message's current state.** No event is read by id; a message's newest event is
  ``message-id=<id>&ascending=no&limit=1`` (the filter above), what a divergence is confirmed with.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, urlsplit

from pydantic import Field

from connectors.base import Capabilities, Record
from connectors.budget import BudgetSettings
from connectors.errors import ConfigError, MalformedResponseError, NotFoundError
from connectors.event_list import Call, EventList, event_time, text
from connectors.http import ProviderClient, redact_url
from connectors.options import ProviderKeys, SourceOptions
from connectors.parsing import json_path_get
from connectors.provider import ClientFactory

DEFAULT_BASE_URL = "https://api.mailgun.net"  # EU domains: https://api.eu.mailgun.net
RETENTION_DAYS = 3.0  # the least any plan keeps (the sources above disagree beyond it)
# Mailgun publishes no number for its read APIs: a scan keeps to a modest pace, one at a time
BUDGET = BudgetSettings(rate=2.0, concurrency=1)
MESSAGE = "message"  # the object an event is about: the message it tracks


def origin(url: str) -> tuple[str, str] | None:
    """A URL's scheme and host (None for one that does not parse: ``http://[``)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    return (parts.scheme, parts.netloc) if parts.scheme and parts.netloc else None


class MailgunKeys(ProviderKeys):
    # the sending domain whose events are listed (``/v3/<domain>/events``); receiving needs none
    domain: str | None = Field(default=None, pattern=r"^[A-Za-z0-9.-]{1,253}$")


def rule(values: Mapping[str, Any]) -> str | None:
    if values.get("kind") == "mailgun" and values.get("api_key_env") and not values.get("domain"):
        return (
            "a mailgun source with 'api_key_env' needs 'domain' (the sending domain whose events "
            "are reconciled, e.g. mg.example.com)"
        )
    return None


class MailgunEvents(EventList):
    capabilities = Capabilities(confirms_event_ids=False)
    provider_name = "Mailgun"
    items_path = "items"
    id_path = "id"
    filters_time = True
    retention_days: float | None = RETENTION_DAYS
    permission = "an account API key (a domain sending key only sends)"
    max_page_size = 300

    def __init__(
        self,
        source: str,
        client: ProviderClient,
        domain: str,
        *,
        page_size: int | None = None,
        retention_days: float | None = None,
    ) -> None:
        super().__init__(source, client, page_size=page_size)
        self.list_url = f"/v3/{quote(domain, safe='')}/events"
        if retention_days:
            self.retention_days = retention_days

    def first(self, since: datetime, size: int) -> Call:
        # whole seconds, rounded down: the range starts no later than asked
        begin = str(math.floor(since.timestamp()))
        return Call(self.list_url, (("begin", begin), ("ascending", "yes"), ("limit", size)))

    def onward(self, body: Any, url: str, call: Call, items: list[Any]) -> Call | None:
        if not items:  # Mailgun's end of a range: the empty page
            return None
        following = json_path_get(body, "paging.next")
        # followed with the API key: only on the host that gave it
        if not isinstance(following, str) or origin(following) != origin(url):
            raise MalformedResponseError(
                f"source '{self.source}': {redact_url(url)} lists events but no paging.next URL "
                "on its own host"
            )
        return Call(following)

    def record(self, item: Mapping[str, Any]) -> Record:
        return Record(
            event_id=str(item["id"]),
            event_type=text(item, "event"),
            object_type=MESSAGE,
            object_id=text(item, "message.headers.message-id"),
            occurred_at=event_time(item.get("timestamp")),
            object_version=text(item, "timestamp"),
            payload=item,
        )

    def fetch_object(self, object_type: str, object_id: str) -> Mapping[str, Any]:
        """A message as it is now: its newest event (what a webhook last said of it)."""
        if object_type != MESSAGE:
            return super().fetch_object(object_type, object_id)
        now = str(math.ceil(datetime.now(UTC).timestamp()))
        params = [("begin", now), ("ascending", "no"), ("limit", 1), ("message-id", object_id)]
        body, response = self.client.get_json(
            self.list_url, params=params, permission=self.permission
        )
        url = str(response.request.url)
        listed = self.items(body, url)
        if not listed:
            raise NotFoundError(
                f"source '{self.source}': Mailgun lists no event of message {object_id} "
                "within its retention"
            )
        record = self.checked(listed[0], url, 0)
        return record.payload


def build(options: SourceOptions, client: ClientFactory) -> MailgunEvents:
    domain = options.own(MailgunKeys).domain
    if not options.api_key or not domain:
        raise ConfigError(
            f"source '{options.name}': reconciling Mailgun needs 'api_key_env' (a private API key) "
            "and 'domain' (the sending domain)"
        )
    basic = base64.b64encode(f"api:{options.api_key}".encode()).decode()
    return MailgunEvents(
        options.name,
        client(
            options.base_url or DEFAULT_BASE_URL,
            {"Authorization": f"Basic {basic}"},
            options.hint(),
        ),
        domain,
        page_size=options.page_size,
        retention_days=options.retention_days,
    )
