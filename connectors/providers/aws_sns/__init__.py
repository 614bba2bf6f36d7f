"""Amazon SNS HTTP(S) subscriptions (``kind = "aws_sns"``): each message signed with Amazon's RSA
key, checked with the certificate SNS names, fetched from an Amazon SNS host only.

Facts (with sources):

- The body is a JSON document (sent as ``Content-Type: text/plain; charset=UTF-8``) with ``Type``
  (``Notification``, ``SubscriptionConfirmation`` or ``UnsubscribeConfirmation``), ``MessageId``
  (a UUID; a retry carries the original's), ``TopicArn``, ``Subject`` (optional), ``Message``,
  ``Timestamp`` (ISO 8601, GMT: when it was published), ``SignatureVersion``, ``Signature``,
  ``SigningCertURL`` and ``UnsubscribeURL``; a confirmation carries ``Token`` and
  ``SubscribeURL`` instead of ``Subject`` and ``UnsubscribeURL``. Headers ``x-amz-sns-message-type``,
  ``x-amz-sns-message-id``, ``x-amz-sns-topic-arn`` repeat them.
  https://docs.aws.amazon.com/sns/latest/dg/http-notification-json.html,
  https://docs.aws.amazon.com/sns/latest/dg/http-subscription-confirmation-json.html,
  https://docs.aws.amazon.com/sns/latest/dg/http-unsubscribe-confirmation-json.html
- Signature: ``SignatureVersion`` 1 is SHA1withRSA, 2 SHA256withRSA, base64, over the string
  ``name\\nvalue\\n`` of each field in a fixed order: a Notification's ``Message``, ``MessageId``,
  ``Subject`` (only when present), ``Timestamp``, ``TopicArn``, ``Type``; a confirmation's
  ``Message``, ``MessageId``, ``SubscribeURL``, ``Timestamp``, ``Token``, ``TopicArn``, ``Type``.
  The key is the X.509 certificate at ``SigningCertURL``, which must be fetched over HTTPS from an
  Amazon SNS host (``sns.<region>.amazonaws.com``, ``.amazonaws.com.cn`` in China): any other URL
  is refused before anything is fetched; AWS also says to refuse unexpected topics (``topic_arns``).
  https://docs.aws.amazon.com/sns/latest/dg/sns-verify-signature-of-message.html,
  https://docs.aws.amazon.com/sns/latest/dg/sns-verify-signature-of-message-verify-message-signature.html
- No time window is documented, and a retry is the same signed message (same ``Timestamp``), sent
  for as long as the topic's delivery policy says: the time is not checked; ``MessageId``
  deduplicates a replay. https://docs.aws.amazon.com/sns/latest/dg/sns-message-delivery-retries.html
- A SubscriptionConfirmation is confirmed by visiting its ``SubscribeURL`` (or ConfirmSubscription
  with its ``Token``). hookledger visits it itself only for a topic listed in ``topic_arns`` and
  only on an SNS host, after the signature is checked; otherwise it answers 200 and confirms
  nothing (confirm it in the SNS console). An UnsubscribeConfirmation is verified and answered 200;
  its ``SubscribeURL`` (which would subscribe again) is never visited.
  https://docs.aws.amazon.com/sns/latest/dg/SendMessageToHttp.confirm.html
- Identity: ``MessageId``; type ``Notification``; the object is the topic (``TopicArn``); time
  ``Timestamp``. Raw message delivery must stay off: a raw message carries no signature.

No official Python library verifies SNS messages (boto3 does not; AWS publishes validators for
PHP, JavaScript, Java, .NET and Ruby): the tests sign messages the way the documentation says, with
a certificate and key made for the test.

The certificate is fetched with network I/O, so a source of this kind is confirmed like GoPay's
(``Provider.confirm``): off the event loop, on the source's own threads, one call per MessageId per
window. ``verify`` (the same check, with a short-lived HTTP client) serves callers outside the
receiver.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import timedelta
from typing import Any

from connectors.base import Access, Capabilities, Cursor, Listing, Page, Record, ScanOptions
from connectors.errors import ConnectorError, UnavailableError, UnsupportedError
from connectors.options import ProviderKeys, SourceOptions
from connectors.provider import ClientFactory, Provider
from connectors.providers.aws_sns import signature
from connectors.providers.aws_sns.signature import (
    NOTIFICATION,
    SUBSCRIBE,
    CertificateCache,
    Fetch,
)
from connectors.scheme import Scheme
from connectors.webhooks import (
    BadPayload,
    Batch,
    BatchItem,
    Handshake,
    ParsedEvent,
    RejectedDelivery,
    Reply,
    Verdict,
    WebhookRequest,
    iso_time,
    load_json,
)

FETCH_TIMEOUT = 5.0  # seconds for the certificate or the confirmation link, connect included
CERTIFICATES = CertificateCache()  # shared by every source: a certificate is Amazon's, not theirs
# SNS's signature is RSA with a fetched certificate: no family of connectors.scheme expresses it
SCHEME: Scheme | None = None
SAMPLES = None  # only Amazon holds the key: no sample can be signed here


class SnsKeys(ProviderKeys):
    # the topics whose messages are taken (empty: any topic); a subscription to one of them is
    # confirmed by hookledger itself
    topic_arns: tuple[str, ...] = ()


def rule(values: Mapping[str, Any]) -> str | None:
    arns = values.get("topic_arns") or ()
    if values.get("kind") == "aws_sns":
        for arn in arns:
            if not isinstance(arn, str) or not arn.startswith("arn:aws") or arn.count(":") != 5:
                return f"topic_arns: {str(arn)[:80]!r} is not a topic ARN (arn:aws:sns:…:…:…)"
    return None


def document_of(request: WebhookRequest) -> dict[str, Any]:
    document = load_json(request.body, required=True)
    if not isinstance(document, dict):
        raise BadPayload("not an SNS message (raw message delivery must be off)")
    kind = signature.message_type(document)
    header = request.header("x-amz-sns-message-type")
    if header is not None and header != kind:
        raise BadPayload(f"x-amz-sns-message-type {header[:40]!r} is not the body's Type")
    return document


def message_id_of(request: WebhookRequest) -> str:
    """The gate's key: the MessageId (BadPayload unless it is an SNS message with a UUID)."""
    return signature.message_id(document_of(request))


def read(
    request: WebhookRequest,
    topics: tuple[str, ...],
    fetch: Fetch,
    *,
    cache: CertificateCache = CERTIFICATES,
) -> tuple[Verdict, dict[str, Any]]:
    """The signed message's verdict (a handshake for a confirmation) and the message."""
    document = document_of(request)
    event_id = signature.message_id(document)
    topic = document.get("TopicArn")
    if topics and topic not in topics:
        raise RejectedDelivery(403, f"topic {str(topic)[:200]!r} is not in topic_arns")
    signature.check(document, fetch, cache, request.now)
    kind = str(document["Type"])
    if kind != NOTIFICATION:
        return Handshake(Reply(200), f"{kind} for {topic}"), document
    event = ParsedEvent(
        event_id=event_id,
        event_type=NOTIFICATION,
        object_type="topic",
        object_id=str(topic),
        occurred_at=iso_time(document.get("Timestamp")),
    )
    # SNS sends text/plain: stored as the JSON it is
    return Batch((BatchItem(event, request.body, "application/json"),)), document


class SnsConnector:
    """The HTTP the receiver needs for SNS: the certificates and the confirmation links. SNS keeps
    no record hookledger could list or fetch."""

    capabilities = Capabilities(lists_events=False)
    listing = Listing()

    def __init__(self, source: str, topics: tuple[str, ...], *, transport: Any = None) -> None:
        import httpx

        self.source = source
        self.topics = topics
        self.client = httpx.Client(
            timeout=httpx.Timeout(FETCH_TIMEOUT),
            follow_redirects=False,
            transport=transport,
            headers={"User-Agent": "hookledger-connector"},
        )
        self.fetch = signature.fetch_with(self.client)
        self.confirmed: list[str] = []  # topics confirmed, for tests and logs

    @property
    def retention(self) -> timedelta | None:
        return None

    def request_rate(self) -> float | None:
        return None

    def close(self) -> None:
        self.client.close()

    def subscribe(self, document: Mapping[str, Any]) -> None:
        """Visit a verified SubscriptionConfirmation's SubscribeURL (an SNS host only)."""
        import httpx

        url = signature.subscribe_url(document)
        try:
            response = self.client.get(url)
        except httpx.HTTPError as exc:
            raise UnavailableError(
                f"source '{self.source}': could not confirm the subscription "
                f"({exc.__class__.__name__})"
            ) from None
        if response.status_code != 200:
            raise UnavailableError(
                f"source '{self.source}': SNS answered HTTP {response.status_code} to the "
                "subscription's confirmation"
            )
        self.confirmed.append(str(document.get("TopicArn")))

    def pages(self, cursor: Cursor | None, options: ScanOptions) -> Iterator[Page]:
        yield Page((), {}, done=True)

    def fetch_event(self, event_id: str) -> Record:
        raise UnsupportedError(f"source '{self.source}': SNS keeps no messages to fetch")

    def fetch_object(self, object_type: str, object_id: str) -> Mapping[str, Any]:
        raise UnsupportedError(f"source '{self.source}': SNS keeps no objects to fetch")

    def redeliver(self, event_id: str) -> None:
        raise UnsupportedError(f"source '{self.source}': SNS cannot be asked to send it again")

    def check_access(self) -> Access:
        return Access("SNS needs no credentials: messages are checked with Amazon's certificates")


def confirm(connector: Any, request: WebhookRequest) -> Verdict:
    """The receiver's path: the message checked with the connector's HTTP client, a listed
    topic's subscription confirmed."""
    verdict, document = read(request, connector.topics, connector.fetch)
    if document["Type"] == SUBSCRIBE and isinstance(verdict, Handshake):
        topic = str(document.get("TopicArn"))
        if topic in connector.topics:
            connector.subscribe(document)
            return Handshake(Reply(200), f"SubscriptionConfirmation for {topic}: confirmed")
        return Handshake(
            Reply(200),
            f"SubscriptionConfirmation for {topic}: not confirmed (not in topic_arns; confirm "
            "it in the SNS console)",
        )
    return verdict


def _verify(options: SourceOptions, request: WebhookRequest, secrets: tuple[str, ...]) -> Verdict:
    """The same check outside the receiver (a short-lived client; nothing is confirmed)."""
    connector = SnsConnector(options.name, options.own(SnsKeys).topic_arns)
    try:
        return read(request, connector.topics, connector.fetch)[0]
    except ConnectorError as exc:
        raise RejectedDelivery(503, f"could not fetch the SNS certificate ({exc})") from None
    finally:
        connector.close()


def build(options: SourceOptions, client: ClientFactory) -> SnsConnector:
    return SnsConnector(options.name, options.own(SnsKeys).topic_arns)


PROVIDER = Provider(
    "aws_sns",
    verify=_verify,
    build=build,
    keys=SnsKeys,
    validate=rule,
    signed_with_secret=False,
    confirm=confirm,
    confirm_key=message_id_of,
    samples=SAMPLES,
    tolerance=0,
    fingerprint_ignore=(),
)

__all__ = ["CERTIFICATES", "PROVIDER", "SCHEME", "SnsConnector", "SnsKeys", "confirm", "read"]
