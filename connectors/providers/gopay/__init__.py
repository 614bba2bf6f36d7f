"""GoPay's payment notifications (``kind = "gopay"``): an unsigned GET carrying only the payment id,
confirmed by reading the payment from GoPay's API before anything is stored.

Facts (docs/providers.md "GoPay", with sources):

- The notification is an HTTP GET to the payment's ``notification_url`` with ``?id=<payment id>``
  (``parent_id`` too for a recurrence). It carries no signature and no state: anyone can send one,
  so the request is never acted on as it arrived. The payment is read with
  ``GET /api/payments/payment/{id}`` and what GoPay answers is stored.
- The API takes an OAuth2 access token: ``POST /api/oauth2/token`` with HTTP Basic
  ``<ClientID>:<ClientSecret>`` and the form ``grant_type=client_credentials&scope=payment-all``
  (reading a payment needs ``payment-all``); it expires after ``expires_in`` seconds (30 minutes).
- Identity: the payment id and the state read (``3000006529:PAID``): a notification GoPay repeats
  for the same state is a duplicate, each new state its own event (``payment.PAID``).
- No API lists payments: reconciliation reads back each payment the inbox has events of within the
  window, and compares its state (a state no notification reported is ``missing``).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator, Mapping
from datetime import timedelta
from typing import Any

from connectors.base import Access, Capabilities, Cursor, Listing, Page, Record, ScanOptions
from connectors.errors import (
    ConfigError,
    MalformedResponseError,
    NotFoundError,
    RejectedDelivery,
    UnsupportedError,
)
from connectors.http import ProviderClient, redact_url
from connectors.oauth import ClientCredentials
from connectors.options import ProviderKeys, SourceOptions
from connectors.provider import ClientFactory, Provider
from connectors.webhooks import (
    BadPayload,
    Batch,
    BatchItem,
    ParsedEvent,
    SignatureError,
    WebhookRequest,
    required_id,
)

DEFAULT_BASE_URL = "https://gate.gopay.cz"  # GoPay's sandbox: https://gw.sandbox.gopay.com
TOKEN_PATH = "/api/oauth2/token"
PAYMENT_PATH = "/api/payments/payment/{id}"
PAYMENT_ID = re.compile(r"[0-9]{1,19}")
SCOPE = "payment-all"  # a payment-create token cannot read a payment
PAGE_SIZE = 100  # payments read back per page of a reconciliation


class GoPayKeys(ProviderKeys):
    # environment variables holding the OAuth client's credentials (both are needed: the receiver
    # confirms each notification with them)
    client_id_env: str | None = None
    client_secret_env: str | None = None


def rule(values: Mapping[str, Any]) -> str | None:
    if values.get("kind") == "gopay" and not (
        values.get("client_id_env") and values.get("client_secret_env")
    ):
        return (
            "a gopay source needs 'client_id_env' and 'client_secret_env': its notifications are "
            "unsigned and confirmed by reading the payment from GoPay's API"
        )
    return None


def payment_record(payment: Mapping[str, Any]) -> Record:
    """A payment as read, as the notification of its current state."""
    pid, state = str(payment["id"]), str(payment["state"])
    return Record(
        event_id=f"{pid}:{state}",
        event_type=f"payment.{state}",
        object_type="payment",
        object_id=pid,
        occurred_at=None,  # GoPay's payment carries no time of its state: judged when read
        object_version=state,
        payload=payment,
    )


class GoPayConnector:
    # reads payments back one by one: no list, no delivery log
    capabilities = Capabilities(lists_events=False)
    listing = Listing()

    def __init__(
        self,
        source: str,
        client: ProviderClient,
        *,
        client_id: str,
        client_secret: str,
        clock: Any = time.monotonic,
    ) -> None:
        self.source = source
        self.client = client
        self.token = ClientCredentials(
            source,
            client,
            token_path=TOKEN_PATH,
            credentials=(client_id, client_secret),
            form={"grant_type": "client_credentials", "scope": SCOPE},
            permission=f"the {SCOPE} scope",
            default_ttl=1800,
            clock=clock,
        )

    @property
    def retention(self) -> timedelta | None:
        return None

    def request_rate(self) -> float | None:
        return self.client.budget.current_rate()

    def close(self) -> None:
        self.client.close()

    def _authorise(self) -> None:
        self.token.authorise()

    def payment(self, payment_id: str) -> Mapping[str, Any]:
        self._authorise()
        body, response = self.client.get_json(
            PAYMENT_PATH.format(id=payment_id), permission=f"the {SCOPE} scope"
        )
        if not isinstance(body, dict) or "id" not in body or not isinstance(body.get("state"), str):
            raise MalformedResponseError(
                f"source '{self.source}': {redact_url(response.request.url)} is not a payment "
                "(no id and state)"
            )
        return body

    def pages(self, cursor: Cursor | None, options: ScanOptions) -> Iterator[Page]:
        """Each payment the inbox knows within the window, read back (no API lists them)."""
        known = options.known_objects() if options.known_objects else iter(())
        batch: list[Record] = []
        for payment_id in known:
            try:
                batch.append(payment_record(self.payment(payment_id)))
            except NotFoundError:
                continue  # a payment GoPay no longer shows: nothing to compare
            if len(batch) == PAGE_SIZE:
                yield Page(tuple(batch), {}, done=False, url=PAYMENT_PATH)
                batch = []
        yield Page(tuple(batch), {}, done=True, url=PAYMENT_PATH)

    def fetch_object(self, object_type: str, object_id: str) -> Mapping[str, Any]:
        if object_type != "payment":
            raise UnsupportedError(
                f"source '{self.source}': GoPay objects here are payments, not '{object_type}'"
            )
        return self.payment(object_id)

    def fetch_event(self, event_id: str) -> Record:
        payment_id, _, state = event_id.partition(":")
        payment = self.payment(payment_id)
        if state and payment["state"] != state:
            raise NotFoundError(
                f"source '{self.source}': payment {payment_id} is now {payment['state']}, not "
                f"{state}: GoPay shows only the current state"
            )
        return payment_record(payment)

    def redeliver(self, event_id: str) -> None:
        raise UnsupportedError(
            f"source '{self.source}': GoPay cannot be asked to send a notification again"
        )

    def check_access(self) -> Access:
        self._authorise()
        return Access(f"the OAuth client gets a {SCOPE} token (reads payments)")


def payment_id_of(request: WebhookRequest) -> str:
    """The payment a notification names, refused before any call unless it is a GoPay payment id:
    ASCII digits that fit GoPay's 64-bit ids (``str.isdigit`` would pass fullwidth and superscript digits)."""
    payment_id = required_id(request.query_value("id"), "the query's id")
    if not PAYMENT_ID.fullmatch(payment_id):
        raise BadPayload(f"the query's id {payment_id[:40]!r} is not a GoPay payment id")
    return payment_id


def confirm(connector: Any, request: WebhookRequest) -> Batch:
    """A notification confirmed by the payment GoPay shows now: stored as that payment, identity
    its id and state. A payment GoPay does not know is refused (anyone can send the GET)."""
    payment_id = payment_id_of(request)
    try:
        payment = connector.payment(payment_id)
    except NotFoundError:
        raise RejectedDelivery(
            400, f"GoPay does not know payment {payment_id}: not stored"
        ) from None
    if str(payment["id"]) != payment_id:
        raise RejectedDelivery(
            400, f"GoPay answered payment {payment['id']} for {payment_id}: not stored"
        )
    record = payment_record(payment)
    event = ParsedEvent(
        event_id=str(record.event_id),
        event_type=record.event_type,
        object_type="payment",
        object_id=payment_id,
    )
    body = json.dumps(payment, separators=(",", ":")).encode()
    return Batch((BatchItem(event, body, "application/json"),))


def _unsigned(options: SourceOptions, request: WebhookRequest, secrets: tuple[str, ...]) -> Any:
    """Never called: ``confirm`` is (a notification carries nothing to verify alone)."""
    raise SignatureError("a GoPay notification is confirmed through GoPay's API")


def build(options: SourceOptions, client: ClientFactory) -> GoPayConnector:
    client_id = options.credentials.get("client_id")
    client_secret = options.credentials.get("client_secret")
    if not client_id or not client_secret:
        raise ConfigError(
            f"source '{options.name}': GoPay needs client_id_env and client_secret_env set"
        )
    return GoPayConnector(
        options.name,
        client(options.base_url or DEFAULT_BASE_URL, {}, "the credentials in client_*_env"),
        client_id=client_id,
        client_secret=client_secret,
    )


PROVIDER = Provider(
    "gopay",
    verify=_unsigned,
    build=build,
    keys=GoPayKeys,
    validate=rule,
    signed_with_secret=False,
    methods=("GET",),
    confirm=confirm,
    confirm_key=payment_id_of,
)
