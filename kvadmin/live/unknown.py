"""A websocket to a path no route serves: refused with a 404 and a plain message (channels'
URLRouter would raise, and the server answer the handshake with a 500)."""

from typing import Any


async def unknown_socket(scope: dict[str, Any], receive: Any, send: Any) -> None:
    await receive()  # websocket.connect
    if "websocket.http.response" not in scope.get("extensions", {}):
        await send({"type": "websocket.close", "code": 4404})
        return
    body = f"no websocket is served at {scope['path']}\n".encode()
    await send(
        {
            "type": "websocket.http.response.start",
            "status": 404,
            "headers": [(b"content-type", b"text/plain; charset=utf-8")],
        }
    )
    await send({"type": "websocket.http.response.body", "body": body})
