"""Zero-copy CUDA operands: the seam where they plug in.

Not implemented yet: it needs the daemon's region API (issue 9), which its proto
does not carry yet. Until then ``unavailable_reason`` says why, and callers take
their documented fallback (``arbiter.torch.mm``: torch.mm on the tensors' device).

What goes here once the proto has it, for a Client on a Unix socket to a CUDA daemon:
  - each operand's CUDA storage is shared as a legacy CUDA IPC handle plus the
    tensor's byte offset in it (what torch.multiprocessing sends for a CUDA tensor:
    ``storage._share_cuda_()``), registered once per storage with RegisterRegion and
    cached here, keyed by the storage's device pointer;
  - C is a region too (a torch.empty on the operands' device, registered the same way);
  - Matmul names the A, B and C regions and byte offsets instead of carrying bytes, after
    the caller's stream work on the operands is done (the daemon runs on its own stream);
  - a registration is released with UnregisterRegion when its storage is freed, and all
    of a client's when it closes (``release_all``, called by Client.close).
"""

from arbiter.errors import error_for

import grpc

_REASON = ("zero-copy CUDA tensors need the daemon's region API (RegisterRegion, a Matmul naming regions), "
           "which this client does not implement yet")


def unavailable_reason(client, a, b):
    """None when A and B can go zero-copy through client; else why not, in a sentence."""
    return _REASON


def matmul(client, a, b, *, determinism=None, tuning=None):
    """C = A @ B on CUDA tensors, through registered regions (not implemented yet)."""
    raise error_for(grpc.StatusCode.UNIMPLEMENTED, _REASON, "Matmul")


def release_all(client):
    """Unregisters every region client registered (nothing yet: none are)."""
    client._regions = None
