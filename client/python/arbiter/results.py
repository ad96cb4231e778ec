"""What the daemon answers, as small Python objects.

Enums read as arbiterctl prints them: dtypes "f32"/"f64"/"f16"/"bf16", verdict sources
"measured"/"forced"/"tier_default"/"provisional", determinism "nondeterministic"/
"run_to_run"/"batch_invariant". Each object built from a message keeps nothing of it:
the raw messages are there for whoever needs them (``arbiter.v1.arbiter_pb2``).
"""

from dataclasses import dataclass, field
from typing import Any, List, Optional, Tuple

from arbiter import dtypes
from arbiter.v1 import arbiter_pb2 as pb


def _enum(enum_type, prefix, value):
    """VERDICT_SOURCE_MEASURED -> "measured"; an unknown number reads as its digits."""
    try:
        return enum_type.Name(value)[len(prefix):].lower()
    except ValueError:
        return str(value)


def source_name(value):
    return _enum(pb.VerdictSource, "VERDICT_SOURCE_", value)


def determinism_name(value):
    return _enum(pb.Determinism, "DETERMINISM_", value)


def dtype_name(value):
    return dtypes.FROM_PROTO.get(value, "unspecified")


@dataclass
class MatmulResult:
    """C and how it was computed. ``c`` is a numpy array (or a tensor, for tensor operands)."""
    c: Any
    candidate: str
    version: int
    source: str            # measured, forced, tier_default, provisional
    device_seconds: float  # the kernel alone, by the device's timer
    bucket: str


@dataclass
class CandidateResult:
    """One candidate's figures in a verdict: timed, or why not."""
    name: str
    version: int
    tier: int
    determinism: str
    state: str  # timed, failed_oracle, error, unmeasured, quarantined
    reason: str
    median_seconds: float
    spread: float  # interquartile range / median
    samples: int
    max_abs_error: float
    max_rel_error: float


@dataclass
class Verdict:
    """The measured choice for one (device, dtype, bucket)."""
    fingerprint: str
    dtype: str
    bucket: str
    winner: str
    winner_version: int
    source: str
    reason: str
    measured: Tuple[int, int, int]  # the (m, n, k) it was measured at
    results: List[CandidateResult]
    created_unix: int
    candidates: str  # name@version of every candidate raced


@dataclass
class Selection:
    """Which candidate the daemon would run for a problem, and the verdict behind it."""
    candidate: str
    version: int
    source: str
    bucket: str
    reason: str
    verdict: Optional[Verdict]


@dataclass
class ShapeCoverage:
    min_m: int
    max_m: int
    min_n: int
    max_n: int
    min_k: int
    max_k: int
    align_m: int
    align_n: int
    align_k: int


@dataclass
class Contract:
    """What a candidate promises for one dtype."""
    dtype: str
    entry: str
    accuracy_abs: float
    accuracy_rel_per_sqrt_k: float
    determinism: str
    arch: str
    shape: ShapeCoverage


@dataclass
class QuarantineEntry:
    candidate: str
    version: int
    scope: str
    reason: str
    created_unix: int


@dataclass
class Candidate:
    name: str
    version: int
    tier: int
    description: str
    contracts: List[Contract]
    eligible: bool
    ineligible_reason: str
    quarantine: List[QuarantineEntry]


@dataclass
class Force:
    dtype: str
    bucket: str
    candidate: str
    reason: str
    created_unix: int


@dataclass
class TuneOutcome:
    """One problem of a Tune: its verdict, or the error that stopped it."""
    index: int
    total: int
    problem: Tuple[int, int, int, str]  # (m, n, k, dtype)
    verdict: Optional[Verdict]
    error: str

    @property
    def ok(self):
        return not self.error


@dataclass
class ServerInfo:
    version: str
    backend: str
    device_name: str
    arch: str
    fingerprint: str
    versions: dict = field(default_factory=dict)
    tuning: str = ""
    candidates: int = 0
    verdicts: int = 0
    store_path: str = ""
    uuid: str = ""
    measurements: int = 0
    region_kinds: List[str] = field(default_factory=list)  # what RegisterRegion maps: host_memfd, cuda_ipc, ...
    fd_socket: str = ""        # the session socket's path; empty without a Unix listener
    max_message_bytes: int = 0


@dataclass
class Region:
    """Memory of this client's that the daemon maps (zero-copy operands), as ListRegions tells it."""
    id: str
    kind: str   # host_memfd, cuda_vmm_fd, cuda_ipc
    bytes: int
    label: str
    owner: str  # "session 3 (pid 1234, uid 1000)"
    created_unix: int


def region_kind_name(value):
    return _enum(pb.RegionKind, "REGION_KIND_", value)


def region(r):
    return Region(r.id, region_kind_name(r.kind), r.bytes, r.label, r.owner.address, r.created_unix)


def problem_tuple(p):
    return (p.m, p.n, p.k, dtype_name(p.dtype))


def candidate_result(r):
    return CandidateResult(r.name, r.version, r.tier,
                           determinism_name(r.determinism), r.state, r.reason, r.median_seconds, r.spread,
                           r.samples, r.max_abs_error, r.max_rel_error)


def verdict(v):
    return Verdict(v.fingerprint, dtype_name(v.dtype), v.bucket, v.winner, v.winner_version, source_name(v.source),
                   v.reason, (v.measured.m, v.measured.n, v.measured.k), [candidate_result(r) for r in v.results],
                   v.created_unix, v.candidates)


def selection(r):
    return Selection(r.candidate, r.candidate_version, source_name(r.source), r.bucket, r.reason,
                     verdict(r.verdict) if r.HasField("verdict") else None)


def quarantine_entry(q):
    return QuarantineEntry(q.candidate, q.version, q.scope, q.reason, q.created_unix)


def contract(c):
    s = c.shape
    return Contract(dtype_name(c.dtype), c.entry, c.accuracy.abs, c.accuracy.rel_per_sqrt_k,
                    determinism_name(c.determinism), c.arch,
                    ShapeCoverage(s.min_m, s.max_m, s.min_n, s.max_n, s.min_k, s.max_k,
                                  s.align_m, s.align_n, s.align_k))


def candidate(c):
    return Candidate(c.name, c.version, c.tier, c.description, [contract(m) for m in c.members], c.eligible,
                     c.ineligible_reason, [quarantine_entry(q) for q in c.quarantine])


def force(f):
    return Force(dtype_name(f.dtype), f.bucket, f.candidate, f.reason, f.created_unix)


def tune_outcome(p):
    return TuneOutcome(p.index, p.total, problem_tuple(p.problem),
                       verdict(p.verdict) if p.HasField("verdict") else None, p.error)


def server_info(r):
    return ServerInfo(r.version, r.backend, r.device_name, r.arch, r.fingerprint, dict(r.versions), r.tuning,
                      r.candidates, r.verdicts, r.store_path, r.uuid, r.measurements,
                      [region_kind_name(k) for k in r.region_kinds], r.fd_socket, r.max_message_bytes)
