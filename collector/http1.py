"""A minimal HTTP/1.1 client connection for plain `http://`: one request, one response, kept alive.

What it is for: the agent GETs its exporter every second and POSTs batches to ingest over
loopback or the cluster network. http.client builds a new buffered reader and runs the `email`
header parser for every response; that was a third of a 1 Hz scrape's CPU (bench/agent.py). This
connection keeps one buffered reader for its socket and reads the status line, headers and body
(Content-Length, chunked, or up to EOF, per RFC 9112 section 6.3) directly. `https://` stays on
http.client (collector.http chooses).

Errors are http.client's, so callers treat both alike: `RemoteDisconnected` when the peer closed
before a status line (a kept-alive connection it dropped: safe to retry once), other
`HTTPException`s for a malformed answer, `OSError` for the socket (timeouts included).

Must never: read more than `max_body_bytes` of a body or `_MAX_HEAD_BYTES` of headers, or reuse a
connection after an error or an answer that closes it.
"""

from __future__ import annotations

import http.client
import socket

__all__ = ["PlainConnection"]

_MAX_LINE = 65536
_MAX_HEAD_BYTES = 262144  # far above any exporter's or ingest's headers
_NO_BODY_STATUSES = frozenset({204, 304})


class PlainConnection:
    def __init__(self, host: str, port: int, timeout_s: float, max_body_bytes: int = 1 << 30):
        self.sock = socket.create_connection((host, port), timeout=timeout_s)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.reader = self.sock.makefile("rb")
        self.max_body_bytes = max_body_bytes
        self.will_close = False

    def request(
        self,
        method: str,
        target: str,
        host_header: str,
        *,
        body: bytes | None,
        headers: dict[str, str],
        timeout_s: float,
    ) -> tuple[int, bytes]:
        """Send one request and read its whole answer: (status, body)."""
        self.sock.settimeout(timeout_s)
        lines = [f"{method} {target} HTTP/1.1", f"Host: {host_header}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        if body is not None or method in ("POST", "PUT"):
            lines.append(f"Content-Length: {len(body or b'')}")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        self.sock.sendall(head + body if body else head)
        while True:
            version, status, fields = self._read_head()
            if not 100 <= status < 200:
                break  # 1xx answers are interim: the real one follows
        self.will_close = _closes(version, fields)
        if method == "HEAD" or status in _NO_BODY_STATUSES:
            return status, b""
        if "chunked" in fields.get("transfer-encoding", "").lower():
            return status, self._read_chunked()
        length = fields.get("content-length")
        if length is None:
            self.will_close = True  # the body ends where the connection does
            return status, self._read_limited(self.reader.read(self.max_body_bytes + 1))
        try:
            size = int(length)
        except ValueError:
            raise http.client.HTTPException(f"bad Content-Length {length!r}") from None
        if not 0 <= size <= self.max_body_bytes:
            raise http.client.HTTPException(f"body of {size} bytes is over the limit")
        data = self.reader.read(size)
        if len(data) != size:
            raise http.client.IncompleteRead(data, size - len(data))
        return status, data

    def close(self) -> None:
        self.reader.close()
        self.sock.close()

    def _line(self) -> bytes:
        line = self.reader.readline(_MAX_LINE + 1)
        if len(line) > _MAX_LINE:
            raise http.client.LineTooLong("header line")
        return line

    def _read_head(self) -> tuple[str, int, dict[str, str]]:
        status_line = self._line()
        if not status_line:
            raise http.client.RemoteDisconnected("connection closed before a status line")
        parts = status_line.decode("latin-1").rstrip("\r\n").split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
            raise http.client.BadStatusLine(status_line.decode("latin-1"))
        fields: dict[str, str] = {}
        total = 0
        while True:
            line = self._line()
            total += len(line)
            if total > _MAX_HEAD_BYTES:
                raise http.client.HTTPException("headers too long")
            if line in (b"\r\n", b"\n"):
                break
            if not line:
                raise http.client.IncompleteRead(b"", None)
            name, sep, value = line.decode("latin-1").partition(":")
            if not sep:
                raise http.client.HTTPException(f"malformed header line {line!r}")
            key = name.strip().lower()
            value = value.strip()
            fields[key] = f"{fields[key]}, {value}" if key in fields else value
        return parts[0], int(parts[1]), fields

    def _read_chunked(self) -> bytes:
        chunks: list[bytes] = []
        total = 0
        while True:
            size_line = self._line()
            try:
                size = int(size_line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise http.client.HTTPException(f"bad chunk size {size_line!r}") from None
            if size == 0:
                break
            total += size
            if total > self.max_body_bytes:
                raise http.client.HTTPException("chunked body is over the limit")
            chunk = self.reader.read(size)
            if len(chunk) != size or self._line() not in (b"\r\n", b"\n"):
                raise http.client.IncompleteRead(b"".join(chunks) + chunk)
            chunks.append(chunk)
        while self._line() not in (b"\r\n", b"\n", b""):  # trailer fields, ignored
            pass
        return b"".join(chunks)

    def _read_limited(self, data: bytes) -> bytes:
        if len(data) > self.max_body_bytes:
            raise http.client.HTTPException("body is over the limit")
        return data


def _closes(version: str, fields: dict[str, str]) -> bool:
    """Whether the server closes the connection after this answer (RFC 9112 section 9.3)."""
    tokens = {t.strip().lower() for t in fields.get("connection", "").split(",")}
    if "close" in tokens:
        return True
    return version == "HTTP/1.0" and "keep-alive" not in tokens
