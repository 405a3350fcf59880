"""A small WebSocket client (RFC 6455) over a socket: the handshake with
a subprotocol and a bearer token, binary messages out (masked, as a
client must), messages in (fragments joined, pings answered, the close
handshake). Only what a process's terminal socket needs.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import socket
import ssl
import struct
import urllib.parse

_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA


class HandshakeError(Exception):
    """The server refused the upgrade: its HTTP status and body."""

    def __init__(self, status: int, body: bytes):
        super().__init__(f"WebSocket handshake refused: HTTP {status}: {body[:200]!r}")
        self.status = status
        self.body = body


class WebSocket:
    """One client connection. ``recv`` returns (opcode, payload) of the
    next data message, or None once the connection closed."""

    def __init__(self, sock: socket.socket, rest: bytes, subprotocol: str):
        self._sock = sock
        self._buf = rest
        self.subprotocol = subprotocol
        self.closed = False

    @classmethod
    def connect(cls, url: str, *, subprotocol: str, headers: dict[str, str] | None = None,
                timeout: float | None = 30.0) -> "WebSocket":
        """Open url (http, https, ws or wss) and upgrade it."""
        u = urllib.parse.urlsplit(url)
        secure = u.scheme in ("https", "wss")
        port = u.port or (443 if secure else 80)
        sock = socket.create_connection((u.hostname, port), timeout=timeout)
        try:
            if secure:
                sock = ssl.create_default_context().wrap_socket(sock, server_hostname=u.hostname)
            key = base64.b64encode(os.urandom(16)).decode()
            path = (u.path or "/") + ("?" + u.query if u.query else "")
            lines = [f"GET {path} HTTP/1.1", f"Host: {u.netloc}", "Upgrade: websocket", "Connection: Upgrade",
                     f"Sec-WebSocket-Key: {key}", "Sec-WebSocket-Version: 13", f"Sec-WebSocket-Protocol: {subprotocol}"]
            lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
            sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
            head, rest = _read_head(sock)
            status, fields = _parse_head(head)
            if status != 101:
                raise HandshakeError(status, _read_body(sock, rest, fields))
            want = base64.b64encode(hashlib.sha1(key.encode() + _GUID).digest()).decode()
            if fields.get("sec-websocket-accept") != want:
                raise HandshakeError(status, b"bad Sec-WebSocket-Accept")
            if fields.get("sec-websocket-protocol") != subprotocol:
                raise HandshakeError(status, b"the server did not agree to " + subprotocol.encode())
            return cls(sock, rest, subprotocol)
        except BaseException:
            sock.close()
            raise

    def settimeout(self, timeout: float | None) -> None:
        self._sock.settimeout(timeout)

    def send(self, payload: bytes, opcode: int = OP_BINARY) -> None:
        """Send one message in one frame, masked."""
        n = len(payload)
        head = bytes([0x80 | opcode])
        if n < 126:
            head += bytes([0x80 | n])
        elif n < 1 << 16:
            head += bytes([0x80 | 126]) + struct.pack("!H", n)
        else:
            head += bytes([0x80 | 127]) + struct.pack("!Q", n)
        mask = os.urandom(4)
        masked = (int.from_bytes(payload, "big") ^ int.from_bytes((mask * (n // 4 + 1))[:n], "big")).to_bytes(n, "big") if n else b""
        self._sock.sendall(head + mask + masked)

    def recv(self) -> tuple[int, bytes] | None:
        """The next text or binary message; pings are answered on the way."""
        message, op = b"", None
        while True:
            if self.closed:
                return None
            fin, opcode, payload = self._frame()
            if opcode == OP_PING:
                self.send(payload, OP_PONG)
            elif opcode == OP_PONG:
                pass
            elif opcode == OP_CLOSE:
                if not self.closed:
                    self._close_reply(payload[:2])
                return None
            else:
                if opcode != OP_CONT:
                    op = opcode
                message += payload
                if fin:
                    return op if op is not None else OP_BINARY, message

    def close(self, code: int = 1000) -> None:
        """Say goodbye (best effort) and close the socket."""
        if not self.closed:
            try:
                self.send(struct.pack("!H", code), OP_CLOSE)
            except OSError:
                pass
        self.closed = True
        self._sock.close()

    def _close_reply(self, code: bytes) -> None:
        try:
            self.send(code, OP_CLOSE)
        except OSError:
            pass
        self.closed = True
        self._sock.close()

    def _frame(self) -> tuple[bool, int, bytes]:
        b0, b1 = self._read(2)
        n = b1 & 0x7F
        if n == 126:
            n = struct.unpack("!H", self._read(2))[0]
        elif n == 127:
            n = struct.unpack("!Q", self._read(8))[0]
        mask = self._read(4) if b1 & 0x80 else None
        payload = self._read(n)
        if mask:
            payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        return bool(b0 & 0x80), b0 & 0x0F, payload

    def _read(self, n: int) -> bytes:
        while len(self._buf) < n:
            chunk = self._sock.recv(max(65536, n - len(self._buf)))
            if not chunk:
                self.closed = True
                raise ConnectionError("the WebSocket connection ended without a close frame")
            self._buf += chunk
        out, self._buf = self._buf[:n], self._buf[n:]
        return out


def _read_head(sock: socket.socket) -> tuple[bytes, bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            raise ConnectionError("the server closed the connection during the WebSocket handshake")
        data += chunk
        if len(data) > 1 << 16:
            raise ConnectionError("the server's handshake answer is too long")
    head, rest = data.split(b"\r\n\r\n", 1)
    return head, rest


def _parse_head(head: bytes) -> tuple[int, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    fields = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        fields[k.strip().lower()] = v.strip()
    return status, fields


def _read_body(sock: socket.socket, rest: bytes, fields: dict[str, str]) -> bytes:
    n = int(fields.get("content-length", "0") or 0)
    while len(rest) < min(n, 1 << 20):
        chunk = sock.recv(4096)
        if not chunk:
            break
        rest += chunk
    return rest[:n]


def error_body(body: bytes) -> dict | None:
    """The {"error": ...} object of a refused handshake's body, if it is one."""
    try:
        return json.loads(body)["error"]
    except (ValueError, KeyError, TypeError):
        return None
