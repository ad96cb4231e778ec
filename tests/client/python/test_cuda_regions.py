"""Zero-copy CUDA tensors, what runs without a GPU: the registration bookkeeping (with a fake torch
and a fake daemon), the operand checks, and the refusals and the session against real CPU daemons.
"""

import gc
import os
import shutil
import tempfile

import grpc
import pytest

import arbiter
from arbiter import _cuda
from arbiter._session import Session, fd_socket_path

SEGMENT = 2 << 20  # the fake allocator's segments: 2 MiB, like torch's small pool
BASE = 0x7F0000000000


class FakeDevice:
    def __init__(self, text="cuda:0"):
        self.type, _, index = text.partition(":")
        self.index = int(index) if index else None

    def __eq__(self, other):
        return str(self) == str(other)

    def __str__(self):
        return self.type if self.index is None else "%s:%d" % (self.type, self.index)


class FakeStorage:
    """What RegionCache reads of a torch UntypedStorage."""

    def __init__(self, ptr, nbytes):
        self.ptr, self.size = ptr, nbytes

    def data_ptr(self):
        return self.ptr

    def nbytes(self):
        return self.size


class FakeTensor:
    """What the operand checks read of a CUDA tensor."""

    def __init__(self, shape, dtype="torch.float32", ptr=BASE, device="cuda:0", contiguous=True, offset=0):
        self.shape, self.dtype, self.ptr, self.device = shape, dtype, ptr, FakeDevice(device)
        self.contiguous, self.offset = contiguous, offset

    def data_ptr(self):
        return self.ptr

    def is_contiguous(self):
        return self.contiguous

    def storage_offset(self):
        return self.offset


class Log(list):
    """Every share, register, unregister and counter release, in order."""


class FakeOps:
    """torch's side: storages in 2 MiB segments, each segment's handle its base address."""

    def __init__(self, log):
        self.log, self.counters = log, 0

    def share(self, storage):
        base = storage.ptr - storage.ptr % SEGMENT
        self.counters += 1
        counter = ("counter", self.counters)
        self.log.append(("share", hex(storage.ptr), counter))
        return base.to_bytes(8, "little") * 8, storage.ptr - base, counter

    def release_counter(self, counter):
        self.log.append(("release", counter))


class FakeRpc:
    """The daemon's side: region ids r1, r2, ...; `fail` makes the next register raise."""

    def __init__(self, log):
        self.log, self.count, self.live, self.fail = log, 0, {}, None
        self.on_register = None

    def register(self, handle, nbytes):
        if self.on_register is not None:
            self.on_register()
        if self.fail is not None:
            error, self.fail = self.fail, None
            raise error
        self.count += 1
        region = "r%d" % self.count
        self.live[region] = nbytes
        self.log.append(("register", region, nbytes))
        return region

    def unregister(self, region):
        del self.live[region]
        self.log.append(("unregister", region))


@pytest.fixture
def fakes():
    log = Log()
    rpc, ops = FakeRpc(log), FakeOps(log)
    return _cuda.RegionCache(rpc, ops), rpc, ops, log


def call(cache, *storages):
    placed = cache.place(list(storages))
    cache.done()
    return placed


def died():
    gc.collect()  # CPython frees at the last reference; this only makes it certain


# The bookkeeping ----------------------------------------------------------------------------------------------


def test_storages_of_one_segment_share_one_registration_sized_to_the_furthest(fakes):
    cache, rpc, _, log = fakes
    a, b, c = FakeStorage(BASE, 4096), FakeStorage(BASE + 8192, 1024), FakeStorage(BASE + 4096, 512)
    placed = call(cache, a, b, c)
    assert placed == [("r1", 0), ("r1", 8192), ("r1", 4096)]
    assert [e for e in log if e[0] == "register"] == [("register", "r1", 8192 + 1024)]
    assert call(cache, c, a) == [("r1", 4096), ("r1", 0)]  # cached: no share, no register
    assert sum(e[0] == "share" for e in log) == 3 and rpc.count == 1


def test_the_same_storage_twice_in_a_call_is_shared_once(fakes):
    cache, _, _, log = fakes
    x = FakeStorage(BASE, 4096)
    assert call(cache, x, x) == [("r1", 0), ("r1", 0)]
    assert sum(e[0] == "share" for e in log) == 1


def test_each_segment_gets_its_own_region(fakes):
    cache, rpc, _, _ = fakes
    a, b = FakeStorage(BASE, 4096), FakeStorage(BASE + SEGMENT, 4096)
    assert call(cache, a, b) == [("r1", 0), ("r2", 0)]
    assert rpc.live == {"r1": 4096, "r2": 4096}


def test_a_storage_past_the_region_re_registers_it_larger_and_the_old_goes_once_no_call_names_it(fakes):
    cache, rpc, _, _ = fakes
    a, b = FakeStorage(BASE, 4096), FakeStorage(BASE + 65536, 4096)
    assert cache.place([a]) == [("r1", 0)]            # a call in flight names r1
    assert call(cache, b) == [("r2", 65536)]           # another grows the segment's region
    assert rpc.live == {"r1": 4096, "r2": 65536 + 4096}  # r1 stays while the first call runs
    cache.done()
    assert rpc.live == {"r2": 65536 + 4096}
    assert call(cache, a) == [("r2", 0)]


def test_a_freed_storage_is_unregistered_before_its_counter_goes_back(fakes):
    cache, rpc, _, log = fakes
    a, b = FakeStorage(BASE, 4096), FakeStorage(BASE + 4096, 4096)
    call(cache, a, b)
    counter_a, counter_b = [e[2] for e in log if e[0] == "share"]
    del b
    died()
    assert rpc.live == {"r1": 8192}             # a still lives in the segment: the region stays
    assert log[-1] == ("release", counter_b)    # b's memory may be reused: the region never names it again
    del a
    died()
    assert rpc.live == {}
    assert log[-2:] == [("unregister", "r1"), ("release", counter_a)]  # unmapped first, then torch may free it
    assert cache.regions() == {}


def test_a_storage_freed_during_a_call_is_released_when_the_call_lets_go(fakes):
    cache, rpc, _, log = fakes
    old = [FakeStorage(BASE + SEGMENT, 4096)]
    call(cache, old[0])

    def drop_old():  # the last reference goes while place() holds the cache's lock
        old.clear()
        died()
        assert "r1" in rpc.live  # only queued: the finalizer never waits for the lock

    rpc.on_register = drop_old
    call(cache, FakeStorage(BASE, 4096))
    assert "r1" not in rpc.live and ("unregister", "r1") in log


def test_a_reallocated_storage_is_shared_afresh(fakes):
    cache, rpc, _, log = fakes
    x = FakeStorage(BASE, 4096)
    call(cache, x)
    first = log[0][2]
    x.ptr, x.size = BASE + SEGMENT, 8192  # resize_: new memory behind the same storage
    assert call(cache, x) == [("r2", 0)]
    assert ("release", first) in log and rpc.live == {"r2": 8192}


def test_a_failed_registration_gives_the_counters_back_and_caches_nothing(fakes):
    cache, rpc, _, log = fakes
    rpc.fail = arbiter.ResourceExhausted(grpc.StatusCode.RESOURCE_EXHAUSTED, "256 regions", "RegisterRegion")
    x = FakeStorage(BASE, 4096)
    with pytest.raises(arbiter.ResourceExhausted):
        cache.place([x])
    assert ("release", log[0][2]) in log and cache.regions() == {}
    assert call(cache, x) == [("r1", 0)]  # nothing stale: the next call shares and registers


def test_a_failed_second_registration_unregisters_the_first_of_the_same_call(fakes):
    cache, rpc, _, _ = fakes
    calls = []

    def fail_second():
        calls.append(1)
        if len(calls) == 2:
            rpc.fail = arbiter.Unavailable(grpc.StatusCode.UNAVAILABLE, "gone", "RegisterRegion")

    rpc.on_register = fail_second
    with pytest.raises(arbiter.Unavailable):
        cache.place([FakeStorage(BASE, 4096), FakeStorage(BASE + SEGMENT, 4096)])
    assert rpc.live == {} and cache.regions() == {}


def test_close_unregisters_everything_and_returns_every_counter_once(fakes):
    cache, rpc, _, log = fakes
    a, b = FakeStorage(BASE, 4096), FakeStorage(BASE + SEGMENT, 4096)
    call(cache, a, b)
    cache.close()
    assert rpc.live == {}
    assert sorted(e[1] for e in log if e[0] == "release") == [("counter", 1), ("counter", 2)]
    before = len(log)
    del a, b
    died()
    assert len(log) == before  # finalizers detached: nothing twice
    with pytest.raises(ValueError, match="closed"):
        cache.place([FakeStorage(BASE, 64)])


# The handle torch gives ------------------------------------------------------------------------------------------


def test_ipc_handles_are_read_bare_or_after_torchs_version_and_type_bytes():
    raw = bytes(range(64))
    assert _cuda.parse_handle(raw) == raw
    assert _cuda.parse_handle(b"\x02c" + raw) == raw


def test_expandable_segments_are_refused_naming_the_allocator_setting():
    with pytest.raises(arbiter.FailedPrecondition, match="expandable_segments"):
        _cuda.parse_handle(b"\x02e" + bytes(40))


def test_an_unknown_handle_form_is_refused_saying_what_was_expected():
    with pytest.raises(arbiter.FailedPrecondition, match="64-byte cudaIpcMemHandle_t"):
        _cuda.parse_handle(bytes(70))


# Operand checks, before anything is sent ---------------------------------------------------------------------


def check(a, b, dtype=None):
    return _cuda.check_operands(a, b, dtype, "Matmul")


def test_aligned_contiguous_operands_pass_with_their_problem():
    assert check(FakeTensor((8, 4), "torch.bfloat16"), FakeTensor((4, 16), "torch.bfloat16")) == ("bf16", 8, 16, 4)


def test_a_misaligned_operand_is_refused_saying_how_far_and_what_to_do():
    a = FakeTensor((8, 4), ptr=BASE + 16, offset=4)
    with pytest.raises(arbiter.InvalidArgument, match=r"A starts 16 bytes past a 256-byte boundary .*clone"):
        check(a, FakeTensor((4, 8)))


def test_a_non_contiguous_operand_is_refused():
    with pytest.raises(arbiter.InvalidArgument, match=r"B is not contiguous.*B.contiguous\(\)"):
        check(FakeTensor((8, 4)), FakeTensor((4, 8), contiguous=False))


def test_operands_on_two_devices_are_refused():
    with pytest.raises(arbiter.InvalidArgument, match="A is on cuda:0 and B on cuda:1"):
        check(FakeTensor((8, 4)), FakeTensor((4, 8), device="cuda:1"))


@pytest.mark.parametrize("a_dtype,b_dtype,message", [
    ("torch.int32", "torch.int32", "expected torch.float32"),
    ("torch.float32", "torch.float16", "one dtype for both"),
])
def test_dtypes_arbiter_does_not_compute_in_are_refused(a_dtype, b_dtype, message):
    with pytest.raises(arbiter.InvalidArgument, match=message):
        check(FakeTensor((8, 4), a_dtype), FakeTensor((4, 8), b_dtype))


def test_a_dtype_argument_other_than_the_tensors_is_refused():
    with pytest.raises(arbiter.InvalidArgument, match="dtype='f64' was asked"):
        check(FakeTensor((8, 4)), FakeTensor((4, 8)), dtype="f64")


def test_mismatched_shapes_are_refused():
    with pytest.raises(arbiter.InvalidArgument, match=r"A's columns \(k=4\) must equal B's rows \(5\)"):
        check(FakeTensor((8, 4)), FakeTensor((5, 8)))


def test_another_gpu_than_the_daemons_is_refused_and_uuid_spellings_agree():
    daemon = _cuda.Target("cuda", "GPU-58b5a3f7-7b1b-4c2d-9e3f-0123456789ab")
    _cuda.check_device(daemon, "58b5a3f7-7b1b-4c2d-9e3f-0123456789ab", "cuda:0", "Matmul")  # same GPU
    _cuda.check_device(_cuda.Target(), "58b5a3f7-7b1b-4c2d-9e3f-0123456789ab", "cuda:0", "Matmul")  # unknown
    with pytest.raises(arbiter.FailedPrecondition, match="the daemon serves GPU GPU-58b5a3f7"):
        _cuda.check_device(daemon, "00000000-7b1b-4c2d-9e3f-0123456789ab", "cuda:1", "Matmul")


# Against real daemons (CPU backend) ------------------------------------------------------------------------


def test_the_fd_socket_is_beside_the_unix_listener():
    assert fd_socket_path("unix:/run/arbiter/arbiter.sock") == "/run/arbiter/arbiter.sock.fd"
    assert fd_socket_path("unix:///run/a.sock") == "/run/a.sock.fd"
    assert fd_socket_path("127.0.0.1:50051") is None


def test_cuda_tensors_to_a_cpu_daemon_are_refused_before_a_session_opens(client):
    with pytest.raises(arbiter.FailedPrecondition, match="runs the cpu backend, which maps host_memfd"):
        _cuda.matmul(client, FakeTensor((8, 4)), FakeTensor((4, 8)), None, 0, 0)
    assert client._session is None and client.regions() == []


def test_cuda_tensors_over_tcp_are_refused_naming_the_unix_socket(guarded_daemon):
    with arbiter.Client(guarded_daemon.address, token_file=guarded_daemon.token_file) as client:
        with pytest.raises(arbiter.FailedPrecondition, match=r"session on the daemon's Unix socket"):
            _cuda.matmul(client, FakeTensor((8, 4)), FakeTensor((4, 8)), None, 0, 0)


def test_a_misaligned_cuda_operand_is_refused_before_connecting():
    nowhere = "unix:" + os.path.join(tempfile.gettempdir(), "arbiter-py-no-such-daemon.sock")
    with arbiter.Client(nowhere) as client:
        with pytest.raises(arbiter.InvalidArgument, match="256-byte boundary"):
            _cuda.matmul(client, FakeTensor((8, 4), ptr=BASE + 128), FakeTensor((4, 8)), None, 0, 0)


def test_a_session_token_goes_on_every_call_once_open(daemon):
    with arbiter.Client(daemon.address) as client:
        client._session = Session(fd_socket_path(daemon.address), "test")
        assert client._session.token and client.regions() == []  # ListRegions needs the session


def test_a_stale_session_token_is_refused_by_the_daemon(daemon):
    with arbiter.Client(daemon.address) as client:
        client._session = Session(fd_socket_path(daemon.address), "test")
        client._session.token = "0" * 32
        with pytest.raises(arbiter.ArbiterError, match="no such session"):
            client.regions()


def test_no_daemon_at_the_fd_socket_is_unavailable_naming_the_path():
    path = os.path.join(tempfile.gettempdir(), "arbiter-py-no-such-daemon.sock.fd")
    with pytest.raises(arbiter.Unavailable, match="cannot open a session at " + path):
        Session(path, "Matmul")


# The whole call against a stand-in CUDA daemon: what the requests carry ------------------------------------


class FakeTorchOps(FakeOps):
    """FakeOps plus what matmul() asks of torch: C from a bump allocator, events as labels."""

    def __init__(self, log):
        super().__init__(log)
        self.next = BASE + 4 * SEGMENT

    def storage(self, tensor):
        return tensor.storage

    def empty(self, shape, like):
        c = tensor(shape, like.dtype, self.next)
        self.next += SEGMENT
        return c

    def device_uuid(self, device):
        return "58b5a3f7-7b1b-4c2d-9e3f-0123456789ab"

    def ready_event(self, device):
        self.log.append(("event", str(device)))
        return "event"

    def event_handle(self, event):
        return event.encode().ljust(64, b"\0")

    def reuse_event(self, device, event):
        pass


def tensor(shape, dtype, ptr, storage_ptr=None, storage_bytes=None):
    """A FakeTensor over its own FakeStorage (which may start before it: a view)."""
    t = FakeTensor(shape, dtype, ptr=ptr)
    itemsize = 8 if "64" in dtype else 4 if "32" in dtype else 2
    t.storage = FakeStorage(ptr if storage_ptr is None else storage_ptr,
                            storage_bytes or shape[0] * shape[1] * itemsize)
    return t


class FakeCudaDaemon:
    """A gRPC server on a Unix socket that answers as a CUDA arbiterd would, plus its fd socket."""

    TOKEN = "session-token-for-tests"  # the first session's; restart() makes the next ones differ

    def __init__(self):
        import socket
        import threading
        from concurrent import futures
        from arbiter.v1 import arbiter_pb2 as pb
        from arbiter.v1 import arbiter_pb2_grpc as pb_grpc

        self.pb = pb
        self.work = tempfile.mkdtemp(prefix="arbiter-py-fake-")
        self.address = "unix:" + os.path.join(self.work, "d.sock")
        self.regions, self.matmuls, self.count = {}, [], 0
        self.token, self.sessions = self.TOKEN, 0
        self.session_ended = threading.Event()
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.listener.bind(os.path.join(self.work, "d.sock.fd"))
        self.listener.listen(4)
        threading.Thread(target=self._sessions, daemon=True).start()
        daemon = self

        class Dispatch(pb_grpc.DispatchServicer):
            def RegisterRegion(self, request, context):
                daemon._session(context)
                assert request.kind == pb.REGION_KIND_CUDA_IPC and len(request.cuda_ipc_handle) == 64
                daemon.count += 1
                region = "r%d" % daemon.count
                daemon.regions[region] = (request.cuda_ipc_handle, request.bytes)
                return pb.RegisterRegionResponse(region=pb.Region(id=region, bytes=request.bytes))

            def UnregisterRegion(self, request, context):
                daemon._session(context)
                del daemon.regions[request.id]
                return pb.UnregisterRegionResponse()

            def ListRegions(self, request, context):
                daemon._session(context)
                return pb.ListRegionsResponse(regions=[pb.Region(id=r, bytes=b) for r, (_, b) in
                                                       daemon.regions.items()])

            def Matmul(self, request, context):
                daemon._session(context)
                for ref in (request.a_ref, request.b_ref, request.c_ref):
                    assert ref.region in daemon.regions, ref
                daemon.matmuls.append(request)
                return pb.MatmulResponse(candidate="fake", candidate_version=3, source=pb.VERDICT_SOURCE_MEASURED,
                                         device_seconds=2e-6, bucket="b")

        class Admin(pb_grpc.AdminServicer):
            def ServerInfo(self, request, context):
                return pb.ServerInfoResponse(backend="cuda", uuid="GPU-58b5a3f7-7b1b-4c2d-9e3f-0123456789ab",
                                             region_kinds=[pb.REGION_KIND_CUDA_VMM_FD, pb.REGION_KIND_CUDA_IPC])

        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        pb_grpc.add_DispatchServicer_to_server(Dispatch(), self.server)
        pb_grpc.add_AdminServicer_to_server(Admin(), self.server)
        self.server.add_insecure_port(self.address)
        self.server.start()

    def _sessions(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.sessions += 1
            conn.send(("SESSION " + self.token).encode())
            conn.recv(16)  # the client sends nothing: this returns when it closes the session
            self.session_ended.set()

    def _session(self, context):
        if dict(context.invocation_metadata()).get("arbiter-session") != self.token:
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "arbiter-session: no such session (it ended, or the "
                          "daemon restarted); connect to the fd socket again for a new one")

    def restart(self):
        """As a restarted daemon: every session and region forgotten."""
        self.regions.clear()
        self.token = "after-restart-%d" % self.sessions

    def stop(self):
        self.server.stop(None)
        self.listener.close()
        shutil.rmtree(self.work, ignore_errors=True)


@pytest.fixture
def cuda_daemon():
    d = FakeCudaDaemon()
    yield d
    d.stop()


def test_a_cuda_matmul_names_a_b_and_c_by_region_and_offset(cuda_daemon):
    log = Log()
    with arbiter.Client(cuda_daemon.address) as client:
        client._cuda_ops = FakeTorchOps(log)
        a = tensor((64, 32), "torch.bfloat16", BASE + 512, storage_ptr=BASE, storage_bytes=8192)  # a view
        b = tensor((32, 16), "torch.bfloat16", BASE + SEGMENT + 1024)
        pb = cuda_daemon.pb  # Client.matmul routes real CUDA tensors here; these stand-ins come directly
        r = _cuda.matmul(client, a, b, None, pb.DETERMINISM_RUN_TO_RUN, pb.TUNING_POLICY_OFF)
        request = cuda_daemon.matmuls[-1]
        assert (request.problem.m, request.problem.n, request.problem.k) == (64, 16, 32)
        assert request.problem.dtype == cuda_daemon.pb.DTYPE_BF16 and not request.a and not request.b
        assert (request.a_ref.offset, request.b_ref.offset, request.c_ref.offset) == (512, 1024, 0)
        assert len({request.a_ref.region, request.b_ref.region, request.c_ref.region}) == 3  # three segments
        assert cuda_daemon.regions[request.a_ref.region] == (BASE.to_bytes(8, "little") * 8, 8192)
        assert request.wait_event.startswith(b"event") and len(request.wait_event) == 64
        assert request.required_determinism == cuda_daemon.pb.DETERMINISM_RUN_TO_RUN
        assert request.tuning == cuda_daemon.pb.TUNING_POLICY_OFF
        assert r.c.ptr == BASE + 4 * SEGMENT and (r.candidate, r.version, r.source) == ("fake", 3, "measured")
        assert sorted(x.id for x in client.regions()) == sorted(cuda_daemon.regions)
        _cuda.matmul(client, a, b, None, 0, 0)
        assert cuda_daemon.count == 4  # A's and B's regions reused; only the second C's segment is new
    assert cuda_daemon.regions == {}  # close() unregistered every region
    assert cuda_daemon.session_ended.wait(10), "close() left the session open"
    assert sorted(e[1] for e in log if e[0] == "release") == [("counter", i) for i in range(1, 5)]


def test_cuda_tensors_on_another_gpu_than_the_daemons_are_refused(cuda_daemon):
    with arbiter.Client(cuda_daemon.address) as client:
        ops = client._cuda_ops = FakeTorchOps(Log())
        ops.device_uuid = lambda device: "GPU-00000000-7b1b-4c2d-9e3f-0123456789ab"
        with pytest.raises(arbiter.FailedPrecondition, match="the daemon serves GPU GPU-58b5a3f7"):
            _cuda.matmul(client, tensor((8, 4), "torch.float32", BASE), tensor((4, 8), "torch.float32", BASE + SEGMENT),
                         None, 0, 0)
    assert cuda_daemon.count == 0


def test_after_the_daemon_forgot_the_session_a_call_opens_a_new_one(cuda_daemon):
    log = Log()
    with arbiter.Client(cuda_daemon.address) as client:
        client._cuda_ops = FakeTorchOps(log)
        a, b = tensor((8, 4), "torch.float32", BASE), tensor((4, 8), "torch.float32", BASE + SEGMENT)
        _cuda.matmul(client, a, b, None, 0, 0)
        cuda_daemon.restart()
        r = _cuda.matmul(client, a, b, None, 0, 0)  # refused once (no such session), then served anew
        assert r.candidate == "fake" and cuda_daemon.sessions == 2
        request = cuda_daemon.matmuls[-1]
        assert request.a_ref.region in cuda_daemon.regions  # registered again in the new session
        first = [e[2] for e in log if e[0] == "share"][:3]
        assert all(("release", c) in log for c in first)  # the old session's counters went back
