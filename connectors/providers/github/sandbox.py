"""The sandbox's GitHub's hook deliveries API: lists (Link cursors), one delivery, redelivery; token or App JWT."""

from __future__ import annotations

import time
from datetime import timedelta

import jwt
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from connectors.sandbox.common import SandboxState, b64, unb64
from connectors.sandbox.world import GitHubAttempt

GITHUB_RETENTION = timedelta(days=3)


class GitHubApi(SandboxState):
    def _github_auth(self, request: Request) -> Response | None:
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if request.url.path.startswith("/app/"):
            if scheme.lower() != "bearer" or token.count(".") != 2:
                return JSONResponse(
                    {
                        "message": "A JSON web token could not be decoded",
                        "documentation_url": "https://docs.github.com/rest",
                    },
                    status_code=401,
                )
            try:
                if self.keys.github_app_public_key:
                    claims = jwt.decode(
                        token,
                        self.keys.github_app_public_key,
                        algorithms=["RS256"],
                        options={"verify_iat": False},
                    )
                else:
                    claims = jwt.decode(token, options={"verify_signature": False})
            except jwt.PyJWTError as exc:
                return JSONResponse(
                    {"message": f"A JSON web token could not be decoded ({exc})"}, status_code=401
                )
            if self.keys.github_app_id is not None and str(claims.get("iss")) != str(
                self.keys.github_app_id
            ):
                return JSONResponse({"message": "Integration not found"}, status_code=401)
            return None
        if scheme.lower() not in ("bearer", "token") or token != self.keys.github:
            return JSONResponse(
                {"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"},
                status_code=401,
            )
        return None

    def _github_listable(self) -> list[GitHubAttempt]:
        oldest = self.clock() - self.github_retention
        return sorted(
            (a for a in self.world.github_attempts if a.delivered_at >= oldest),
            key=lambda a: a.id,
            reverse=True,
        )

    async def github_list(self, request: Request) -> Response:
        if (denied := self._github_auth(request)) or (denied := await self._fault(request)):
            return denied
        q = request.query_params
        try:
            per_page = min(100, max(1, int(q.get("per_page", "30"))))
        except ValueError:
            return JSONResponse({"message": "Invalid per_page"}, status_code=422)
        items = self._github_listable()
        if cursor := q.get("cursor"):
            decoded = unb64(cursor)
            if decoded is None or not isinstance(decoded.get("below"), int):
                return JSONResponse({"message": "Invalid cursor"}, status_code=422)
            items = [a for a in items if a.id < decoded["below"]]
        page = items[:per_page]
        headers = {
            "x-ratelimit-limit": "5000",
            "x-ratelimit-remaining": "4999",
            "x-ratelimit-reset": str(int(time.time()) + 3600),
            "x-ratelimit-resource": "core",
        }
        if not request.url.path.startswith("/app/"):  # a classic token says its scopes, a JWT not
            headers["x-oauth-scopes"] = self.keys.github_scopes
        if len(items) > per_page:
            nxt = request.url.replace_query_params(
                per_page=per_page, cursor=b64({"below": page[-1].id})
            )
            headers["link"] = f'<{nxt}>; rel="next"'
        return JSONResponse([a.item() for a in page], headers=headers)

    def _attempt(self, attempt_id: int) -> GitHubAttempt | None:
        return next((a for a in self._github_listable() if a.id == attempt_id), None)

    async def github_delivery(self, request: Request) -> Response:
        if (denied := self._github_auth(request)) or (denied := await self._fault(request)):
            return denied
        attempt = self._attempt(request.path_params["id"])
        if attempt is None:
            return JSONResponse({"message": "Not Found"}, status_code=404)
        detail = attempt.item()
        detail["url"] = "https://sandbox.invalid/webhook"
        detail["request"] = {
            "headers": {
                "X-GitHub-Delivery": attempt.guid,
                "X-GitHub-Event": attempt.event,
                "Content-Type": "application/json",
            },
            "payload": attempt.payload,
        }
        detail["response"] = {"headers": {}, "payload": None}
        return JSONResponse(detail)

    async def github_redeliver(self, request: Request) -> Response:
        if (denied := self._github_auth(request)) or (denied := await self._fault(request)):
            return denied
        attempt = self._attempt(request.path_params["id"])
        if attempt is None:
            return JSONResponse({"message": "Not Found"}, status_code=404)
        with self._lock:
            new_id = max(a.id for a in self.world.github_attempts) + 1
            self.world.github_attempts.append(
                GitHubAttempt(
                    new_id,
                    attempt.guid,
                    self.clock(),
                    "OK",
                    200,
                    attempt.event,
                    attempt.action,
                    True,
                    attempt.payload,
                )
            )
        return JSONResponse({}, status_code=202)
