"""Zero-copy CUDA tensors: A, B and C stay on the GPU, named by region and byte offset.

For a Client on the daemon's Unix socket, with a daemon on the tensors' GPU (--backend
cuda). How a matmul goes:
  - the Client opens a session on the daemon's fd socket (arbiter._session); the
    session owns every region, and ending it (close(), or the process exiting) makes
    the daemon release them all;
  - each operand's storage is shared as torch.multiprocessing shares a CUDA tensor
    (``UntypedStorage._share_cuda_()``): the legacy CUDA IPC handle of the caching
    allocator's segment (one cudaMalloc) holding it, and the storage's offset there;
  - a segment is registered once (RegisterRegion, REGION_KIND_CUDA_IPC) and cached by
    its handle: the allocator packs many tensors into one segment, and they all share
    its region (re-registered larger when a storage reaches past what it covers);
  - C is ``torch.empty`` on the operands' device, placed the same way;
  - Matmul names A, B and C by region id and byte offset and carries an interprocess
    event recorded on the current stream, which the daemon's stream waits on before it
    reads: work queued on A and B is done first, without a host synchronization. C is
    complete when the reply arrives (the daemon synchronizes its stream before replying).
Nothing is copied: the reply carries no bytes.

Lifetime. ``_share_cuda_`` puts the storage behind torch's IPC reference counter, set
to one: if the storage is freed while the counter is held, torch keeps its memory back
(its "limbo") rather than reuse or free it, so the daemon never maps memory that torch
has handed to someone else. A ``weakref.finalize`` on the storage queues its release;
the release unregisters the segment's region once no live storage of this client uses
it, and only then returns the counter. Client.close() unregisters every region and
returns every counter.

Refused before anything is sent, saying what was expected: a TCP client (regions need
the Unix socket's session), a daemon without CUDA regions (the CPU backend maps host
memory), tensors on another GPU than the daemon's, and operands that are not 2-D, not
one float dtype, not on one device, not row-major contiguous, or not 256-byte aligned.

Thread-safe: one RegionCache per Client, one lock over it; finalizers only queue.
"""

import collections
import contextlib
import os
import re
import threading
import weakref

import grpc

from arbiter import dtypes, operands, results
from arbiter._session import Session, fd_socket_path
from arbiter.errors import ArbiterError, error_for, invalid_argument
from arbiter.v1 import arbiter_pb2 as pb

ALIGNMENT = 256  # bytes: every operand's device address (what each candidate is measured with)
IPC_HANDLE_BYTES = 64  # sizeof(cudaIpcMemHandle_t)
_TORCH_DTYPES = {"float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16"}


def on_cuda(a, b):
    """True when either operand is a CUDA tensor: the zero-copy path decides (or refuses)."""
    return any(operands.is_tensor(x) and x.device.type == "cuda" for x in (a, b))


def check_operands(a, b, requested, method):
    """(dtype name, m, n, k) of two CUDA tensors fit to go zero-copy, or InvalidArgument saying why not.

    requested: Client.matmul's dtype= (None, or a name the tensors' dtype must match).
    """
    if not all(hasattr(x, "device") and hasattr(x, "data_ptr") for x in (a, b)):  # a tensor, or its stand-in
        raise invalid_argument(method, "expected A and B both torch.Tensor on one CUDA device, got %s and %s"
                               % (type(a).__name__, type(b).__name__))
    if a.device != b.device:
        raise invalid_argument(method, "A is on %s and B on %s: expected both on one CUDA device"
                               % (a.device, b.device))
    m, n, k = operands.check_shapes(tuple(a.shape), tuple(b.shape), method)
    names = []
    for x, which in ((a, "A"), (b, "B")):
        name = _TORCH_DTYPES.get(str(x.dtype).rsplit(".", 1)[-1])
        if name is None:
            raise invalid_argument(method, "%s has dtype %s: expected torch.float32, float64, float16 or bfloat16"
                                   % (which, x.dtype))
        names.append(name)
    if names[0] != names[1]:
        raise invalid_argument(method, "A is %s and B is %s: expected one dtype for both" % (a.dtype, b.dtype))
    if requested is not None and operands.requested_dtype(requested, method) != names[0]:
        raise invalid_argument(method, "the tensors are %s but dtype=%r was asked" % (a.dtype, requested))
    for x, which in ((a, "A"), (b, "B")):
        if not x.is_contiguous():
            raise invalid_argument(method, "%s is not contiguous: the daemon reads row-major operands in place; "
                                   "pass %s.contiguous() (arbiter.torch.mm does that itself)" % (which, which))
        past = x.data_ptr() % ALIGNMENT
        if past:
            raise invalid_argument(method, "%s starts %d bytes past a %d-byte boundary (a view at storage offset "
                                   "%d): the daemon reads operands in place at %d-byte aligned addresses; pass an "
                                   "aligned tensor (%s.clone() is one; arbiter.torch.mm copies it itself)"
                                   % (which, past, ALIGNMENT, x.storage_offset(), ALIGNMENT, which))
    return names[0], m, n, k


class Target:
    """What this client knows of the daemon's device: None fields where ServerInfo was not allowed."""

    def __init__(self, backend=None, uuid=None):
        self.backend = backend
        self.uuid = uuid


def target(client, method):
    """Opens the client's session (once) and checks that the daemon maps CUDA IPC regions.

    FailedPrecondition before anything is sent for a TCP client or a daemon that maps no
    CUDA memory. ServerInfo is an admin call: where the daemon refuses it (a token the
    client lacks), the daemon's own RegisterRegion checks stand in.
    """
    with client._session_lock:
        if client._cuda_target is not None:
            return client._cuda_target
        path = fd_socket_path(client.address)
        if path is None:
            raise error_for(grpc.StatusCode.FAILED_PRECONDITION,
                            "CUDA tensors go zero-copy through regions, which belong to a session on the daemon's "
                            "Unix socket: connect with arbiter.Client(\"unix:/path/to/arbiter.sock\") on the "
                            "daemon's node, not %s (or pass CPU tensors, sent as bytes)" % client.address, method)
        try:
            info = client.info()
        except ArbiterError as e:
            if e.code not in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
                raise
            info = None
        if info is not None and (info.backend != "cuda" or "cuda_ipc" not in info.region_kinds):
            raise error_for(grpc.StatusCode.FAILED_PRECONDITION,
                            "the daemon at %s runs the %s backend, which maps %s: CUDA tensors go zero-copy only to "
                            "a daemon on their GPU (arbiterd --backend cuda); for this one, pass CPU tensors (.cpu())"
                            % (client.address, info.backend or "unknown",
                               ", ".join(info.region_kinds) or "no regions"), method)
        if client._session is None:  # a host buffer may have opened it: its regions live in it
            client._session = Session(path, method)
        client._cuda_target = Target(info.backend, info.uuid) if info is not None else Target()
        return client._cuda_target


def _uuid_digits(text):
    """"GPU-58b5a3f7-..." or "58b5a3f7-..." -> its 32 hex digits; None for anything else."""
    digits = re.sub("[^0-9a-f]", "", str(text).lower().replace("gpu-", "", 1))
    return digits if len(digits) == 32 else None


def check_device(target_, device_uuid, device, method):
    """FailedPrecondition when the tensors' GPU is known not to be the daemon's."""
    theirs, ours = _uuid_digits(target_.uuid or ""), _uuid_digits(device_uuid or "")
    if theirs and ours and theirs != ours:
        raise error_for(grpc.StatusCode.FAILED_PRECONDITION,
                        "the tensors are on %s (GPU %s) but the daemon serves GPU %s: regions map memory of the "
                        "daemon's own GPU; move them there (.to(...)) or use the daemon of that GPU"
                        % (device, device_uuid, target_.uuid), method)


class TorchOps:
    """What the zero-copy path asks of torch; tests give RegionCache a fake instead."""

    def __init__(self):
        import torch  # only here: the package imports without torch
        self.torch = torch
        self._events = collections.defaultdict(list)  # device index -> idle interprocess events
        self._events_lock = threading.Lock()

    def storage(self, tensor):
        return tensor.untyped_storage()

    def share(self, storage):
        """(64-byte IPC handle of the segment, storage's offset in it, torch's IPC counter) of a storage."""
        try:
            shared = storage._share_cuda_()
        except RuntimeError as e:  # e.g. a tensor received from another process, an expandable segment
            raise error_for(grpc.StatusCode.FAILED_PRECONDITION,
                            "torch cannot share this tensor's memory as a CUDA IPC handle: %s" % e, "Matmul") from None
        counter = (shared[4], shared[5])
        try:
            return parse_handle(shared[1]), shared[3], counter
        except ArbiterError:
            self.release_counter(counter)  # unused: torch may reuse the memory once it is freed
            raise

    def release_counter(self, counter):
        self.torch.UntypedStorage._release_ipc_counter_cuda(*counter)

    def empty(self, shape, like):
        return self.torch.empty(shape, dtype=like.dtype, device=like.device)

    def device_uuid(self, device):
        try:
            return str(self.torch.cuda.get_device_properties(device).uuid)
        except (AttributeError, RuntimeError):
            return None

    def ready_event(self, device):
        """An interprocess event recorded on device's current stream: the daemon waits on it."""
        index = device.index if device.index is not None else self.torch.cuda.current_device()
        with self._events_lock:
            idle = self._events[index]
            event = idle.pop() if idle else None
        if event is None:
            event = self.torch.cuda.Event(interprocess=True)
        event.record(self.torch.cuda.current_stream(device))
        return event

    def event_handle(self, event):
        return bytes(event.ipc_handle())

    def reuse_event(self, device, event):
        """Back to the pool once the reply came: the daemon has waited on it by then."""
        index = device.index if device.index is not None else self.torch.cuda.current_device()
        with self._events_lock:
            self._events[index].append(event)


def parse_handle(handle):
    """The 64-byte cudaIpcMemHandle_t inside what _share_cuda_ returns.

    torch before 2.3 returns the bare handle; later ones prefix a version byte and a type
    byte: "c" (a cudaMalloc segment, the handle follows) or "e" (an expandable segment,
    shared another way, which has no legacy handle).
    """
    handle = bytes(handle)
    if len(handle) == IPC_HANDLE_BYTES:
        return handle
    if len(handle) == IPC_HANDLE_BYTES + 2 and handle[1:2] == b"c":
        return handle[2:]
    if len(handle) >= 2 and handle[1:2] == b"e":
        raise error_for(grpc.StatusCode.FAILED_PRECONDITION,
                        "the tensor lives in an expandable segment (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True), "
                        "which has no legacy CUDA IPC handle: zero-copy needs the caching allocator's default segments",
                        "Matmul")
    raise error_for(grpc.StatusCode.FAILED_PRECONDITION,
                    "torch shared the tensor as a %d-byte handle of a kind this client does not know (expected a "
                    "64-byte cudaIpcMemHandle_t, bare or after torch's version and 'c' type bytes)" % len(handle),
                    "Matmul")


class Rpc:
    """RegisterRegion/UnregisterRegion through a Client (its session's metadata included)."""

    def __init__(self, client):
        self._client = client

    def register(self, handle, nbytes):
        request = pb.RegisterRegionRequest(kind=pb.REGION_KIND_CUDA_IPC, bytes=nbytes, cuda_ipc_handle=handle,
                                           label="torch segment, pid %d" % os.getpid())
        return self._client._call("RegisterRegion", self._client._dispatch.RegisterRegion, request).region.id

    def unregister(self, region):
        self._client._call("UnregisterRegion", self._client._dispatch.UnregisterRegion,
                           pb.UnregisterRegionRequest(id=region))


class _Segment:
    """One caching-allocator segment, registered as a region."""

    def __init__(self, region, nbytes):
        self.region = region   # the region in use
        self.nbytes = nbytes   # what it covers, from the segment's start
        self.users = set()     # keys of the live storages placed in it


class _Shared:
    """A storage this client shared: where it is, and what to give back when it goes."""

    def __init__(self, storage, handle, offset, counter):
        self.ref = weakref.ref(storage)
        self.data_ptr = storage.data_ptr()
        self.nbytes = storage.nbytes()
        self.handle = handle
        self.offset = offset      # the storage's first byte, from the segment's start
        self.counter = counter    # torch's IPC counter: returned once the daemon maps it no more
        self.finalizer = None


class RegionCache:
    """A client's registrations: segment handle -> region, storage -> where it sits.

    rpc: register(handle, nbytes) -> region id, unregister(region id). ops: storage(t),
    share(storage) -> (handle, offset, counter), release_counter(counter) (TorchOps).
    Storages are keyed by id() while alive; a finalizer queues the key when one dies.
    """

    def __init__(self, rpc, ops):
        self._rpc = rpc
        self._ops = ops
        self._lock = threading.Lock()
        self._segments = {}  # IPC handle -> _Segment; guarded by _lock
        self._storages = {}  # id(storage) -> _Shared; guarded by _lock
        self._retired = []   # regions outgrown, unregistered once no call is in flight; guarded by _lock
        self._inflight = 0   # calls between place() and done(); guarded by _lock
        self._closed = False  # guarded by _lock
        self._dead = collections.deque()  # keys of storages that died: appended by finalizers, lock-free
        self.registrations = 0  # RegisterRegion calls made, for tests and reports

    def place(self, storages):
        """[(region id, storage's offset in it)] for each storage, registering what is new.

        One RegisterRegion per segment at most, sized to the furthest storage of the call
        in it. The regions returned stay registered until the matching done().
        """
        with self._locked():
            if self._closed:
                raise ValueError("the client is closed")
            entries, fresh, ends = {}, [], {}  # this call's storages by key; those shared now; extents
            try:
                for storage in storages:
                    key = id(storage)
                    if key in entries:
                        continue
                    shared = self._known(key, storage)
                    if shared is None:
                        handle, offset, counter = self._ops.share(storage)
                        shared = _Shared(storage, handle, offset, counter)
                        fresh.append((key, storage, shared))
                    entries[key] = shared
                for shared in entries.values():
                    ends[shared.handle] = max(ends.get(shared.handle, 0), shared.offset + shared.nbytes)
                for handle, end in ends.items():
                    self._cover(handle, end)
            except BaseException:
                for _, _, shared in fresh:
                    self._release_counter(shared.counter)
                self._drop_unused(ends)
                raise
            for key, storage, shared in fresh:
                self._adopt(key, storage, shared)
            self._inflight += 1
            return [(self._segments[entries[id(s)].handle].region, entries[id(s)].offset) for s in storages]

    def done(self):
        """Ends a call begun by place(): outgrown regions go once no call is in flight."""
        with self._locked():
            self._inflight -= 1
            if self._inflight == 0:
                retired, self._retired = self._retired, []
                self._unregister(retired)

    def close(self):
        """Unregisters every region, then gives back every counter. Idempotent."""
        with self._locked():
            if not self._closed:
                self._unregister(self._retired + [s.region for s in self._segments.values()])
                self._give_back_all()

    def abandon(self):
        """Like close(), for regions the daemon has already dropped (its session ended): no RPCs."""
        with self._locked():
            if not self._closed:
                self._give_back_all()

    def regions(self):
        """The regions in use, for tests and listings: {region id: bytes covered}."""
        with self._locked():
            return {s.region: s.nbytes for s in self._segments.values()}

    def _known(self, key, storage):
        """The storage's entry if it is still the one shared; None if it must be shared (again)."""
        shared = self._storages.get(key)
        if shared is None:
            return None
        if shared.ref() is storage and shared.data_ptr == storage.data_ptr() and shared.nbytes == storage.nbytes():
            return shared
        self._forget(key)  # torch reallocated it (resize_): what was shared is gone
        return None

    def _cover(self, handle, end):
        """Makes the segment's region reach `end` bytes from its start."""
        segment = self._segments.get(handle)
        if segment is None:
            self._segments[handle] = _Segment(self._rpc.register(handle, end), end)
            self.registrations += 1
        elif segment.nbytes < end:
            # The daemon opens a handle once and shares it between regions: the larger region
            # costs no new mapping, and the smaller goes when no call still names it.
            region = self._rpc.register(handle, end)
            self.registrations += 1
            self._retired.append(segment.region)
            segment.region, segment.nbytes = region, end

    def _adopt(self, key, storage, shared):
        shared.finalizer = weakref.finalize(storage, self._storage_died, key)
        shared.finalizer.atexit = False  # at exit the session ends and the daemon releases it all
        self._storages[key] = shared
        self._segments[shared.handle].users.add(key)

    def _drop_unused(self, handles):
        """After a failed place(): segments registered for it that no live storage uses."""
        for handle in handles:
            segment = self._segments.get(handle)
            if segment is not None and not segment.users:
                del self._segments[handle]
                self._unregister([segment.region])

    def _storage_died(self, key):
        """weakref.finalize's callback: queue only; whoever holds or next takes the lock releases."""
        self._dead.append(key)
        if self._lock.acquire(blocking=False):
            self._unlock()

    @contextlib.contextmanager
    def _locked(self):
        """The lock, with what finalizers queued drained on the way in and out."""
        self._lock.acquire()
        try:
            self._drain()
            yield
        finally:
            self._unlock()

    def _unlock(self):
        """Releases the lock, then drains what finalizers queued meanwhile (if nobody else holds it)."""
        while True:
            self._drain()
            self._lock.release()
            if not self._dead or not self._lock.acquire(blocking=False):
                return

    def _drain(self):
        while self._dead:
            self._forget(self._dead.popleft())

    def _forget(self, key):
        """A storage is gone: unregister its segment's region if no live storage uses it, then its counter."""
        shared = self._storages.pop(key, None)
        if shared is None:
            return
        shared.finalizer.detach()
        segment = self._segments[shared.handle]
        segment.users.discard(key)
        if not segment.users:
            del self._segments[shared.handle]
            self._unregister([segment.region])
        self._release_counter(shared.counter)

    def _give_back_all(self):
        self._closed = True
        self._dead.clear()
        for shared in self._storages.values():
            shared.finalizer.detach()
            self._release_counter(shared.counter)
        self._segments.clear()
        self._storages.clear()
        self._retired = []

    def _unregister(self, regions):
        for region in regions:
            try:
                self._rpc.unregister(region)
            except (ArbiterError, ValueError):
                pass  # best effort: a session that ended took its regions with it

    def _release_counter(self, counter):
        try:
            self._ops.release_counter(counter)
        except Exception:  # torch's own release is best effort too (a producer gone, a file unlinked)
            pass


def cache_of(client):
    """The client's RegionCache, made on first use."""
    with client._session_lock:
        if client._regions is None:
            client._regions = RegionCache(Rpc(client), torch_ops(client))
        return client._regions


def torch_ops(client):
    """The client's TorchOps (tests set client._cuda_ops to a fake first)."""
    if client._cuda_ops is None:
        client._cuda_ops = TorchOps()
    return client._cuda_ops


def release_all(client):
    """Unregisters every region client registered and gives back torch's counters (Client.close)."""
    if client._regions is not None:
        client._regions.close()


def matmul(client, a, b, requested, determinism, tuning):
    """C = A @ B on CUDA tensors through regions; determinism and tuning are the request's enum values.

    A daemon that restarted (or ended the session) no longer knows the session: then the
    client drops it and what it registered, opens a new one and calls once more.
    """
    dtype, m, n, k = check_operands(a, b, requested, "Matmul")
    target(client, "Matmul")
    session = client._session
    try:
        return _matmul(client, a, b, dtype, (m, n, k), determinism, tuning)
    except ArbiterError as e:
        if e.code != grpc.StatusCode.UNAUTHENTICATED or "no such session" not in e.details:
            raise
    restart_session(client, session)
    return _matmul(client, a, b, dtype, (m, n, k), determinism, tuning)


def restart_session(client, stale):
    """Forgets session `stale` that the daemon no longer knows (unless another thread already did):
    its regions went with it on the daemon's side; here the counters go back."""
    with client._session_lock:
        if client._session is not stale:
            return
        cache, client._regions = client._regions, None
        client._session, client._cuda_target = None, None
        buffers, client._host_buffers = client._host_buffers, []
    if cache is not None:
        cache.abandon()
    for buffer in buffers:  # their regions went with the session: their arrays travel as bytes now
        buffer.abandon()
    client._gone_buffers = buffers
    stale.close()


def _matmul(client, a, b, dtype, mnk, determinism, tuning):
    method = "Matmul"
    m, n, k = mnk
    target_ = target(client, method)
    ops = torch_ops(client)
    check_device(target_, ops.device_uuid(a.device), a.device, method)
    c = ops.empty((m, n), a)
    if c.data_ptr() % ALIGNMENT:
        raise error_for(grpc.StatusCode.INTERNAL, "torch.empty gave C %d bytes past a %d-byte boundary: expected "
                        "the caching allocator's aligned blocks" % (c.data_ptr() % ALIGNMENT, ALIGNMENT), method)
    tensors = (a, b, c)
    storages = [ops.storage(x) for x in tensors]
    cache = cache_of(client)
    placed = cache.place(storages)
    try:
        refs = [pb.OperandRef(region=region, offset=offset + (x.data_ptr() - s.data_ptr()))
                for (region, offset), x, s in zip(placed, tensors, storages)]
        event = ops.ready_event(a.device)
        request = pb.MatmulRequest(
            problem=pb.Problem(dtype=dtypes.PROTO[dtype], m=m, n=n, k=k), a_ref=refs[0], b_ref=refs[1],
            c_ref=refs[2], required_determinism=determinism, tuning=tuning, wait_event=ops.event_handle(event))
        r = client._call(method, client._dispatch.Matmul, request)
        ops.reuse_event(a.device, event)
    finally:
        cache.done()
    if r.c:
        raise error_for(grpc.StatusCode.INTERNAL, "the daemon sent C inline (%d bytes) although the request named "
                        "a region for it" % len(r.c), method)
    return results.MatmulResult(c, r.candidate, r.candidate_version, results.source_name(r.source),
                                r.device_seconds, r.bucket)
