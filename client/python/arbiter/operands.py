"""Operands: numpy arrays and PyTorch CPU tensors checked and turned into bytes.

CUDA tensors take the zero-copy path instead (arbiter._cuda), which checks its own.

Everything the daemon would refuse about the operands' form is refused here first,
with a message saying what was expected: two 2-D operands, A's columns equal to B's
rows, one dtype among f32/f64/f16/bf16, row-major (C-contiguous) little-endian data.
The daemon checks again (and checks what only it knows: candidate coverage, limits).
"""

import sys

import numpy as np

from arbiter import dtypes
from arbiter.errors import invalid_argument


class Operands:
    """A checked A and B: the problem, their memory, and how to build C like them."""

    def __init__(self, dtype, m, n, k, a_view, b_view, make_c):
        self.dtype = dtype
        self.m, self.n, self.k = m, n, k
        self.a_view = a_view  # A's bytes in place: a 1-D uint8 numpy view of the caller's memory, no copy
        self.b_view = b_view
        # make_c(data, owned=False): C's bytes (m*n elements; bytes or a buffer) -> an array or tensor
        # like A; a copy of them unless owned (a uint8 array the result may keep).
        self.make_c = make_c

    @property
    def a_bytes(self):
        return self.a_view.tobytes()

    @property
    def b_bytes(self):
        return self.b_view.tobytes()

    @property
    def c_nbytes(self):
        return self.m * self.n * dtypes.ITEMSIZE[self.dtype]


def torch_module():
    """torch when the caller has imported it (so a tensor can exist), else None."""
    return sys.modules.get("torch")


def is_tensor(x):
    torch = torch_module()
    return torch is not None and isinstance(x, torch.Tensor)


def prepare(a, b, dtype, method):
    """Checks A and B (numpy arrays or CPU tensors) and returns their Operands."""
    if is_tensor(a) and is_tensor(b):
        return _prepare_tensors(a, b, dtype, method)
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return _prepare_arrays(a, b, dtype, method)
    raise invalid_argument(method, "expected A and B both numpy.ndarray or both torch.Tensor, got %s and %s"
                           % (_type_name(a), _type_name(b)))


def check_shapes(a_shape, b_shape, method):
    """(m, n, k) of C[m,n] = A[m,k] @ B[k,n], or InvalidArgument saying what was expected."""
    if len(a_shape) != 2 or len(b_shape) != 2:
        raise invalid_argument(method, "expected 2-D operands A[m,k] and B[k,n], got A with shape %s and B "
                               "with shape %s" % (tuple(a_shape), tuple(b_shape)))
    (m, k), (kb, n) = a_shape, b_shape
    if k != kb:
        raise invalid_argument(method, "A is %dx%d and B is %dx%d: A's columns (k=%d) must equal B's rows (%d) "
                               "for C[m,n] = A[m,k] @ B[k,n]" % (m, k, kb, n, k, kb))
    if min(m, n, k) < 1:
        raise invalid_argument(method, "m=%d, n=%d, k=%d: every dimension must be at least 1" % (m, n, k))
    return m, n, k


def _type_name(x):
    return "%s.%s" % (type(x).__module__, type(x).__qualname__)


def _array_dtype(x, requested, which, method):
    """The arbiter dtype name of a numpy array, honouring an explicit dtype= for bf16 bits."""
    if requested == "bf16" and x.dtype in (np.dtype(np.uint16), np.dtype(np.int16)):
        return "bf16"
    if dtypes.BFLOAT16 is not None and x.dtype == dtypes.BFLOAT16:
        name = "bf16"
    else:
        name = {"float32": "f32", "float64": "f64", "float16": "f16"}.get(x.dtype.name)
    if name is None:
        hint = " (bf16 bits as uint16 need dtype='bf16')" if x.dtype == np.dtype(np.uint16) else ""
        raise invalid_argument(method, "%s has dtype %s: expected float32, float64, float16 or bfloat16 "
                               "(ml_dtypes), or uint16 bf16 bits with dtype='bf16'%s" % (which, x.dtype, hint))
    if requested is not None and requested != name:
        raise invalid_argument(method, "%s has dtype %s but dtype=%r was asked: convert it first%s"
                               % (which, x.dtype, requested,
                                  " (arbiter.to_bf16 turns float32 into bf16 bits)" if requested == "bf16" else ""))
    return name


def _check_layout(x, which, method, contiguous, little_endian=True):
    if not contiguous:
        raise invalid_argument(method, "%s is not C-contiguous: the daemon takes row-major operands; pass a "
                               "contiguous copy (numpy.ascontiguousarray, Tensor.contiguous)" % which)
    if not little_endian:
        raise invalid_argument(method, "%s is big-endian (%s): expected little-endian data; convert with "
                               "astype(%s)" % (which, x.dtype, x.dtype.newbyteorder("<").str))


def check_arrays(a, b, dtype, method):
    """(dtype name, m, n, k) of numpy arrays A and B, or InvalidArgument saying what was expected."""
    if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)):
        raise invalid_argument(method, "expected A and B both numpy.ndarray, got %s and %s"
                               % (_type_name(a), _type_name(b)))
    requested = requested_dtype(dtype, method)
    m, n, k = check_shapes(a.shape, b.shape, method)
    a_name = _array_dtype(a, requested, "A", method)
    b_name = _array_dtype(b, requested, "B", method)
    if a_name != b_name or (requested is None and a.dtype != b.dtype):
        raise invalid_argument(method, "A is %s and B is %s: expected one dtype for both" % (a.dtype, b.dtype))
    for x, which in ((a, "A"), (b, "B")):
        _check_layout(x, which, method, x.flags.c_contiguous,
                      x.dtype.byteorder != ">" and not (x.dtype.byteorder == "=" and sys.byteorder == "big"))
    return a_name, m, n, k


def _prepare_arrays(a, b, dtype, method):
    a_name, m, n, k = check_arrays(a, b, dtype, method)

    def make_c(data, owned=False):  # C like A: same dtype (bf16 bits stay uint16 bits)
        if owned:
            return data.view(a.dtype).reshape(m, n)
        return np.frombuffer(data, dtype=a.dtype).reshape(m, n).copy()

    return Operands(a_name, m, n, k, _bytes_view(a), _bytes_view(b), make_c)


def _bytes_view(x):
    """A C-contiguous numpy array's bytes as a flat uint8 view (no copy)."""
    return x.reshape(-1).view(np.uint8)


_TORCH_NAMES = {"float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16"}


def _prepare_tensors(a, b, dtype, method):
    torch = torch_module()
    requested = requested_dtype(dtype, method)
    m, n, k = check_shapes(tuple(a.shape), tuple(b.shape), method)
    for x, which in ((a, "A"), (b, "B")):
        if x.device.type != "cpu":
            raise invalid_argument(method, "%s is on %s: expected CPU tensors (sent as bytes) or CUDA tensors "
                                   "(zero-copy, on the daemon's GPU)" % (which, x.device))
        if str(x.dtype).rsplit(".", 1)[-1] not in _TORCH_NAMES:
            raise invalid_argument(method, "%s has dtype %s: expected torch.float32, float64, float16 or bfloat16"
                                   % (which, x.dtype))
    if a.dtype != b.dtype:
        raise invalid_argument(method, "A is %s and B is %s: expected one dtype for both" % (a.dtype, b.dtype))
    name = _TORCH_NAMES[str(a.dtype).rsplit(".", 1)[-1]]
    if requested is not None and requested != name:
        raise invalid_argument(method, "the tensors are %s but dtype=%r was asked" % (a.dtype, requested))
    for x, which in ((a, "A"), (b, "B")):
        _check_layout(x, which, method, x.is_contiguous())

    def to_view(x):
        x = x.detach()
        if x.dtype == torch.bfloat16:  # numpy has no bfloat16: its bits travel as int16
            x = x.view(torch.int16)
        return _bytes_view(x.numpy())

    def make_c(data, owned=False):
        element = np.dtype("<i2") if name == "bf16" else dtypes.NUMPY[name]
        values = data.view(element) if owned else np.frombuffer(data, dtype=element).copy()
        c = torch.from_numpy(values)
        return (c.view(torch.bfloat16) if name == "bf16" else c).reshape(m, n)

    return Operands(name, m, n, k, to_view(a), to_view(b), make_c)


def requested_dtype(dtype, method):
    """dtype= as one of dtypes.NAMES (None stays None), or InvalidArgument."""
    if dtype is None:
        return None
    try:
        return dtypes.normalize(dtype)
    except ValueError as e:
        raise invalid_argument(method, str(e)) from None
