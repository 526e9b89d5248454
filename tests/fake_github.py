"""A local fake of the GitHub REST API (only what kpatch asks: GET /repos/{owner}/{repo}/pulls/{n})."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeGitHub:
    def __init__(self) -> None:
        self.pulls: dict[str, dict[str, object]] = {}  # "owner/repo#n" -> JSON fields
        self.status = 200  # answer every request with this status when not 200
        self.requests: list[str] = []
        self.url = ""


@contextmanager
def fake_github() -> Iterator[FakeGitHub]:
    fake = FakeGitHub()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            fake.requests.append(self.path)
            match = re.fullmatch(r"/repos/([^/]+/[^/]+)/pulls/(\d+)", self.path.split("?")[0])
            key = f"{match.group(1)}#{match.group(2)}" if match else ""
            if fake.status != 200:
                self._send(fake.status, {"message": "Server Error"})
            elif key in fake.pulls:
                number = int(key.split("#")[1])
                self._send(200, {"number": number, "state": "closed", **fake.pulls[key]})
            else:
                self._send(404, {"message": "Not Found"})

        def _send(self, status: int, body: dict[str, object]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
