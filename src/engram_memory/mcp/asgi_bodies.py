"""Reading a request's body ahead of the app that will handle it, and handing that app the same body; and
answering a request outright with a whole JSON body, before any app sees it.

Bodies are read up to a limit: what lies beyond it stays unread, and the app reads it from the client
itself (so the app's own size limit still answers an oversized request).
"""

from __future__ import annotations

from starlette.types import Message, Receive, Send


async def read_body(receive: Receive, limit: int) -> tuple[bytes, bool]:
    """(the body read, up to about `limit` bytes; whether the client has more to send)."""
    body = b""
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return body, False
        body += message.get("body", b"")
        more = bool(message.get("more_body"))
        if not more or len(body) > limit:
            return body, more


def replayed(body: bytes, more: bool, receive: Receive) -> Receive:
    """A `receive` that gives `body` first, then (when `more`) the rest from the client."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if sent:
            return await receive() if more else {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": more}

    return replay


async def send_json(send: Send, status: int, body: bytes, *headers: tuple[bytes, bytes]) -> None:
    """A whole JSON response: its length stated, `headers` after the content type."""
    start = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode("ascii")), *headers]
    await send({"type": "http.response.start", "status": status, "headers": start})
    await send({"type": "http.response.body", "body": body})
