"""The four dtypes arbiterd computes in, and how Python spells them.

Names are arbiterctl's: "f32", "f64", "f16", "bf16". numpy has no bfloat16 of its own:
with ``ml_dtypes`` installed its ``bfloat16`` arrays are used as they are; without it,
bf16 operands are uint16 arrays holding the bits (pass ``dtype="bf16"``), and
``to_bf16``/``from_bf16`` convert from and to float32.
"""

import numpy as np

from arbiter.v1 import arbiter_pb2 as pb

try:  # optional: a real numpy bfloat16
    import ml_dtypes as _ml_dtypes
    BFLOAT16 = np.dtype(_ml_dtypes.bfloat16)
except ImportError:
    BFLOAT16 = None

NAMES = ("f32", "f64", "f16", "bf16")

PROTO = {"f32": pb.DTYPE_F32, "f64": pb.DTYPE_F64, "f16": pb.DTYPE_F16, "bf16": pb.DTYPE_BF16}
FROM_PROTO = {v: k for k, v in PROTO.items()}
ITEMSIZE = {"f32": 4, "f64": 8, "f16": 2, "bf16": 2}
NUMPY = {"f32": np.dtype("<f4"), "f64": np.dtype("<f8"), "f16": np.dtype("<f2")}

_ALIASES = {
    "f32": "f32", "float32": "f32", "float": "f32",
    "f64": "f64", "float64": "f64", "double": "f64",
    "f16": "f16", "float16": "f16", "half": "f16",
    "bf16": "bf16", "bfloat16": "bf16",
}


def normalize(dtype, what="dtype"):
    """A dtype given as a name, a numpy dtype or a torch dtype, as one of NAMES."""
    if isinstance(dtype, str):
        name = _ALIASES.get(dtype.lower())
    else:
        name = _ALIASES.get(str(dtype).rsplit(".", 1)[-1])  # torch.float32, <class numpy.float32>
        if name is None:
            try:
                name = _ALIASES.get(np.dtype(dtype).name)
            except TypeError:
                name = None
    if name is None:
        raise ValueError("%s %r is not one arbiter computes in: expected one of %s"
                         % (what, dtype, ", ".join(NAMES)))
    return name


def to_bf16(x):
    """float32 values -> bf16 bits (uint16), rounded to nearest even; NaN stays NaN."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounded = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    nan = (bits & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    quiet = (bits >> np.uint32(16)) | np.uint32(0x0040)
    return np.where(nan, quiet, rounded).astype(np.uint16)


def from_bf16(bits):
    """bf16 bits (uint16, or an ml_dtypes bfloat16 array) -> float32, exactly."""
    raw = np.ascontiguousarray(bits)
    if raw.dtype.itemsize != 2:
        raise ValueError("from_bf16 expects 16-bit elements (bf16 bits), got %s" % raw.dtype)
    return (raw.view(np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)
