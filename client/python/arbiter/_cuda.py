"""Zero-copy CUDA operands: the seam where they plug in.

Not implemented yet: it needs the daemon's region API (issue 9), which its proto
does not carry yet. Until then ``unavailable_reason`` says why, and callers take
their documented fallback (``arbiter.torch.mm``: torch.mm on the tensors' device).

What goes here once the proto has it, for a Client on a Unix socket to a CUDA daemon
on the same GPU (ServerInfo.uuid against the tensor's device):
  - each operand is shared as torch.multiprocessing shares a CUDA tensor
    (``storage._share_cuda_()``): a legacy CUDA IPC handle of the caching allocator's
    block holding it, the storage's byte offset in that block, and an IPC event the
    daemon waits on so the producer's stream work is done before it reads;
  - a block is registered once with RegisterRegion and cached here by its handle bytes
    (the allocator reuses blocks, so many tensors share one registration);
  - C is a region too (torch.empty on the operands' device), so nothing is copied;
  - Matmul names the A, B and C regions with byte offsets instead of carrying bytes;
  - registrations are released with UnregisterRegion: a block's once torch has freed it
    (torch offers no callback for that: a weakref.finalize on the storage, or a handle
    that no longer matches the cached one at the next call, are the candidates), and
    all of a client's when it closes (``release_all``, called by Client.close); the
    daemon must drop a dead client's registrations itself.
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
