"""Exceptions: every gRPC error from arbiterd becomes an ArbiterError.

An ArbiterError carries the gRPC status code (``.code``, a ``grpc.StatusCode``), the
daemon's message (``.details``) and the RPC it came from (``.method``). Common codes
have subclasses, which also derive from the built-in exception a Python caller would
reach for: InvalidArgument is a ValueError, Unavailable a ConnectionError, and so on.

Operands the client can judge itself (dtype, dims, contiguity) are refused before
anything is sent, with InvalidArgument and ``.method`` naming the call; those errors
say what was expected, as the daemon's own do.
"""

import grpc


class ArbiterError(Exception):
    """An RPC to arbiterd failed, or a request was refused before sending."""

    def __init__(self, code, details, method=""):
        self.code = code
        self.details = details
        self.method = method
        where = method + ": " if method else ""
        super().__init__("%s%s: %s" % (where, code.name, details))


class InvalidArgument(ArbiterError, ValueError):
    """The request is malformed: shapes, dtype, sizes or a field the daemon refused."""


class NotFound(ArbiterError, LookupError):
    """What the request names (a candidate, a force) does not exist."""


class FailedPrecondition(ArbiterError):
    """The daemon cannot do this in its current state (e.g. no candidate covers the shape)."""


class Unauthenticated(ArbiterError, PermissionError):
    """An admin RPC without the bearer token the daemon requires (pass token_file)."""


class PermissionDenied(ArbiterError, PermissionError):
    """An admin RPC with a token that does not match the daemon's."""


class ResourceExhausted(ArbiterError):
    """The daemon's queue is full, or a message is larger than its limit."""


class Unavailable(ArbiterError, ConnectionError):
    """The daemon cannot be reached, or is not serving (shutting down, device error)."""


class DeadlineExceeded(ArbiterError, TimeoutError):
    """The call did not finish within the client's timeout."""


class Unimplemented(ArbiterError, NotImplementedError):
    """The daemon (or this client) does not implement what was asked."""


class Internal(ArbiterError):
    """The daemon failed in a way it did not expect; its log says more."""


_BY_CODE = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.OUT_OF_RANGE: InvalidArgument,
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPrecondition,
    grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDenied,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhausted,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceeded,
    grpc.StatusCode.UNIMPLEMENTED: Unimplemented,
    grpc.StatusCode.INTERNAL: Internal,
}


def error_for(code, details, method=""):
    """The ArbiterError (subclass) for a status code."""
    return _BY_CODE.get(code, ArbiterError)(code, details, method)


def from_rpc_error(error, method):
    """Converts a grpc.RpcError raised by a stub into an ArbiterError."""
    code = error.code() if callable(getattr(error, "code", None)) else grpc.StatusCode.UNKNOWN
    details = error.details() if callable(getattr(error, "details", None)) else str(error)
    return error_for(code, details or "", method)


def invalid_argument(method, message):
    """A request refused before sending: what was given and what was expected."""
    return InvalidArgument(grpc.StatusCode.INVALID_ARGUMENT, message, method)
