"""A real HTTP server on 127.0.0.1 that speaks the OpenAI chat-completions API.

It answers with prepared replies in order and records every request it received.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Prepared:
    content: str = ""
    status: int = 200
    prompt_tokens: int = 100
    completion_tokens: int = 20
    delay: float = 0.0


@dataclass
class FakeOpenAI:
    replies: deque[Prepared] = field(default_factory=deque)
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    url: str = ""

    def add(self, *replies: str | Prepared) -> None:
        for reply in replies:
            self.replies.append(reply if isinstance(reply, Prepared) else Prepared(reply))

    def texts(self) -> list[str]:
        """Every message content of every request, joined per request."""
        return ["\n".join(m["content"] for m in r["messages"]) for r in self.requests]


def serve() -> tuple[FakeOpenAI, ThreadingHTTPServer]:
    state = FakeOpenAI()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            return

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            body = json.loads(self.rfile.read(length) or b"{}")
            state.requests.append(body)
            state.headers.append(dict(self.headers))
            if not self.path.endswith("/chat/completions"):
                self._send(404, {"error": {"message": "not found"}})
                return
            reply = state.replies.popleft() if state.replies else Prepared("(no reply prepared)")
            if reply.delay:
                time.sleep(reply.delay)
            if reply.status != 200:
                self._send(
                    reply.status, {"error": {"message": "prepared failure", "type": "server_error"}}
                )
                return
            self._send(
                200,
                {
                    "id": f"chatcmpl-{len(state.requests)}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body.get("model", "fake"),
                    "choices": [
                        {
                            "index": 0,
                            "finish_reason": "stop",
                            "message": {"role": "assistant", "content": reply.content},
                        }
                    ],
                    "usage": {
                        "prompt_tokens": reply.prompt_tokens,
                        "completion_tokens": reply.completion_tokens,
                        "total_tokens": reply.prompt_tokens + reply.completion_tokens,
                    },
                },
            )

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return state, server
