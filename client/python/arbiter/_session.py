"""A session on arbiterd's fd socket: what owns regions (zero-copy operands).

Same node, over a unix: address only. The fd socket is the Unix listener's path plus
".fd"; on connect the daemon reads the peer's credentials and answers one message,
"SESSION <token>" (or "ERROR <why>"). Every later RPC carries the token as
"arbiter-session" metadata. The session lasts while this socket stays open: closing it
- or the process exiting - ends it, and the daemon releases every region and tensor
the session owned. (The C++ client's client/session.h speaks the same protocol;
README.md, "Operands on the device", describes it.)

Thread-safe: immutable once open but for pass_fd, which takes a lock; close() is idempotent.
"""

import re
import socket
import threading

import grpc

from arbiter.errors import error_for

METADATA_KEY = "arbiter-session"
_MESSAGE_BYTES = 512  # the daemon's lines are short; SOCK_SEQPACKET keeps them whole


def fd_socket_path(address):
    """"unix:/run/arbiter/arbiter.sock" -> "/run/arbiter/arbiter.sock.fd"; None for a TCP address."""
    if not address.startswith("unix:"):
        return None
    path = address[len("unix:"):]
    if path.startswith("//"):  # unix:///abs/path is the URI form of unix:/abs/path
        path = path[2:]
    return path + ".fd"


class Session:
    """An open session; .token goes on every call as METADATA_KEY."""

    def __init__(self, path, method):
        """Connects to the fd socket at path and reads the token; ArbiterError (for method) if it cannot."""
        self.path = path
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self._socket.connect(path)
            line = self._socket.recv(_MESSAGE_BYTES).decode("utf-8", "replace")
        except OSError as e:
            self._socket.close()
            raise error_for(grpc.StatusCode.UNAVAILABLE,
                            "fd socket: cannot open a session at %s: %s (does the daemon listen on the matching "
                            "unix: address?)" % (path, e.strerror or e), method) from None
        if line.startswith("ERROR "):
            self._socket.close()
            raise error_for(grpc.StatusCode.FAILED_PRECONDITION, "fd socket: " + line[len("ERROR "):], method)
        if not line.startswith("SESSION ") or len(line) == len("SESSION "):
            self._socket.close()
            raise error_for(grpc.StatusCode.INTERNAL if line else grpc.StatusCode.UNAVAILABLE,
                            "fd socket %s: expected \"SESSION <token>\", got %r" % (path, line), method)
        self.token = line[len("SESSION "):]
        self._lock = threading.Lock()

    def pass_fd(self, fd, method):
        """Passes descriptor fd to the daemon (message "FD", SCM_RIGHTS); returns the number it answers,
        which RegisterRegionRequest.fd names. ArbiterError (for method) if it cannot."""
        with self._lock:
            try:
                socket.send_fds(self._socket, [b"FD"], [fd])
                line = self._socket.recv(_MESSAGE_BYTES).decode("utf-8", "replace")
            except OSError as e:
                raise error_for(grpc.StatusCode.UNAVAILABLE,
                                "fd socket %s: cannot pass a descriptor: %s" % (self.path, e.strerror or e),
                                method) from None
        if line.startswith("ERROR "):
            raise error_for(grpc.StatusCode.FAILED_PRECONDITION, "fd socket: " + line[len("ERROR "):], method)
        number = re.fullmatch(r"FD ([1-9][0-9]*)", line)
        if number is None:
            raise error_for(grpc.StatusCode.INTERNAL if line else grpc.StatusCode.UNAVAILABLE,
                            "fd socket %s: expected \"FD <n>\", got %r" % (self.path, line), method)
        return int(number.group(1))

    def close(self):
        """Ends the session: the daemon releases what it owned."""
        self._socket.close()
