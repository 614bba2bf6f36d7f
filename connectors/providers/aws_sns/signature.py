"""Amazon SNS's message signature: the string to sign, the signing certificate's URL (an Amazon SNS
host over HTTPS, checked before anything is fetched), the certificate fetched once and cached, and
the RSA check (SHA1withRSA for ``SignatureVersion`` 1, SHA256withRSA for 2).

Sources: https://docs.aws.amazon.com/sns/latest/dg/sns-verify-signature-of-message.html and
https://docs.aws.amazon.com/sns/latest/dg/sns-verify-signature-of-message-verify-message-signature.html
"""

from __future__ import annotations

import base64
import binascii
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from connectors.errors import UnavailableError
from connectors.webhooks import BadPayload, SignatureError

# The hosts SNS serves its certificates and confirmation links from; the pattern AWS's own message
# validators use (aws-php-sns-message-validator, aws-js-sns-message-validator), ``.cn`` for China.
SNS_HOST = re.compile(r"sns\.[a-z0-9\-]{3,}\.amazonaws\.com(\.cn)?")
MESSAGE_ID = re.compile(
    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
)
NOTIFICATION = "Notification"
SUBSCRIBE = "SubscriptionConfirmation"
UNSUBSCRIBE = "UnsubscribeConfirmation"
TYPES = (NOTIFICATION, SUBSCRIBE, UNSUBSCRIBE)
# the fields signed, in the documented order (Subject only when present)
NOTIFICATION_FIELDS = ("Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type")
CONFIRMATION_FIELDS = (
    "Message",
    "MessageId",
    "SubscribeURL",
    "Timestamp",
    "Token",
    "TopicArn",
    "Type",
)
HASHES = {"1": "sha1", "2": "sha256"}
MAX_PEM = 16 * 1024  # a certificate is ~2 KB: anything far larger is not one
MAX_SIGNATURE = 2048  # base64 of a 4096-bit RSA signature is 684 characters
CACHED = 32  # certificates kept (SNS rotates them rarely; one per region in use)

# (the certificate's URL) -> its PEM bytes; raises SignatureError (no such certificate) or a
# ConnectorError (the host did not answer: the delivery is answered 503 and sent again)
Fetch = Callable[[str], bytes]


def strict_base64(text: str) -> bytes | None:
    if not text.isascii() or len(text) > MAX_SIGNATURE:
        return None
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None


def sns_url(text: Any, what: str) -> str:
    """``text`` when it is an https URL on an Amazon SNS host (no credentials, no other port), else
    a SignatureError: nothing is fetched from anywhere else."""
    if not isinstance(text, str) or not text.isascii() or len(text) > 2048:
        raise SignatureError(f"{what} is not an Amazon SNS URL")
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        raise SignatureError(f"{what} is not a URL") from None
    host = parts.hostname or ""
    if (
        parts.scheme != "https"
        or parts.username is not None
        or parts.password is not None
        or port not in (None, 443)
        or not SNS_HOST.fullmatch(host)
    ):
        raise SignatureError(f"{what} {text[:100]!r} is not https on an Amazon SNS host")
    return text


def certificate_url(document: Mapping[str, Any]) -> str:
    url = sns_url(document.get("SigningCertURL"), "SigningCertURL")
    if not urlsplit(url).path.endswith(".pem") or urlsplit(url).query:
        raise SignatureError("SigningCertURL is not a certificate (.pem)")
    return url


def message_type(document: Mapping[str, Any]) -> str:
    kind = document.get("Type")
    if kind not in TYPES:
        shown = kind[:40] if isinstance(kind, str) else type(kind).__name__
        raise BadPayload(f"not an SNS message: Type {shown!r} (raw message delivery must be off)")
    return str(kind)


def message_id(document: Mapping[str, Any]) -> str:
    value = document.get("MessageId")
    if not isinstance(value, str) or not MESSAGE_ID.fullmatch(value):
        raise BadPayload("MessageId is missing or not a UUID")
    return value


def string_to_sign(document: Mapping[str, Any]) -> bytes:
    """``name\\nvalue\\n`` for each signed field in the documented order, the type's own list."""
    fields = NOTIFICATION_FIELDS if message_type(document) == NOTIFICATION else CONFIRMATION_FIELDS
    out: list[str] = []
    for name in fields:
        value = document.get(name)
        if value is None and name == "Subject":
            continue  # optional: absent from the JSON when it was not published
        if not isinstance(value, str):
            raise BadPayload(f"SNS message field {name} is missing or not text")
        out.append(f"{name}\n{value}\n")
    return "".join(out).encode("utf-8", "surrogatepass")


def signature_of(document: Mapping[str, Any]) -> tuple[bytes, str]:
    """The signature's bytes and its hash name, or a SignatureError."""
    version = document.get("SignatureVersion")
    if version not in HASHES:
        raise SignatureError(f"SignatureVersion {str(version)[:10]!r} is not 1 or 2")
    given = document.get("Signature")
    if not isinstance(given, str) or not given:
        raise SignatureError("missing Signature")
    signature = strict_base64(given)
    if not signature:
        raise SignatureError("Signature is not base64")
    return signature, HASHES[str(version)]


class CertificateCache:
    """Public keys of the signing certificates by URL, each kept until its certificate expires
    (at most :data:`CACHED`); one fetch per URL at a time."""

    def __init__(self, size: int = CACHED) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._keys: OrderedDict[str, tuple[Any, float]] = OrderedDict()
        self._fetching: dict[str, threading.Lock] = {}
        self.fetched = 0

    def put(self, url: str, pem: bytes, now: float) -> Any:
        key, expires = load_certificate(pem, now)
        with self._lock:
            self._keys[url] = (key, expires)
            self._keys.move_to_end(url)
            while len(self._keys) > self._size:
                self._keys.popitem(last=False)
        return key

    def _known(self, url: str, now: float) -> Any:
        with self._lock:
            known = self._keys.get(url)
            return known[0] if known is not None and now < known[1] else None

    def key(self, url: str, fetch: Fetch, now: float) -> Any:
        key = self._known(url, now)
        if key is not None:
            return key
        with self._lock:
            fetching = self._fetching.setdefault(url, threading.Lock())
        # one fetch per URL at a time (deliveries signed with a new certificate fetch it once);
        # other URLs and cached keys are not held up by it
        with fetching:
            key = self._known(url, now)
            if key is not None:
                return key
            try:
                pem = fetch(url)
            finally:
                with self._lock:
                    self._fetching.pop(url, None)
            with self._lock:
                self.fetched += 1
            return self.put(url, pem, now)

    def clear(self) -> None:
        with self._lock:
            self._keys.clear()


def load_certificate(pem: bytes, now: float) -> tuple[Any, float]:
    """The RSA public key of a PEM certificate valid at ``now``, and when it stops being valid."""
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric.rsa import RSAPublicKey

    try:
        certificate = x509.load_pem_x509_certificate(pem)
    except ValueError:
        raise SignatureError("SigningCertURL did not serve a PEM certificate") from None
    moment = datetime.fromtimestamp(now, UTC)
    if not certificate.not_valid_before_utc <= moment <= certificate.not_valid_after_utc:
        raise SignatureError("the signing certificate is not valid now")
    key = certificate.public_key()
    if not isinstance(key, RSAPublicKey):
        raise SignatureError("the signing certificate's key is not RSA")
    return key, certificate.not_valid_after_utc.timestamp()


def check(document: Mapping[str, Any], fetch: Fetch, cache: CertificateCache, now: float) -> None:
    """The message's signature checked with the certificate at its SigningCertURL; everything
    that needs no fetch is checked first."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding

    signature, hash_name = signature_of(document)
    url = certificate_url(document)
    message = string_to_sign(document)
    key = cache.key(url, fetch, now)
    algorithm = hashes.SHA1() if hash_name == "sha1" else hashes.SHA256()
    try:
        key.verify(signature, message, padding.PKCS1v15(), algorithm)
    except InvalidSignature:
        raise SignatureError("Signature does not match the SNS message") from None


def subscribe_url(document: Mapping[str, Any]) -> str:
    """The confirmation link of a SubscriptionConfirmation: an SNS host, ConfirmSubscription of
    this message's topic, nothing else."""
    url = sns_url(document.get("SubscribeURL"), "SubscribeURL")
    query = dict(parse_qsl(urlsplit(url).query))
    if query.get("Action") != "ConfirmSubscription" or query.get("TopicArn") != document.get(
        "TopicArn"
    ):
        raise BadPayload("SubscribeURL does not confirm this message's topic")
    return url


def fetch_with(client: Any) -> Fetch:
    """A :data:`Fetch` through an ``httpx.Client`` (its timeout bounds the call; no redirects),
    reading at most :data:`MAX_PEM` bytes."""

    def fetch(url: str) -> bytes:
        import httpx

        try:
            with client.stream("GET", url) as response:
                if response.status_code in (403, 404):
                    raise SignatureError(f"SigningCertURL answered {response.status_code}")
                if response.status_code != 200:
                    raise UnavailableError(
                        f"the SNS certificate {url} answered HTTP {response.status_code}"
                    )
                body = b""
                for chunk in response.iter_bytes():
                    body += chunk
                    if len(body) > MAX_PEM:
                        raise SignatureError("SigningCertURL served more than a certificate")
                return body
        except httpx.HTTPError as exc:
            raise UnavailableError(
                f"could not fetch the SNS certificate {url}: {exc.__class__.__name__}"
            ) from None

    return fetch


__all__ = [
    "CertificateCache",
    "Fetch",
    "check",
    "fetch_with",
    "message_id",
    "message_type",
    "string_to_sign",
    "subscribe_url",
]
