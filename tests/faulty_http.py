"""An httpx transport to a real stand-in whose list pages misbehave on chosen calls."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx


class Misbehaving(httpx.BaseTransport):
    """Loopback to the real stand-in, with list pages edited on the given calls (1-based):
    ``empty`` keeps "there is more" on an empty page, ``repeat`` answers the previous page again,
    ``stuck`` gives a next link equal to the request's own URL."""

    def __init__(self, mode: str, bad: Callable[[int], bool], items_key: str | None) -> None:
        self.inner = httpx.HTTPTransport()
        self.mode, self.bad, self.items_key = mode, bad, items_key
        self.calls = 0
        self.previous: tuple[bytes, dict[str, str]] | None = None

    def close(self) -> None:
        self.inner.close()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        if not request.url.path.endswith(("/v1/events", "/deliveries", "/orders.json", "/link")):
            return response
        response.read()
        self.calls += 1
        body = response.content
        headers = {
            k: v for k, v in response.headers.items() if k.lower() in ("link", "content-type")
        }
        if self.bad(self.calls):
            if self.mode == "repeat" and self.previous is not None:
                body, headers = self.previous
            elif self.mode == "empty":
                doc = json.loads(body)
                if isinstance(doc, dict) and doc.get("has_more") is False:
                    pass  # an empty last page is a true answer (a slice's end), no contradiction
                elif self.items_key is None:
                    doc = []
                else:
                    doc[self.items_key] = []
                body = json.dumps(doc).encode()
            elif self.mode == "stuck":
                headers["link"] = f'<{request.url}>; rel="next"'
        self.previous = (body, headers)  # what was served: a repeat repeats itself
        return httpx.Response(response.status_code, headers=headers, content=body)
