"""arbiter.torch.mm: a drop-in for torch.mm on 2-D tensors, computed by arbiterd.

    import arbiter.torch
    c = arbiter.torch.mm(a, b)          # like torch.mm(a, b)

Tensors of float32, float64, float16 or bfloat16, as torch.mm would accept them:
  - CPU tensors go to the daemon as bytes, made contiguous first;
  - CUDA tensors stay on the GPU (zero-copy, arbiter/_cuda.py): the daemon reads A and B
    and writes C in place. That needs a client on the daemon's Unix socket and a daemon
    on the tensors' GPU; an operand that is not row-major contiguous or not 256-byte
    aligned (a transposed or offset view) is first copied on the GPU, as .contiguous()
    or .clone() would.
torch.mm itself computes the product, so the call behaves as torch.mm does, when:
  - the daemon is unreachable or not serving (an ArbiterFallbackWarning says so);
  - the tensors are on a device other than the CPU or a CUDA GPU (a warning says so);
  - autograd must record the product (a tensor requires grad and grad mode is on);
  - the dtype is not one arbiter computes in, or a dimension is 0.
Any other error is raised as an ArbiterError: a refused shape, a missing token, and for
CUDA tensors a TCP client, a CPU daemon or another GPU than the daemon's (FailedPrecondition).

The client is ``client=`` when given, else one shared Client for $ARBITER_ADDRESS
(default 127.0.0.1:50051), made on first use; set_default_client replaces it.
"""

import threading
import warnings

import torch

from arbiter import _cuda, operands
from arbiter.client import Client
from arbiter.errors import Unavailable


class ArbiterFallbackWarning(UserWarning):
    """arbiter.torch.mm computed a product with torch.mm instead of the daemon."""


_ARBITER_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
_default_lock = threading.Lock()
_default_client = None


def default_client():
    """The Client that mm uses when none is given."""
    global _default_client
    with _default_lock:
        if _default_client is None:
            _default_client = Client()
        return _default_client


def set_default_client(client):
    """Makes mm use client when none is given (None: a fresh one for $ARBITER_ADDRESS on next use)."""
    global _default_client
    with _default_lock:
        _default_client = client


def mm(a, b, *, client=None, determinism=None, tuning=None):
    """C = A @ B for 2-D tensors A[m,k], B[k,n], as torch.mm returns it."""
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
        return torch.mm(a, b)  # torch's own error for non-tensors
    empty = a.numel() == 0 or b.numel() == 0
    if not empty:
        operands.check_shapes(tuple(a.shape), tuple(b.shape), "mm")  # InvalidArgument saying what was expected
    if (empty or a.dtype != b.dtype or a.dtype not in _ARBITER_DTYPES or a.device != b.device
            or (torch.is_grad_enabled() and (a.requires_grad or b.requires_grad))):
        return torch.mm(a, b)
    if a.device.type == "cuda":
        a, b = _in_place_ready(a), _in_place_ready(b)
    elif a.device.type == "cpu":
        a, b = a.contiguous(), b.contiguous()
    else:
        warnings.warn("arbiter.torch.mm: torch.mm computed this product: arbiter serves CPU and CUDA tensors, not %s"
                      % a.device, ArbiterFallbackWarning, stacklevel=2)
        return torch.mm(a, b)
    client = client if client is not None else default_client()
    try:
        return client.matmul(a, b, determinism=determinism, tuning=tuning).c
    except Unavailable as e:
        warnings.warn("arbiter.torch.mm: torch.mm computed this product: arbiterd at %s is unavailable (%s)"
                      % (client.address, e.details), ArbiterFallbackWarning, stacklevel=2)
        return torch.mm(a, b)


def _in_place_ready(x):
    """x if the daemon can read it in place (row-major contiguous, 256-byte aligned), else a copy on its GPU."""
    if not x.is_contiguous():
        return x.contiguous()
    if x.data_ptr() % _cuda.ALIGNMENT:
        return x.clone()
    return x
