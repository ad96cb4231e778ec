"""Client: one channel to one arbiterd, and a method per RPC.

Thread-safe: a Client may be shared between threads (gRPC channels are); close() it,
or use it as a context manager, when done.
"""

import operator
import os
import threading

import grpc
import numpy as np

from arbiter import _cuda, _host, _session, dtypes, operands, results
from arbiter.errors import ArbiterError, error_for, from_rpc_error, invalid_argument
from arbiter.health_pb2 import HealthCheckRequest, HealthCheckResponse
from arbiter.progress import TuneDisplay
from arbiter.v1 import arbiter_pb2 as pb
from arbiter.v1 import arbiter_pb2_grpc as pb_grpc

DEFAULT_ADDRESS = "127.0.0.1:50051"  # arbiterd's default --listen

_DETERMINISM = {
    None: pb.DETERMINISM_UNSPECIFIED,
    "nondeterministic": pb.DETERMINISM_NONDETERMINISTIC,
    "run_to_run": pb.DETERMINISM_RUN_TO_RUN,
    "batch_invariant": pb.DETERMINISM_BATCH_INVARIANT,
}
_TUNING = {
    None: pb.TUNING_POLICY_UNSPECIFIED,
    "sync": pb.TUNING_POLICY_SYNC,
    "async": pb.TUNING_POLICY_ASYNC,
    "off": pb.TUNING_POLICY_OFF,
}
# grpc.health.v1.Health/Check; arbiter/health.proto declares its two messages.
_HEALTH_CHECK = "/grpc.health.v1.Health/Check"


def _choice(table, value, what, method):
    if value in table:
        return table[value]
    names = ", ".join(repr(k) for k in table if k is not None)
    raise invalid_argument(method, "%s=%r: expected None or one of %s" % (what, value, names))


def _describe(x):
    if isinstance(x, np.ndarray):
        return "a %s array of shape %s%s" % (x.dtype, x.shape, "" if x.flags.c_contiguous else ", not C-contiguous")
    return "%s.%s" % (type(x).__module__, type(x).__qualname__)


def _reply_c(r, m, n, name, make_c):
    """C sent back inline in MatmulResponse r, m x n of dtype name, made by make_c; Internal if its size is off."""
    expected = m * n * dtypes.ITEMSIZE[name]
    if len(r.c) != expected:
        raise error_for(grpc.StatusCode.INTERNAL, "the daemon sent C with %d bytes, expected %d (%dx%d %s)"
                        % (len(r.c), expected, m, n, name), "Matmul")
    return make_c(r.c)


def _read_token(path):
    with open(path) as f:
        token = f.read().strip()
    if not token:
        raise ValueError("the token file %r is empty: it should hold the daemon's --admin-token-file token" % path)
    return token


class Client:
    """A connection to arbiterd.

    address: "host:port" or "unix:/path/to.sock" (default: $ARBITER_ADDRESS, else
    127.0.0.1:50051). token_file: a file holding the admin bearer token (the daemon's
    --admin-token-file); sent with admin calls only. timeout: seconds per call (None:
    no deadline; a first matmul of a shape may measure every candidate first).
    host_staging: on a unix: address, arrays and CPU tensors of STAGING_MIN_BYTES or more
    (A, B and C together) go through a host buffer this client keeps - copied in, named by
    reference, C copied out - instead of through the socket as bytes (far faster: gRPC's
    Python transport moves a few hundred MB/s); False sends them as bytes.
    """

    STAGING_MIN_BYTES = 1 << 20

    def __init__(self, address=None, token_file=None, timeout=None, host_staging=True):
        self.address = address or os.environ.get("ARBITER_ADDRESS", DEFAULT_ADDRESS)
        self.timeout = timeout
        self._admin_metadata = (("authorization", "Bearer " + _read_token(token_file)),) if token_file else None
        # The daemon enforces its own --max-message-bytes; the client adds no smaller limit.
        self._channel = grpc.insecure_channel(self.address, options=[
            ("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)])
        self._dispatch = pb_grpc.DispatchStub(self._channel)
        self._admin = pb_grpc.AdminStub(self._channel)
        self._health = self._channel.unary_unary(
            _HEALTH_CHECK, request_serializer=HealthCheckRequest.SerializeToString,
            response_deserializer=HealthCheckResponse.FromString)
        # Zero-copy CUDA tensors (arbiter._cuda): the fd-socket session (its token then goes on every
        # call), what the daemon said of its device, the registrations, and the torch adapter.
        self._session_lock = threading.Lock()
        self._session = None
        self._cuda_target = None
        self._regions = None
        self._cuda_ops = None
        self._host_buffers = []  # arbiter._host.HostBuffer, open ones
        self._gone_buffers = []  # those a daemon restart took (their session ended), for the error
        # Staging (host_staging): one host buffer, grown as needed, used by one call at a time.
        self._staging_on = host_staging and _session.fd_socket_path(self.address) is not None
        self._staging_lock = threading.Lock()
        self._staging = None
        self._closed = False

    def __repr__(self):
        return "arbiter.Client(%r)" % self.address

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        """Unregisters this client's regions, ends its session, then closes the channel. Idempotent."""
        if self._closed:
            return
        try:
            for buffer in list(self._host_buffers):
                try:
                    buffer.close()
                except ArbiterError:
                    pass  # the daemon is gone or forgot the session: its end releases the region anyway
            _cuda.release_all(self)  # before the channel closes: it unregisters through it
        finally:
            self._closed = True
            if self._session is not None:
                self._session.close()
            self._channel.close()

    def _call(self, name, rpc, request, admin=False):
        if self._closed:
            raise ValueError("%r is closed" % self)
        metadata = self._admin_metadata if admin else None
        if self._session is not None:
            metadata = (metadata or ()) + ((_session.METADATA_KEY, self._session.token),)
        try:
            return rpc(request, timeout=self.timeout, metadata=metadata)
        except grpc.RpcError as e:
            raise from_rpc_error(e, name) from None

    # Dispatch -------------------------------------------------------------------------------------------------

    def matmul(self, a, b, *, dtype=None, determinism=None, tuning=None, out=None):
        """C = A @ B on the daemon's device, by the candidate it selects for the shape.

        a, b: 2-D numpy arrays (float32, float64, float16, ml_dtypes.bfloat16, or uint16
        bf16 bits with dtype="bf16") or PyTorch tensors (float32/64/16, bfloat16), one
        dtype for both, C-contiguous. CPU tensors and arrays travel as bytes - except
        arrays in a host buffer (host_buffer), which the daemon reads where they are;
        CUDA tensors stay on the GPU (arbiter/_cuda.py: a Unix-socket client, a daemon on
        their GPU, operands 256-byte aligned). out: None, or an m x n array of A's dtype in
        a host buffer that C is written into in place (then nothing crosses the socket).
        determinism: None, "nondeterministic", "run_to_run" or "batch_invariant" (the least
        the candidate must guarantee). tuning: None (the daemon's default), "sync",
        "async" or "off" (what a never-seen shape does).
        Returns a MatmulResult whose .c has A's type, dtype (and device); it is out when given.
        """
        required = _choice(_DETERMINISM, determinism, "determinism", "Matmul")
        policy = _choice(_TUNING, tuning, "tuning", "Matmul")
        if _cuda.on_cuda(a, b):
            if out is not None:
                raise invalid_argument("Matmul", "out= is for arrays in a host buffer; CUDA tensors get C as a "
                                       "new CUDA tensor")
            return _cuda.matmul(self, a, b, dtype, required, policy)
        if out is not None or ((self._host_buffers or self._gone_buffers) and isinstance(a, np.ndarray)
                               and isinstance(b, np.ndarray)):
            placed = self._host_matmul(a, b, dtype, required, policy, out)
            if placed is not None:
                return placed
        ops = operands.prepare(a, b, dtype, "Matmul")
        staged = self._staged_matmul(ops, required, policy)
        if staged is not None:
            return staged
        request = pb.MatmulRequest(
            problem=pb.Problem(dtype=dtypes.PROTO[ops.dtype], m=ops.m, n=ops.n, k=ops.k), a=ops.a_bytes,
            b=ops.b_bytes, required_determinism=required, tuning=policy)
        r = self._call("Matmul", self._dispatch.Matmul, request)
        return results.MatmulResult(_reply_c(r, ops.m, ops.n, ops.dtype, ops.make_c), r.candidate, r.candidate_version, results.source_name(r.source),
                                    r.device_seconds, r.bucket)

    def host_buffer(self, nbytes, *, label="arbiter host buffer"):
        """nbytes of host memory shared with the daemon: a HostBuffer whose .array(shape, dtype) arrays
        matmul sends by reference - no operand bytes through the socket (a CPU daemon reads them in
        place; a CUDA daemon copies them to its GPU by DMA from page-locked memory).

        Same node only: a unix: address (FailedPrecondition over TCP). Registered as a region of this
        client's session (counted against the daemon's per-process region quotas) until its close(),
        the client's close() or the process's exit. Usable as a context manager.
        """
        buffer = _host.HostBuffer(self, nbytes, label)
        with self._session_lock:
            self._host_buffers.append(buffer)
        return buffer

    def _staged_matmul(self, ops, determinism, tuning):
        """matmul through the client's staging buffer (host_staging); None where it does not apply - too
        small, TCP, another call using the buffer, or a daemon that maps no host memory - and the bytes
        path serves instead."""
        method = "Matmul"
        a_at = 0
        b_at = _host.align_up(ops.a_view.nbytes)
        c_at = b_at + _host.align_up(ops.b_view.nbytes)
        need = c_at + ops.c_nbytes
        if not self._staging_on or ops.a_view.nbytes + ops.b_view.nbytes + ops.c_nbytes < self.STAGING_MIN_BYTES:
            return None
        if not self._staging_lock.acquire(blocking=False):
            return None  # another thread's call has it: this one goes as bytes
        try:
            for attempt in (0, 1):  # once more on a new session if the daemon forgot this one
                buffer = self._staging
                if buffer is None or buffer._closed or buffer.nbytes < need:
                    if buffer is not None and not buffer._closed:
                        buffer.close()
                    self._staging = None
                    grown = buffer is not None and buffer.nbytes < need  # doubled, so growth is rare
                    size = max(need, 2 * buffer.nbytes if grown else 0)
                    try:
                        buffer = self._staging = self.host_buffer(size, label="arbiter client staging")
                    except ArbiterError as e:
                        if e.code not in (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.UNIMPLEMENTED,
                                          grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.INVALID_ARGUMENT):
                            raise
                        self._staging_on = False  # this daemon takes no host memory of ours: bytes from now on
                        return None
                memory = buffer._bytes
                _host.copy_bytes(memory[a_at:a_at + ops.a_view.nbytes], ops.a_view)
                _host.copy_bytes(memory[b_at:b_at + ops.b_view.nbytes], ops.b_view)
                ref = lambda at: pb.OperandRef(region=buffer.region, offset=at)  # noqa: E731
                request = pb.MatmulRequest(
                    problem=pb.Problem(dtype=dtypes.PROTO[ops.dtype], m=ops.m, n=ops.n, k=ops.k),
                    a_ref=ref(a_at), b_ref=ref(b_at), c_ref=ref(c_at), required_determinism=determinism,
                    tuning=tuning)
                session = self._session
                try:
                    r = self._call(method, self._dispatch.Matmul, request)
                    break
                except ArbiterError as e:
                    if attempt or e.code != grpc.StatusCode.UNAUTHENTICATED or "no such session" not in e.details:
                        raise
                    _cuda.restart_session(self, session)  # the daemon restarted: the buffer went with it
                    self._staging = None
            c_bytes = np.empty(ops.c_nbytes, np.uint8)  # C's own memory, filled by parts
            _host.copy_bytes(c_bytes, memory[c_at:c_at + ops.c_nbytes])
            c = ops.make_c(c_bytes, owned=True)
        finally:
            self._staging_lock.release()
        return results.MatmulResult(c, r.candidate, r.candidate_version, results.source_name(r.source),
                                    r.device_seconds, r.bucket)

    def _host_matmul(self, a, b, dtype, determinism, tuning, out):
        """matmul on A and B in host buffers (C in out, or inline); None when they are not both in one."""
        method = "Matmul"
        name, m, n, k = operands.check_arrays(a, b, dtype, method)
        c_ref = None
        for x, which in ((a, "A"), (b, "B"), (out, "out")):
            region = _host.gone(self, x) if x is not None else None
            if region is not None:
                raise error_for(grpc.StatusCode.FAILED_PRECONDITION,
                                "%s is in host buffer %s, which the daemon no longer has (it restarted, or this "
                                "client's session ended): make a new one with client.host_buffer()" % (which, region),
                                method)
        if out is not None:
            c_ref = _host.locate(self, out)
            if (c_ref is None or not isinstance(out, np.ndarray) or out.shape != (m, n)
                    or out.dtype != a.dtype):
                raise invalid_argument(method, "out: expected a C-contiguous %dx%d array of %s in a host buffer "
                                       "(client.host_buffer(...).array(...)), got %s"
                                       % (m, n, a.dtype, _describe(out)))
        a_ref, b_ref = _host.locate(self, a), _host.locate(self, b)
        if a_ref is None or b_ref is None:
            if out is not None:
                raise invalid_argument(method, "out= is in a host buffer but %s not: A and B must be arrays of "
                                       "host buffers too" % ("A is" if a_ref is None else "B is"))
            return None
        ref = lambda placed: pb.OperandRef(region=placed[0], offset=placed[1])
        request = pb.MatmulRequest(problem=pb.Problem(dtype=dtypes.PROTO[name], m=m, n=n, k=k), a_ref=ref(a_ref),
                                   b_ref=ref(b_ref), required_determinism=determinism, tuning=tuning)
        if c_ref is not None:
            request.c_ref.CopyFrom(ref(c_ref))
        session = self._session
        try:
            r = self._call(method, self._dispatch.Matmul, request)
        except ArbiterError as e:
            if e.code != grpc.StatusCode.UNAUTHENTICATED or "no such session" not in e.details:
                raise
            _cuda.restart_session(self, session)  # the buffers went with it: say so, naming them
            return self._host_matmul(a, b, dtype, determinism, tuning, out)
        if c_ref is not None:
            c = out
        else:
            c = _reply_c(r, m, n, name, lambda data: np.frombuffer(data, dtype=a.dtype).reshape(m, n).copy())
        return results.MatmulResult(c, r.candidate, r.candidate_version, results.source_name(r.source),
                                    r.device_seconds, r.bucket)

    def select(self, m, n, k, dtype, *, determinism=None, tuning=None):
        """Which candidate a matmul of this shape would run, without running it."""
        request = pb.SelectRequest(problem=self._problem(m, n, k, dtype, "Select"),
                                   required_determinism=_choice(_DETERMINISM, determinism, "determinism", "Select"),
                                   tuning=_choice(_TUNING, tuning, "tuning", "Select"))
        return results.selection(self._call("Select", self._dispatch.Select, request))

    def regions(self):
        """The regions this client's session owns (its CUDA tensors' segments); [] before any."""
        if self._session is None:
            return []
        r = self._call("ListRegions", self._dispatch.ListRegions, pb.ListRegionsRequest())
        return [results.region(x) for x in r.regions]

    # Admin (bearer token from token_file where the daemon requires one) ---------------------------------------

    def candidates(self):
        """Every registered candidate: contracts, eligibility on this device and why, quarantine."""
        r = self._call("ListCandidates", self._admin.ListCandidates, pb.ListCandidatesRequest(), admin=True)
        return [results.candidate(c) for c in r.candidates]

    def verdicts(self, *, dtype=None, bucket=None, candidate=None):
        """Stored verdicts, optionally of one dtype, one bucket, or those that raced a candidate."""
        return [results.verdict(v) for v in self._list_verdicts(dtype, bucket, candidate).verdicts]

    def forces(self):
        """Buckets pinned to a candidate by force()."""
        return [results.force(f) for f in self._list_verdicts(None, None, None).forces]

    def force(self, m, n, k, dtype, candidate, *, reason, exact=False):
        """Pins the bucket of (m, n, k, dtype) to a candidate, saying why; returns the bucket.

        exact=True pins that shape alone, before the bucket's force and verdicts."""
        request = pb.ForceRequest(problem=self._problem(m, n, k, dtype, "Force"), candidate=candidate, reason=reason,
                                  exact_shape=exact)
        return self._call("Force", self._admin.Force, request, admin=True).bucket

    def unforce(self, m, n, k, dtype, *, exact=False):
        """Removes the force on the bucket of (m, n, k, dtype) (exact=True: of that shape); True if there was one."""
        request = pb.UnforceRequest(problem=self._problem(m, n, k, dtype, "Unforce"), exact_shape=exact)
        return self._call("Unforce", self._admin.Unforce, request, admin=True).removed

    def invalidate(self, *, candidate=None, dtype=None, shape=None, all=False):
        """Removes verdicts so they are measured again; returns how many.

        Every argument narrows the scope: candidate (verdicts that raced it), dtype, shape
        ((m, n, k): its bucket, with dtype). all=True, alone, removes every verdict.
        """
        request = pb.InvalidateRequest(candidate=candidate or "", all=all)
        if dtype is not None:
            request.dtype = dtypes.PROTO[self._dtype(dtype, "Invalidate")]
        if shape is not None:
            if dtype is None:
                raise invalid_argument("Invalidate", "shape=%r needs dtype= too: a bucket is per dtype" % (shape,))
            m, n, k = self._shape(shape, "Invalidate")
            request.problem.CopyFrom(self._problem(m, n, k, dtype, "Invalidate"))
        return self._call("Invalidate", self._admin.Invalidate, request, admin=True).removed

    def tune(self, shapes, dtype=None, *, progress=True):
        """Measures the bucket of each shape now; returns a TuneOutcome per shape, in order.

        shapes: (m, n, k) tuples with dtype=, or (m, n, k, dtype) tuples. progress: True
        (a bar on stderr once tuning takes a while), False, or a callable given each
        TuneOutcome as it arrives. A shape that fails has .error set; the rest go on.
        """
        problems = []
        for shape in shapes:
            if len(shape) == 4:
                m, n, k, d = shape
            elif dtype is not None:
                (m, n, k), d = self._shape(shape, "Tune"), dtype
            else:
                raise invalid_argument("Tune", "shape %r: expected (m, n, k) with dtype=, or (m, n, k, dtype)"
                                       % (shape,))
            problems.append(self._problem(m, n, k, d, "Tune"))
        if not problems:
            return []
        display = TuneDisplay(len(problems), progress)
        outcomes = []
        try:
            stream = self._call("Tune", self._admin.Tune, pb.TuneRequest(problems=problems), admin=True)
            try:
                for message in stream:
                    outcome = results.tune_outcome(message)
                    outcomes.append(outcome)
                    display.update(outcome)
            except grpc.RpcError as e:
                raise from_rpc_error(e, "Tune") from None
        finally:
            display.close()
        return outcomes

    def quarantined(self):
        """Candidates quarantined (by a failed claim or by an operator), with the evidence."""
        r = self._call("ListQuarantine", self._admin.ListQuarantine, pb.ListQuarantineRequest(), admin=True)
        return [results.quarantine_entry(q) for q in r.entries]

    def quarantine(self, candidate, *, reason, scope="*"):
        """Takes a candidate out of selection, with the evidence: scope "*", a dtype ("bf16") or "dtype/bucket"."""
        request = pb.QuarantineRequest(candidate=candidate, scope=scope, reason=reason)
        self._call("Quarantine", self._admin.Quarantine, request, admin=True)

    def clear_quarantine(self, candidate=None):
        """Lifts the quarantine of one candidate (None: of all); returns how many entries went."""
        request = pb.ClearQuarantineRequest(candidate=candidate or "")
        return self._call("ClearQuarantine", self._admin.ClearQuarantine, request, admin=True).removed

    def info(self):
        """The daemon's build, backend, device, fingerprint and versions."""
        return results.server_info(self._call("ServerInfo", self._admin.ServerInfo, pb.ServerInfoRequest(),
                                              admin=True))

    def health(self, service=""):
        """grpc.health.v1 status: "SERVING" or "NOT_SERVING" ("" is the whole server)."""
        r = self._call("Health", self._health, HealthCheckRequest(service=service))
        return HealthCheckResponse.ServingStatus.Name(r.status)

    # Helpers ----------------------------------------------------------------------------------------------------

    def _list_verdicts(self, dtype, bucket, candidate):
        request = pb.ListVerdictsRequest(bucket=bucket or "", candidate=candidate or "")
        if dtype is not None:
            request.dtype = dtypes.PROTO[self._dtype(dtype, "ListVerdicts")]
        return self._call("ListVerdicts", self._admin.ListVerdicts, request, admin=True)

    @staticmethod
    def _dtype(dtype, method):
        try:
            return dtypes.normalize(dtype)
        except ValueError as e:
            raise invalid_argument(method, str(e)) from None

    @staticmethod
    def _shape(shape, method):
        try:
            m, n, k = shape
        except (TypeError, ValueError):
            raise invalid_argument(method, "shape %r: expected (m, n, k)" % (shape,)) from None
        return m, n, k

    def _problem(self, m, n, k, dtype, method):
        dims = []
        for name, value in (("m", m), ("n", n), ("k", k)):
            try:
                dims.append(operator.index(value))
            except TypeError:
                raise invalid_argument(method, "%s=%r: expected an integer" % (name, value)) from None
        return pb.Problem(dtype=dtypes.PROTO[self._dtype(dtype, method)], m=dims[0], n=dims[1], k=dims[2])

