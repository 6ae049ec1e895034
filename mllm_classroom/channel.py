"""Messages between the grader and the processes it runs (the student's, the judge's), over a socketpair.

A message is a JSON header and some binary blobs (tensors' bytes), framed by lengths::

    total length (8 bytes) | header length (4) | header (JSON, UTF-8) | blob count (4) | each blob: length (8), bytes

No path is involved: each process inherits its end of the pair, so nothing a sandboxed process does to its
files can make the grader connect anywhere else. Every length read is checked against the receiver's
limit before anything is allocated, and a message that breaks the format ends the conversation.
"""

from __future__ import annotations

import json
import os
import select
import socket
import struct
import time

MIB = 1024 * 1024
HEADER_LIMIT = 16 * MIB  # the JSON part of one message
PLAIN = socket.AF_UNIX, socket.SOCK_STREAM


class ChannelError(Exception):
    """The other side broke the protocol, went away, or took too long."""


class Closed(ChannelError):
    """The other side closed its end (it ended, or was killed)."""


class TimedOut(ChannelError):
    """No message came within the time allowed."""


def pair() -> tuple[socket.socket, socket.socket]:
    """Two connected ends; the second is inheritable, for a child process (``pass_fds``)."""
    a, b = socket.socketpair(*PLAIN)
    b.set_inheritable(True)
    return a, b


class Channel:
    """One end of a socketpair, speaking framed messages. ``limit``: the largest message it accepts."""

    def __init__(self, sock: socket.socket, limit: int = 64 * MIB):
        self.sock = sock
        self.limit = limit

    @classmethod
    def from_fd(cls, fd: int, limit: int = 64 * MIB) -> Channel:
        return cls(socket.socket(fileno=fd), limit)

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def fileno(self) -> int:
        return self.sock.fileno()

    # -- sending
    def send(self, header: dict, blobs: list[bytes] | tuple = ()) -> None:
        head = json.dumps(header, separators=(",", ":")).encode()
        parts = [struct.pack("<I", len(head)), head, struct.pack("<I", len(blobs))]
        for blob in blobs:
            parts += [struct.pack("<Q", len(blob)), blob]
        body = b"".join(parts)
        try:
            self.sock.sendall(struct.pack("<Q", len(body)) + body)
        except OSError as error:
            raise Closed(f"the other side is gone ({error.strerror or error})") from None

    def send_fd(self, header: dict, fd: int) -> None:
        """A message that carries an open file descriptor (SCM_RIGHTS)."""
        head = json.dumps(header).encode()
        try:
            socket.send_fds(self.sock, [struct.pack("<I", len(head)) + head], [fd])
        except OSError as error:
            raise Closed(f"the other side is gone ({error.strerror or error})") from None

    def recv_fd(self) -> tuple[dict, int]:
        data, fds, _flags, _addr = socket.recv_fds(self.sock, 65536, 1)
        if not data:
            raise Closed("the other side closed the channel")
        if len(fds) != 1 or len(data) < 4:
            for fd in fds:
                os.close(fd)
            raise ChannelError("expected one file descriptor with its header")
        (size,) = struct.unpack("<I", data[:4])
        return json.loads(data[4:4 + size]), fds[0]

    # -- receiving
    def _read(self, size: int, deadline: float | None) -> bytes:
        chunks, left = [], size
        while left:
            if deadline is not None:
                wait = deadline - time.monotonic()
                if wait <= 0 or not select.select([self.sock], [], [], wait)[0]:
                    raise TimedOut("no answer in time")
            try:
                chunk = self.sock.recv(min(left, 4 * MIB))
            except OSError as error:
                raise Closed(f"the other side is gone ({error.strerror or error})") from None
            if not chunk:
                raise Closed("the other side closed the channel")
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def recv(self, timeout: float | None = None) -> tuple[dict, list[bytes]]:
        """The next message, or ChannelError (Closed, TimedOut, or a broken format)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        (total,) = struct.unpack("<Q", self._read(8, deadline))
        if total > self.limit:
            raise ChannelError(f"a message of {total / MIB:.0f} MiB, over the limit of {self.limit / MIB:.0f} MiB")
        body = memoryview(self._read(total, deadline))
        try:
            (size,) = struct.unpack_from("<I", body, 0)
            if size > min(HEADER_LIMIT, total - 8):
                raise ChannelError("a header longer than its message")
            header = json.loads(bytes(body[4:4 + size]))
            if not isinstance(header, dict):
                raise ChannelError("a header that is not an object")
            at = 4 + size
            (count,) = struct.unpack_from("<I", body, at)
            at += 4
            blobs = []
            for _ in range(count):
                (length,) = struct.unpack_from("<Q", body, at)
                at += 8
                if at + length > total:
                    raise ChannelError("a blob longer than its message")
                blobs.append(bytes(body[at:at + length]))
                at += length
            if at != total:
                raise ChannelError("bytes left over after the last blob")
        except (struct.error, ValueError, RecursionError) as error:
            raise ChannelError(f"a message that breaks the format ({type(error).__name__})") from None
        return header, blobs
