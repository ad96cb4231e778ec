"""Arbiter's Python client: matmuls on numpy arrays and PyTorch tensors, served by arbiterd.

    import numpy as np, arbiter
    with arbiter.Client("127.0.0.1:50051") as client:
        r = client.matmul(np.ones((64, 32), np.float32), np.ones((32, 16), np.float32))
        print(r.c.shape, r.candidate, r.source, r.device_seconds)

``arbiter.torch.mm`` is a drop-in for torch.mm (import arbiter.torch; it needs torch).
The stubs of proto/arbiter/v1/arbiter.proto are generated when the package is built
and live in ``arbiter.v1``.
"""

from arbiter.client import DEFAULT_ADDRESS, Client
from arbiter.dtypes import from_bf16, to_bf16
from arbiter.errors import (ArbiterError, DeadlineExceeded, FailedPrecondition, Internal, InvalidArgument,
                            NotFound, PermissionDenied, ResourceExhausted, Unauthenticated, Unavailable,
                            Unimplemented)
from arbiter.results import (Candidate, CandidateResult, Contract, Force, MatmulResult, QuarantineEntry, Region,
                             Selection, ServerInfo, ShapeCoverage, TuneOutcome, Verdict)

__version__ = "0.1.0"

__all__ = [
    "ArbiterError", "Candidate", "CandidateResult", "Client", "Contract", "DEFAULT_ADDRESS", "DeadlineExceeded",
    "FailedPrecondition", "Force", "Internal", "InvalidArgument", "MatmulResult", "NotFound", "PermissionDenied",
    "QuarantineEntry", "Region", "ResourceExhausted", "Selection", "ServerInfo", "ShapeCoverage", "TuneOutcome",
    "Unauthenticated", "Unavailable", "Unimplemented", "Verdict", "from_bf16", "to_bf16",
]
