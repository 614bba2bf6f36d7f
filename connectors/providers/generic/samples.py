"""Realistic sample deliveries of a ``generic`` sender for ``hookledger send``: the event's id and
type placed where the source's keys say (a header or a JSON path), a fresh id each time. Unsigned:
``PROVIDER.sign`` signs as the source's scheme says.
"""

from __future__ import annotations

from typing import Any

from connectors.catalogue import Catalogue, Sample, compact_json, token
from connectors.options import SourceOptions
from connectors.providers.generic.scheme import GenericKeys


def _json(document: Any) -> bytes:
    return compact_json(document)


def _token(n: int = 24) -> str:
    return token(n)


def _put(document: dict[str, Any], path: str, value: Any) -> None:
    """Set a dotted path (``meta.id``, ``$.meta.id``) in a JSON object, making the objects on it."""
    steps = [s for s in path.removeprefix("$").strip(".").split(".") if s]
    here = document
    for step in steps[:-1]:
        here = here.setdefault(step, {})
    if steps:
        here[steps[-1]] = value


def _generic(options: SourceOptions, event_type: str, secret: str) -> Sample:
    keys = options.own(GenericKeys)
    event_id = f"evt_{_token()}"
    document: dict[str, Any] = {"data": {"id": f"obj_{_token(12)}", "status": "active"}}
    headers = {"content-type": "application/json"}
    if keys.id_json_path:
        _put(document, keys.id_json_path, event_id)
    if keys.id_header:
        headers[keys.id_header.lower()] = event_id
    if keys.type_json_path:
        _put(document, keys.type_json_path, event_type)
    if keys.type_header:
        headers[keys.type_header.lower()] = event_type
    return Sample(event_id, _json(document), headers)


GENERIC = Catalogue(("order.created", "order.updated"), _generic)
