"""Amazon SNS (``kind = "aws_sns"``): the documented string to sign, RSA v1/v2, the certificate URL
refused before any fetch unless it is an Amazon SNS host, the certificate cached, the handshakes.

No official Python library verifies SNS messages (boto3 does not): messages are signed here as the
documentation says, with a self-signed certificate served through an ``httpx.MockTransport``. The
vector is the documentation's example Notification (tests/fixtures/providers/aws_sns)."""

from __future__ import annotations

import base64
import copy
import datetime
import json
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.x509.oid import NameOID

from connectors.errors import ConnectorError, RejectedDelivery
from connectors.options import SourceOptions
from connectors.providers import aws_sns
from connectors.providers.aws_sns import signature as sns
from connectors.webhooks import BadPayload, Batch, Handshake, SignatureError, WebhookRequest

VECTOR = json.loads(
    (Path(__file__).parents[2] / "fixtures/providers/aws_sns/signature_vector.json").read_text()
)
PROVIDER = aws_sns.PROVIDER
TOPIC = "arn:aws:sns:us-west-2:123456789012:MyTopic"
CERT_URL = "https://sns.us-west-2.amazonaws.com/SimpleNotificationService-test.pem"
NOW = 1764547200.0  # 2025-12-01


def make_cert(
    days: tuple[int, int] = (-365, 365),
) -> tuple[rsa.RSAPrivateKey, bytes]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "sns.amazonaws.com")])
    moment = datetime.datetime.fromtimestamp(NOW, datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(moment + datetime.timedelta(days=days[0]))
        .not_valid_after(moment + datetime.timedelta(days=days[1]))
        .sign(key, hashes.SHA256())
    )
    return key, cert.public_bytes(serialization.Encoding.PEM)


KEY, PEM = make_cert()
OTHER_KEY, OTHER_PEM = make_cert()


def sign(document: dict[str, Any], key: rsa.RSAPrivateKey, version: str = "2") -> dict[str, Any]:
    """Sign exactly as SNS does: ``name\\nvalue\\n`` of the type's fields, in order."""
    document = {**document, "SignatureVersion": version}
    if document["Type"] == "Notification":
        fields = ["Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type"]
    else:
        fields = ["Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type"]
    text = "".join(f"{k}\n{document[k]}\n" for k in fields if k in document)
    digest = hashes.SHA1() if version == "1" else hashes.SHA256()
    document["Signature"] = base64.b64encode(
        key.sign(text.encode(), padding.PKCS1v15(), digest)
    ).decode()
    return document


def notification(**fields: Any) -> dict[str, Any]:
    return {
        "Type": "Notification",
        "MessageId": str(uuid.uuid4()),
        "TopicArn": TOPIC,
        "Subject": "order.paid",
        "Message": json.dumps({"order": 42, "note": "café ✓"}),
        "Timestamp": "2025-12-01T00:00:00.000Z",
        "SigningCertURL": CERT_URL,
        "UnsubscribeURL": f"https://sns.us-west-2.amazonaws.com/?Action=Unsubscribe&SubscriptionArn={TOPIC}:x",
        **fields,
    }


def confirmation(kind: str = "SubscriptionConfirmation", topic: str = TOPIC) -> dict[str, Any]:
    token = uuid.uuid4().hex * 4
    return {
        "Type": kind,
        "MessageId": str(uuid.uuid4()),
        "Token": token,
        "TopicArn": topic,
        "Message": f"You have chosen to subscribe to the topic {topic}.\nTo confirm the "
        "subscription, visit the SubscribeURL included in this message.",
        "SubscribeURL": "https://sns.us-west-2.amazonaws.com/?Action=ConfirmSubscription"
        f"&TopicArn={topic}&Token={token}",
        "Timestamp": "2025-12-01T00:00:00.000Z",
        "SigningCertURL": CERT_URL,
    }


def request(document: dict[str, Any] | str, now: float = NOW) -> WebhookRequest:
    body = document if isinstance(document, str) else json.dumps(document, ensure_ascii=False)
    return WebhookRequest(
        method="POST",
        url="https://hooks.example.com/webhooks/sns",
        headers={"content-type": "text/plain; charset=UTF-8"},
        body=body.encode(),
        now=now,
    )


class Amazon:
    """A stand-in for the SNS hosts: serves certificates by URL, records every request."""

    def __init__(self, certs: dict[str, bytes] | None = None, status: int = 200) -> None:
        self.certs = {CERT_URL: PEM} if certs is None else certs
        self.status = status
        self.seen: list[str] = []

    def __call__(self, req: httpx.Request) -> httpx.Response:
        self.seen.append(str(req.url))
        if "Action=ConfirmSubscription" in str(req.url):
            return httpx.Response(self.status, text="<ConfirmSubscriptionResponse/>")
        pem = self.certs.get(str(req.url))
        return httpx.Response(200, content=pem) if pem else httpx.Response(404)


def connector(
    amazon: Amazon | None = None, topics: tuple[str, ...] = ()
) -> tuple[aws_sns.SnsConnector, Amazon]:
    amazon = amazon or Amazon()
    return aws_sns.SnsConnector("s", topics, transport=httpx.MockTransport(amazon)), amazon


@pytest.fixture(autouse=True)
def fresh_cache() -> Iterator[None]:
    aws_sns.CERTIFICATES.clear()
    yield
    aws_sns.CERTIFICATES.clear()


def options(topics: tuple[str, ...] = ()) -> SourceOptions:
    return SourceOptions(
        name="s",
        kind="aws_sns",
        keys=aws_sns.SnsKeys(topic_arns=topics),
        tolerance_seconds=PROVIDER.tolerance,
    )


def vector_request() -> WebhookRequest:
    return WebhookRequest(
        method=VECTOR["method"],
        url=VECTOR["url"],
        headers=VECTOR["headers"],
        body=VECTOR["body"].encode(),
        now=VECTOR["now"],
    )


def test_the_documented_example_verifies_and_reads_its_identity() -> None:
    document = json.loads(VECTOR["body"])
    assert sns.string_to_sign(document).decode() == VECTOR["string_to_sign"]
    aws_sns.CERTIFICATES.put(document["SigningCertURL"], VECTOR["certificate"].encode(), NOW)
    verdict = PROVIDER.verify(options(), vector_request(), ())
    assert isinstance(verdict, Batch)
    event = verdict.items[0].event
    assert (event.event_id, event.event_type) == (VECTOR["event_id"], VECTOR["event_type"])
    assert (event.object_type, event.object_id) == ("topic", TOPIC)
    assert event.occurred_at == datetime.datetime(2012, 5, 2, 0, 54, 6, 655000, datetime.UTC)
    assert verdict.items[0].content_type == "application/json"
    assert verdict.items[0].body == VECTOR["body"].encode()


def test_the_receiver_path_fetches_the_certificate_once_and_caches_it() -> None:
    amazon = Amazon({json.loads(VECTOR["body"])["SigningCertURL"]: VECTOR["certificate"].encode()})
    sns_connector, _ = connector(amazon)
    assert PROVIDER.confirm is not None and PROVIDER.confirm_key is not None
    assert PROVIDER.confirm_key(vector_request()) == VECTOR["event_id"]
    for _ in range(3):
        verdict = PROVIDER.confirm(sns_connector, vector_request())
        assert isinstance(verdict, Batch)
    assert len(amazon.seen) == 1 and aws_sns.CERTIFICATES.fetched == 1


@pytest.mark.parametrize("version", ["1", "2"])
def test_both_signature_versions_verify(version: str) -> None:
    document = sign(notification(), KEY, version)
    verdict = PROVIDER.confirm(connector()[0], request(document))  # type: ignore[misc]
    assert isinstance(verdict, Batch)
    assert verdict.items[0].event.event_id == document["MessageId"]


def test_a_notification_without_subject_signs_without_it() -> None:
    document = notification()
    del document["Subject"]
    assert b"Subject" not in sns.string_to_sign(document)
    verdict = PROVIDER.confirm(connector()[0], request(sign(document, KEY)))  # type: ignore[misc]
    assert isinstance(verdict, Batch)


def refused(document: dict[str, Any] | str, amazon: Amazon | None = None) -> RejectedDelivery:
    with pytest.raises(RejectedDelivery) as caught:
        PROVIDER.confirm(connector(amazon)[0], request(document))  # type: ignore[misc]
    return caught.value


def test_another_key_is_refused() -> None:
    assert isinstance(refused(sign(notification(), OTHER_KEY)), SignatureError)


def test_a_body_changed_by_one_byte_is_refused() -> None:
    document = sign(notification(Message="Hello world!"), KEY)
    body = json.dumps(document).replace("Hello world!", "Hello world?")
    assert isinstance(refused(body), SignatureError)


@pytest.mark.parametrize(
    "signature",
    [
        None,
        "",
        "not base64!",
        "é" * 40,
        "\x00",
        "QUJD" * 1000,
        base64.b64encode(b"x" * 256).decode(),
    ],
)
def test_a_missing_or_garbage_signature_is_401(signature: str | None) -> None:
    document = sign(notification(), KEY)
    if signature is None:
        del document["Signature"]
    else:
        document["Signature"] = signature
    assert isinstance(refused(document), SignatureError)


@pytest.mark.parametrize("version", [None, "3", 2, "", "é"])
def test_an_unknown_signature_version_is_refused(version: Any) -> None:
    document = sign(notification(), KEY)
    document["SignatureVersion"] = version
    assert isinstance(refused(document), SignatureError)


@pytest.mark.parametrize(
    "url",
    [
        "http://sns.us-west-2.amazonaws.com/SimpleNotificationService-test.pem",
        "https://evil.example.com/SimpleNotificationService-test.pem",
        "https://sns.us-west-2.amazonaws.com.evil.com/cert.pem",
        "https://evil.com/sns.us-west-2.amazonaws.com/cert.pem",
        "https://user@sns.us-west-2.amazonaws.com/cert.pem",
        "https://sns.us-west-2.amazonaws.com:8443/cert.pem",
        "https://s3.amazonaws.com/bucket/cert.pem",
        "https://sns.us-west-2.amazonaws.com/?redirect=cert.pem",
        "https://sns.us-west-2.amazonaws.com/cert.txt",
        "https://snś.us-west-2.amazonaws.com/cert.pem",
        "https://[::1/cert.pem",
        None,
        42,
    ],
)
def test_a_certificate_url_off_amazon_is_refused_before_any_fetch(url: Any) -> None:
    amazon = Amazon()
    document = sign(notification(SigningCertURL=url), KEY)
    assert isinstance(refused(document, amazon), SignatureError)
    assert amazon.seen == []


def test_china_hosts_are_amazon_hosts() -> None:
    url = "https://sns.cn-north-1.amazonaws.com.cn/SimpleNotificationService-test.pem"
    document = sign(notification(SigningCertURL=url), KEY)
    verdict = PROVIDER.confirm(connector(Amazon({url: PEM}))[0], request(document))  # type: ignore[misc]
    assert isinstance(verdict, Batch)


def test_a_rotated_certificate_at_a_new_url_verifies() -> None:
    new_url = CERT_URL.replace("test", "rotated")
    amazon = Amazon({CERT_URL: PEM, new_url: OTHER_PEM})
    sns_connector, _ = connector(amazon)
    for document in (
        sign(notification(), KEY),
        sign(notification(SigningCertURL=new_url), OTHER_KEY),
    ):
        assert isinstance(PROVIDER.confirm(sns_connector, request(document)), Batch)  # type: ignore[misc]
    assert len(amazon.seen) == 2


def test_an_expired_certificate_and_a_missing_one_are_refused() -> None:
    _, expired = make_cert((-30, -1))
    assert isinstance(
        refused(sign(notification(), KEY), Amazon({CERT_URL: expired})), SignatureError
    )
    assert isinstance(refused(sign(notification(), KEY), Amazon({})), SignatureError)
    assert isinstance(
        refused(sign(notification(), KEY), Amazon({CERT_URL: b"junk"})), SignatureError
    )


def test_an_unreachable_certificate_host_is_a_connector_error_then_503() -> None:
    def down(req: httpx.Request) -> httpx.Response:
        raise httpx.ConnectTimeout("down", request=req)

    sns_connector = aws_sns.SnsConnector("s", (), transport=httpx.MockTransport(down))
    with pytest.raises(ConnectorError):
        PROVIDER.confirm(sns_connector, request(sign(notification(), KEY)))  # type: ignore[misc]


def test_the_timestamp_is_not_checked_a_retry_is_the_same_message() -> None:
    document = sign(notification(Timestamp="2025-01-01T00:00:00.000Z"), KEY)
    verdict = PROVIDER.confirm(connector()[0], request(document, now=NOW + 86400 * 30))  # type: ignore[misc]
    assert isinstance(verdict, Batch)


def test_a_topic_outside_topic_arns_is_refused_before_any_fetch() -> None:
    amazon = Amazon()
    sns_connector, _ = connector(amazon, topics=("arn:aws:sns:us-west-2:123456789012:Other",))
    with pytest.raises(RejectedDelivery) as caught:
        PROVIDER.confirm(sns_connector, request(sign(notification(), KEY)))  # type: ignore[misc]
    assert caught.value.status_code == 403 and amazon.seen == []


@pytest.mark.parametrize(
    "body",
    ["Hello world!", "[]", '{"Type": "Notification", "MessageId": "1"}', '{"Type": "Other"}', "{"],
)
def test_what_is_not_an_sns_message_is_400_before_any_call(body: str) -> None:
    assert PROVIDER.confirm_key is not None
    with pytest.raises(BadPayload):
        PROVIDER.confirm_key(request(body))


def test_a_type_header_that_contradicts_the_body_is_400() -> None:
    req = request(sign(notification(), KEY))
    req = WebhookRequest(
        req.method,
        req.url,
        {"x-amz-sns-message-type": "SubscriptionConfirmation"},
        req.body,
        req.now,
    )
    with pytest.raises(BadPayload):
        PROVIDER.confirm_key(req)  # type: ignore[misc]


def test_a_listed_topics_subscription_is_confirmed_by_visiting_subscribe_url() -> None:
    document = sign(confirmation(), KEY)
    sns_connector, amazon = connector(topics=(TOPIC,))
    verdict = PROVIDER.confirm(sns_connector, request(document))  # type: ignore[misc]
    assert isinstance(verdict, Handshake)
    assert (verdict.reply.status, verdict.reply.body) == (200, b"")
    assert amazon.seen == [CERT_URL, document["SubscribeURL"]]
    assert sns_connector.confirmed == [TOPIC]


def test_an_unlisted_topics_subscription_is_answered_but_not_confirmed() -> None:
    sns_connector, amazon = connector()
    verdict = PROVIDER.confirm(sns_connector, request(sign(confirmation(), KEY)))  # type: ignore[misc]
    assert isinstance(verdict, Handshake) and "not confirmed" in verdict.what
    assert amazon.seen == [CERT_URL]


def test_a_failed_confirmation_is_a_connector_error_so_sns_sends_it_again() -> None:
    sns_connector, _ = connector(Amazon(status=500), topics=(TOPIC,))
    with pytest.raises(ConnectorError):
        PROVIDER.confirm(sns_connector, request(sign(confirmation(), KEY)))  # type: ignore[misc]


def test_a_subscribe_url_for_another_topic_or_host_is_never_visited() -> None:
    document = confirmation()
    document["SubscribeURL"] = document["SubscribeURL"].replace("MyTopic", "Other")
    sns_connector, amazon = connector(topics=(TOPIC,))
    with pytest.raises(BadPayload):
        PROVIDER.confirm(sns_connector, request(sign(document, KEY)))  # type: ignore[misc]
    assert amazon.seen == [CERT_URL]


def test_an_unsubscribe_confirmation_is_verified_and_answered_never_visited() -> None:
    sns_connector, amazon = connector(topics=(TOPIC,))
    verdict = PROVIDER.confirm(
        sns_connector, request(sign(confirmation("UnsubscribeConfirmation"), KEY))
    )  # type: ignore[misc]
    assert isinstance(verdict, Handshake) and verdict.reply.status == 200
    assert amazon.seen == [CERT_URL]
    forged = sign(confirmation("UnsubscribeConfirmation"), OTHER_KEY)
    assert isinstance(refused(forged), SignatureError)


def test_a_signed_confirmation_changed_is_refused() -> None:
    document = sign(confirmation(), KEY)
    changed = copy.deepcopy(document)
    changed["Token"] = changed["Token"][:-1] + "0"
    assert isinstance(refused(changed), SignatureError)


def test_no_sample_and_the_configuration_rule() -> None:
    assert PROVIDER.samples is None and PROVIDER.sign is None
    assert not PROVIDER.signed_with_secret and PROVIDER.methods == ("POST",)
    assert aws_sns.rule({"kind": "aws_sns", "topic_arns": [TOPIC]}) is None
    assert aws_sns.rule({"kind": "aws_sns", "topic_arns": ["MyTopic"]}) is not None


def test_concurrent_deliveries_with_a_new_certificate_fetch_it_once() -> None:
    calls: list[str] = []

    def slow(url: str) -> bytes:
        calls.append(url)
        time.sleep(0.05)
        return PEM

    cache = sns.CertificateCache()
    threads = [threading.Thread(target=cache.key, args=(CERT_URL, slow, NOW)) for _ in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert calls == [CERT_URL] and cache.fetched == 1
