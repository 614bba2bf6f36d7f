"""An httpx transport to a real stand-in whose list pages misbehave on chosen calls."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx


class Misbehaving(httpx.BaseTransport):
    """Loopback to the real stand-in, with list pages edited on the given calls (1-based):
    ``empty`` keeps "there is more" on an empty page, ``repeat`` answers the previous page again,
    ``stuck`` gives a next link equal to the request's own URL. Shopify GraphQL list answers
    (``data.orders``) are edited the same way: empty nodes, the previous answer, the same cursor."""

    def __init__(self, mode: str, bad: Callable[[int], bool], items_key: str | None) -> None:
        self.inner = httpx.HTTPTransport()
        self.mode, self.bad, self.items_key = mode, bad, items_key
        self.calls = 0
        self.previous: tuple[bytes, dict[str, str]] | None = None

    def close(self) -> None:
        self.inner.close()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        if request.url.path.endswith("/graphql.json"):
            return self._graphql(request, response)
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

    def _graphql(self, request: httpx.Request, response: httpx.Response) -> httpx.Response:
        response.read()
        doc = json.loads(response.content)
        orders = (doc.get("data") or {}).get("orders") if isinstance(doc, dict) else None
        if not isinstance(orders, dict):  # a look-up or an error: not a list page
            return httpx.Response(
                response.status_code, headers=response.headers, content=response.content
            )
        self.calls += 1
        body = response.content
        if self.bad(self.calls):
            if self.mode == "repeat" and self.previous is not None:
                body = self.previous[0]
            elif self.mode == "empty" and orders["pageInfo"]["hasNextPage"]:
                orders["nodes"] = []
                body = json.dumps(doc).encode()
            elif self.mode == "stuck":
                asked = json.loads(request.content).get("variables", {}).get("after")
                orders["pageInfo"] = {"hasNextPage": True, "endCursor": asked}
                body = json.dumps(doc).encode()
        self.previous = (body, {})
        return httpx.Response(
            response.status_code, headers={"content-type": "application/json"}, content=body
        )
