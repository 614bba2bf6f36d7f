"""Typeform's webhooks, received (``kind = "typeform"``): ``sha256=<base64>`` over the body.

Facts, with their sources:

- Signature: ``Typeform-Signature: sha256=<base64>``, the base64 HMAC-SHA256 of the raw body keyed
  with the webhook's secret (set in the form's Connect > Webhooks, or ``secret`` through the
  Webhooks API), as written. No timestamp is signed, so there is no replay window.
  https://www.typeform.com/developers/webhooks/secure-your-webhooks/
- Typeform publishes no Python library (its JS ``@typeform/api-client`` does not verify webhooks):
  the tests rely on the documented scheme.
- Body: ``{"event_id": "01H…", "event_type": "form_response", "form_response": {"form_id",
  "token", "submitted_at", "landed_at", "definition", "answers"}}``: the id is ``event_id``, the
  type ``event_type``, the time ``form_response.submitted_at``, the object the form
  (``form_response.form_id``), as in Typeform's "Example webhook payload" page.
- No handshake.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from connectors.catalogue import Catalogue, Sample, compact_json, token
from connectors.declared import declared
from connectors.options import SourceOptions
from connectors.scheme import Scheme

SCHEME = Scheme(
    signatures=("header:Typeform-Signature",),
    signed="{body}",
    algorithm="hmac-sha256",
    encoding="base64",
    prefix="sha256=",
    event_id="body:event_id",
    event_type="body:event_type",
    occurred_at="body:form_response.submitted_at",
    object_id="body:form_response.form_id",
)


def _sample(options: SourceOptions, event_type: str, secret: str) -> Sample:
    now = datetime.now(UTC)
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    event_id = token(26).upper()
    field = {"id": "JwWggjAKtOkA", "type": "short_text", "ref": "readable_ref_short_text"}
    response = {
        "form_id": "lT4Z3j",
        "token": token(32),
        "landed_at": (now - timedelta(minutes=2)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "submitted_at": stamp,
        "definition": {
            "id": "lT4Z3j",
            "title": "Webhooks example",
            "fields": [{**field, "title": "What is your first name?"}],
        },
        "answers": [{"type": "text", "text": "Laura", "field": field}],
    }
    document = {"event_id": event_id, "event_type": event_type, "form_response": response}
    return Sample(event_id, compact_json(document), {"content-type": "application/json"})


SAMPLES = Catalogue(("form_response", "form_response_partial"), _sample)

PROVIDER = declared("typeform", SCHEME, samples=SAMPLES)
