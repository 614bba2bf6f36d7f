"""The sandbox's Shopify's Admin REST orders API: updated_at_min, page_info in Link, the call-limit bucket."""

from __future__ import annotations

import json
import time
from datetime import datetime

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from connectors.sandbox.common import SandboxState, b64, unb64


class ShopifyApi(SandboxState):
    def _shopify_auth(self, request: Request) -> Response | None:
        if request.headers.get("x-shopify-access-token") != self.keys.shopify:
            return JSONResponse(
                {
                    "errors": "[API] Invalid API key or access token (unrecognized login or wrong password)"
                },
                status_code=401,
            )
        return None

    def _call_limit(self) -> str:
        now = time.monotonic()
        with self._lock:
            window = self.shopify_bucket / 2  # seconds for a full bucket to leak at 2 calls/s
            self._bucket = [t for t in self._bucket if now - t < window] + [now]
            return f"{min(self.shopify_bucket, len(self._bucket))}/{self.shopify_bucket}"

    async def shopify_list(self, request: Request) -> Response:
        if (denied := self._shopify_auth(request)) or (denied := await self._fault(request)):
            return denied
        q = request.query_params
        try:
            limit = int(q.get("limit", "50"))
        except ValueError:
            return JSONResponse({"errors": {"limit": "must be an integer"}}, status_code=400)
        if not 1 <= limit <= 250:
            return JSONResponse({"errors": {"limit": "must be between 1 and 250"}}, status_code=400)
        if page_info := q.get("page_info"):
            if set(q.keys()) - {"page_info", "limit", "fields"}:
                return JSONResponse({"errors": "page_info - Invalid value."}, status_code=400)
            state = unb64(page_info)
            if state is None:
                return JSONResponse({"errors": "page_info - Invalid value."}, status_code=400)
            updated_min, after = state.get("u"), tuple(state.get("after", ()))
        else:
            updated_min, after = q.get("updated_at_min"), ()
        orders = sorted(
            self.world.shopify_orders.values(), key=lambda o: (o["updated_at"], o["id"])
        )
        if updated_min:
            try:
                floor = datetime.fromisoformat(updated_min.replace("Z", "+00:00"))
            except ValueError:
                return JSONResponse({"errors": {"updated_at_min": "is invalid"}}, status_code=400)
            orders = [o for o in orders if datetime.fromisoformat(o["updated_at"]) >= floor]
        if after:
            orders = [o for o in orders if (o["updated_at"], o["id"]) > (after[0], after[1])]
        page = orders[:limit]
        headers = {"x-shopify-shop-api-call-limit": self._call_limit()}
        if len(orders) > limit:
            token = b64({"u": updated_min, "after": [page[-1]["updated_at"], page[-1]["id"]]})
            nxt = request.url.replace_query_params(limit=limit, page_info=token)
            headers["link"] = f'<{nxt}>; rel="next"'
        body = json.dumps({"orders": page})  # ids stay exact integers (> 2**53)
        return Response(body, media_type="application/json", headers=headers)

    async def shopify_access_scopes(self, request: Request) -> Response:
        if (denied := self._shopify_auth(request)) or (denied := await self._fault(request)):
            return denied
        return JSONResponse({"access_scopes": [{"handle": h} for h in self.keys.shopify_scopes]})

    async def shopify_order(self, request: Request) -> Response:
        if (denied := self._shopify_auth(request)) or (denied := await self._fault(request)):
            return denied
        order = self.world.shopify_orders.get(request.path_params["id"])
        if order is None:
            return JSONResponse({"errors": "Not Found"}, status_code=404)
        return Response(
            json.dumps({"order": order}),
            media_type="application/json",
            headers={"x-shopify-shop-api-call-limit": self._call_limit()},
        )
