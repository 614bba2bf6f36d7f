"""Sample ``meta`` deliveries, shaped after Meta's documented examples: a Page ``feed`` change
(https://developers.facebook.com/docs/graph-api/webhooks/getting-started, "Event Notifications"),
a WhatsApp Cloud API ``messages`` notification
(https://developers.facebook.com/docs/whatsapp/cloud-api/webhooks/payload-examples) and an Instagram
``comments`` change (https://developers.facebook.com/docs/instagram-platform/webhooks). Unsigned:
``PROVIDER.sign`` adds ``X-Hub-Signature-256``. One entry each, so the sample's id is that entry's."""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

from connectors.catalogue import Catalogue, Sample, compact_json, token
from connectors.options import SourceOptions


def entry_id(entry: Any) -> str:
    """The identity of one entry (as ``connectors.scheme_check`` hashes a batch's item)."""
    compact = json.dumps(entry, separators=(",", ":"), ensure_ascii=False)
    return "meta:" + hashlib.sha256(compact.encode("utf-8", "surrogatepass")).hexdigest()


def _digits(n: int) -> str:
    return str(int(token(16), 16))[:n].rjust(n, "7")


def _page_feed(now: int) -> tuple[str, dict[str, Any]]:
    page = _digits(15)
    post = f"{page}_{_digits(16)}"
    value = {
        "from": {"id": _digits(16), "name": "Cinderella Hoover"},
        "item": "post",
        "post_id": post,
        "verb": "add",
        "created_time": now,
        "message": "A sample post from hookledger",
    }
    return "page", {"id": page, "time": now, "changes": [{"field": "feed", "value": value}]}


def _whatsapp(now: int) -> tuple[str, dict[str, Any]]:
    account = _digits(15)
    message = {
        "from": "16315551234",
        "id": "wamid." + token(40),
        "timestamp": str(now),
        "text": {"body": "this is a text message"},
        "type": "text",
    }
    value = {
        "messaging_product": "whatsapp",
        "metadata": {"display_phone_number": "16505553333", "phone_number_id": _digits(15)},
        "contacts": [{"profile": {"name": "Kerry Fisher"}, "wa_id": "16315551234"}],
        "messages": [message],
    }
    return "whatsapp_business_account", {
        "id": account,
        "changes": [{"value": value, "field": "messages"}],
    }


def _instagram(now: int) -> tuple[str, dict[str, Any]]:
    account = _digits(17)
    value = {
        "from": {"id": _digits(17), "username": "sample_user"},
        "media": {"id": _digits(17), "media_product_type": "FEED"},
        "id": _digits(17),
        "text": "A sample comment from hookledger",
    }
    return "instagram", {
        "id": account,
        "time": now,
        "changes": [{"field": "comments", "value": value}],
    }


_BUILDERS = {
    "page.feed": _page_feed,
    "whatsapp_business_account.messages": _whatsapp,
    "instagram.comments": _instagram,
}


def _build(options: SourceOptions, event_type: str, secret: str) -> Sample:
    kind, entry = _BUILDERS[event_type](int(time.time()))
    body = compact_json({"object": kind, "entry": [entry]})
    return Sample(entry_id(entry), body, {"content-type": "application/json"})


SAMPLES = Catalogue(tuple(_BUILDERS), _build)
