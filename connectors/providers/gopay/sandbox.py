"""The sandbox's GoPay REST API: ``POST /api/oauth2/token`` (HTTP Basic client credentials, form
``grant_type=client_credentials`` and ``scope``; a bearer token good for 30 minutes) and
``GET /api/payments/payment/{id}`` with that token (read needs ``payment-all``). Errors in GoPay's
shape: ``{"errors": [{"scope", "error_code", "error_name", "message"}]}``."""

from __future__ import annotations

import base64
import binascii
import secrets
from urllib.parse import parse_qsl

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from connectors.sandbox.common import SandboxState

TOKEN_SECONDS = 1800


def gopay_error(status: int, code: int, name: str, message: str) -> Response:
    return JSONResponse(
        {"errors": [{"scope": "G", "error_code": code, "error_name": name, "message": message}]},
        status_code=status,
    )


class GoPayApi(SandboxState):
    _gopay_tokens: dict[str, str]  # access token -> scope

    async def gopay_token(self, request: Request) -> Response:
        if denied := await self._fault(request):
            return denied
        scheme, _, encoded = request.headers.get("authorization", "").partition(" ")
        try:
            user, _, password = base64.b64decode(encoded).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            user = password = ""
        if scheme.lower() != "basic" or (user, password) != self.keys.gopay_client:
            return gopay_error(403, 202, "AUTH_WRONG_CREDENTIALS", "Wrong credentials")
        form = dict(parse_qsl((await request.body()).decode("utf-8", "replace")))
        scope = form.get("scope") or ""
        if form.get("grant_type") != "client_credentials" or scope not in (
            "payment-all",
            "payment-create",
        ):
            return gopay_error(400, 110, "INVALID", "grant_type or scope is invalid")
        token = secrets.token_urlsafe(24)
        with self._lock:
            self._gopay_tokens[token] = scope
            self.stats.by_route["gopay tokens"] = self.stats.by_route.get("gopay tokens", 0) + 1
        return JSONResponse(
            {"token_type": "bearer", "access_token": token, "expires_in": TOKEN_SECONDS}
        )

    async def gopay_payment(self, request: Request) -> Response:
        if denied := await self._fault(request):
            return denied
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        scope = self._gopay_tokens.get(token) if scheme.lower() == "bearer" else None
        if scope is None:
            return gopay_error(403, 202, "AUTH_WRONG_TOKEN", "Unauthorized access")
        if scope != "payment-all":
            return gopay_error(403, 203, "AUTH_WRONG_SCOPE", "The token's scope is insufficient")
        payment = self.world.gopay_payments.get(request.path_params["id"])
        if payment is None:
            return gopay_error(404, 500, "PAYMENT_NOT_FOUND", "Payment not found")
        return JSONResponse(payment)
