"""The baseline: a bare Starlette endpoint that reads the body and answers 200, served like the receiver."""

from __future__ import annotations

import sys

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route


async def hook(request: Request) -> Response:
    await request.body()
    return JSONResponse({"status": "accepted"})


app = Starlette(routes=[Route("/webhooks/{source}", hook, methods=["POST"])])

if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", access_log=False)
