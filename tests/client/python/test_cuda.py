"""CUDA tensors, zero-copy, against a CUDA arbiterd on the same GPU (the GPU machine).

Needs torch with a GPU and ARBITER_CUDA_ADDRESS, the unix: address of an `arbiterd --backend
cuda` on that GPU; tests/device/python_cuda.sh starts one and runs this file. Skipped elsewhere.
ARBITER_RESULTS, when set, names a file each case appends a tab-separated row to: the script
prints them as its table. Timings are reported, never asserted.
"""

import gc
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

import pytest

torch = pytest.importorskip("torch", reason="torch is not importable: CUDA tensor tests skipped")

ADDRESS = os.environ.get("ARBITER_CUDA_ADDRESS")
pytestmark = pytest.mark.skipif(
    not (ADDRESS and torch.cuda.is_available()),
    reason="needs a GPU and ARBITER_CUDA_ADDRESS (a CUDA arbiterd's unix: address); tests/device/python_cuda.sh")

import arbiter  # noqa: E402
import arbiter.torch as arbiter_torch  # noqa: E402
from arbiter.v1 import arbiter_pb2 as pb  # noqa: E402

if torch.cuda.is_available():
    # torch.matmul as the comparison: f32 accumulation throughout, no TF32 (its defaults may reduce
    # half-precision split-K partial sums in half precision, which no candidate's budget allows for).
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False

HERE = os.path.dirname(os.path.abspath(__file__))
NAME = {torch.float32: "f32", torch.float64: "f64", torch.float16: "f16", torch.bfloat16: "bf16"}
ROUNDOFF = {torch.float32: 2.0**-24, torch.float64: 2.0**-53, torch.float16: 2.0**-11, torch.bfloat16: 2.0**-8}
TIMED_CALLS = 20


def row(*fields):
    path = os.environ.get("ARBITER_RESULTS")
    if path:
        with open(path, "a") as f:
            f.write("\t".join(str(x) for x in fields) + "\n")


@pytest.fixture(scope="module")
def client():
    with arbiter.Client(ADDRESS) as c:
        yield c


@pytest.fixture(scope="module")
def plain():
    """A client that sends CPU operands as bytes, never through its staging buffer."""
    with arbiter.Client(ADDRESS, host_staging=False) as c:
        yield c


def operands(m, n, k, dtype, seed=1):
    g = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(m, k, device="cuda", generator=g).to(dtype)
    b = torch.randn(k, n, device="cuda", generator=g).to(dtype)
    return a, b


def contract(client, candidate, dtype):
    for c in client.candidates():
        if c.name == candidate:
            for member in c.contracts:
                if member.dtype == NAME[dtype]:
                    return member
    pytest.fail("the daemon lists no %s member of candidate %s" % (NAME[dtype], candidate))


def check(client, r, a, b):
    """r.c against the float64 product within its candidate's budget (the daemon's oracle's rule), and
    against torch.matmul: both within budget of the exact product, so within twice it of each other.
    Returns (worst error / tolerance, torch.matmul's worst error / tolerance)."""
    return check_c(client, r.c, r.candidate, a, b)


def check_c(client, c, candidate, a, b):
    assert c.device == a.device and c.dtype == a.dtype and c.shape == (a.shape[0], b.shape[1])
    ref = a.double() @ b.double()
    budget = contract(client, candidate, a.dtype)
    tolerance = (budget.accuracy_abs + budget.accuracy_rel_per_sqrt_k * math.sqrt(a.shape[1]) * ref.abs().max()
                 + ROUNDOFF[a.dtype] * ref.abs())
    c = c.double()
    assert torch.isfinite(c).all(), "C has NaN or Inf"
    ours = ((c - ref).abs() / tolerance).max().item()
    assert ours <= 1, "C is %.3g tolerances off the float64 product (%s)" % (ours, candidate)
    theirs = torch.matmul(a, b).double()
    assert ((c - theirs).abs() <= 2 * tolerance).all(), "C and torch.matmul differ by more than twice the budget"
    return ours, ((theirs - ref).abs() / tolerance).max().item()


def wall(fn):
    torch.cuda.synchronize()
    start = time.perf_counter()
    out = fn()
    torch.cuda.synchronize()
    return out, time.perf_counter() - start


def torch_seconds(a, b, calls=TIMED_CALLS):
    """torch.matmul's median device time, by CUDA events, for comparison."""
    times = []
    for _ in range(calls):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.matmul(a, b)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times)


def allocations():
    return torch.cuda.memory_stats().get("allocation.all.allocated", 0)


CASES = [
    (torch.bfloat16, 4096, 4096, 4096),
    (torch.bfloat16, 777, 333, 2049),   # ragged
    (torch.float16, 1, 4096, 4096),     # one row
    (torch.float32, 1000, 1000, 1000),
    (torch.float32, 64, 128, 256),
    (torch.float64, 256, 512, 384),
]


@pytest.mark.parametrize("dtype,m,n,k", CASES, ids=["%s-%dx%dx%d" % (NAME[c[0]], *c[1:]) for c in CASES])
def test_cuda_tensors_match_torch_within_budget_with_no_copies(client, plain, dtype, m, n, k):
    a, b = operands(m, n, k, dtype)
    r = client.matmul(a, b)  # the first of the shape may measure every candidate (the daemon's --tuning)
    ours, theirs = check(client, r, a, b)
    before = allocations()
    r = client.matmul(a, b)
    # No copies: the only device allocation of a call is C itself; and the reply carried no bytes
    # (the client refuses an inline C when it named a region).
    assert allocations() - before == 1
    device, zero_copy = [], []
    for _ in range(TIMED_CALLS):
        r, seconds = wall(lambda: client.matmul(a, b))
        device.append(r.device_seconds)
        zero_copy.append(seconds)
    a_cpu, b_cpu = a.cpu(), b.cpu()
    staged = []
    for _ in range(3):  # CPU tensors: through the client's staging buffer where they are large
        r_cpu, seconds = wall(lambda: client.matmul(a_cpu, b_cpu))
        staged.append(seconds)
    check_c(client, r_cpu.c.cuda(), r_cpu.candidate, a, b)
    by_bytes = [wall(lambda: plain.matmul(a_cpu, b_cpu))[1] for _ in range(3)]
    us = lambda xs: "%.1f" % (statistics.median(xs) * 1e6)  # noqa: E731
    row("matmul", NAME[dtype], "%dx%dx%d" % (m, n, k), "%s@v%d" % (r.candidate, r.version), r.source,
        "err/tol %.2f (torch %.2f)" % (ours, theirs), "device %s us" % us(device),
        "torch %s us" % us([torch_seconds(a, b)]), "zero-copy e2e %s us" % us(zero_copy),
        "CPU tensors staged e2e %s us" % us(staged), "as bytes e2e %s us" % us(by_bytes))


HOST_SIZES = [1024, 2048, 4096]


@pytest.mark.parametrize("n", HOST_SIZES, ids=["bf16-%d^3" % n for n in HOST_SIZES])
def test_numpy_operands_in_a_host_buffer_cross_no_socket(client, plain, n):
    """numpy bf16 bits in a host buffer, copied by the CUDA daemon by DMA: C right on poisoned output;
    end to end against the bytes path and against torch in-process with pageable host tensors (the
    issue's comparison), reported."""
    import numpy as np
    a, b = operands(n, n, n, torch.bfloat16, seed=n)
    with client.host_buffer(3 * n * n * 2 + 1024, label="test_cuda host buffer") as buffer:
        ha, hb, hc = (buffer.array((n, n), "bf16") for _ in range(3))
        # bf16 arrays: ml_dtypes' bfloat16 where it is installed, else uint16 bits (dtype="bf16").
        kind = ha.dtype
        as_numpy = lambda t: t.cpu().view(torch.int16).numpy().view(kind)  # noqa: E731
        ha[:], hb[:] = as_numpy(a), as_numpy(b)
        hc.view(np.uint16)[:] = 0xFFFF  # C poisoned: NaN in bf16
        r = client.matmul(ha, hb, out=hc, dtype="bf16")
        assert r.c is hc
        c = torch.from_numpy(hc.view(np.int16).copy()).view(torch.bfloat16).cuda()
        ours, theirs = check_c(client, c, r.candidate, a, b)
        host = [wall(lambda: client.matmul(ha, hb, out=hc, dtype="bf16"))[1] for _ in range(TIMED_CALLS)]
    a_np, b_np = as_numpy(a), as_numpy(b)
    staged = [wall(lambda: client.matmul(a_np, b_np, dtype="bf16"))[1] for _ in range(TIMED_CALLS)]
    by_bytes = [wall(lambda: plain.matmul(a_np, b_np, dtype="bf16"))[1] for _ in range(3)]
    a_cpu, b_cpu = a.cpu(), b.cpu()  # pageable, as a process holding host tensors has them
    in_process = [wall(lambda: (a_cpu.cuda() @ b_cpu.cuda()).cpu())[1] for _ in range(TIMED_CALLS)]
    ms = lambda xs: statistics.median(xs) * 1e3  # noqa: E731
    row("host-buffer", "bf16", "%d^3" % n, "%s@v%d" % (r.candidate, r.version),
        "err/tol %.2f (torch %.2f)" % (ours, theirs), "host-buffer e2e %.3f ms" % ms(host),
        "staged e2e %.3f ms" % ms(staged), "as bytes e2e %.3f ms" % ms(by_bytes),
        "torch in-process %.3f ms" % ms(in_process),
        "host-buffer / in-process %.2f, staged %.2f" % (ms(host) / ms(in_process), ms(staged) / ms(in_process)))


def test_a_segment_is_registered_once_and_reused(client):
    a, b = operands(256, 256, 256, torch.float32, seed=2)
    client.matmul(a, b)
    cache = client._regions
    entries = [cache._storages[id(x.untyped_storage())] for x in (a, b)]
    registrations = cache.registrations
    for _ in range(5):
        client.matmul(a, b)
    # A and B are not shared again: the same entries, in the same segments' regions. A new C each
    # call lands in segments already registered (a region grows at most when C sits further in).
    assert a.untyped_storage() is a.untyped_storage()  # what the per-storage cache relies on
    assert [cache._storages[id(x.untyped_storage())] for x in (a, b)] == entries
    assert {x.id for x in client.regions()} >= {cache._segments[e.handle].region for e in entries}
    row("reuse", "f32", "256x256x256", "A, B shared once over 6 calls",
        "%d registrations in the last 5" % (cache.registrations - registrations), "", "", "", "", "")


def test_a_tensor_freed_while_registered_releases_its_region_and_its_memory(client):
    torch.cuda.empty_cache()  # free cached segments, so that the big tensor gets one of its own
    small = torch.randn(4096, 64, device="cuda")
    big = torch.randn(4096, 4096, device="cuda")  # 64 MiB: past 10 MiB, a caching-allocator segment of its own
    r = client.matmul(big, small)
    check(client, r, big, small)
    cache = client._regions
    region = cache._segments[cache._storages[id(big.untyped_storage())].handle].region
    assert region in {x.id for x in client.regions()}
    allocated = torch.cuda.memory_allocated()
    del big, r
    gc.collect()
    assert region not in {x.id for x in client.regions()}  # unregistered when the tensor went
    torch.cuda.ipc_collect()  # what torch held back for the daemon is freed once its counter is back
    freed = allocated - torch.cuda.memory_allocated()
    assert freed >= 64 << 20, "only %d bytes came back to the allocator" % freed
    again = torch.randn(4096, 4096, device="cuda")  # most likely the same memory: registered afresh
    check(client, client.matmul(again, small), again, small)
    row("freed", "f32", "4096x64x4096", "region %s gone" % region, "%d MiB back" % (freed >> 20),
        "reused and right", "", "", "", "")


def test_work_queued_on_a_side_stream_is_waited_for(client):
    # A is written on a side stream just before the call; the daemon's stream waits on the event the
    # client records there, so it reads the finished A, never the NaN that came first.
    x, y = operands(2048, 2048, 2048, torch.float32, seed=3)
    a = torch.empty(2048, 2048, device="cuda")
    b = torch.randn(2048, 512, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        a.fill_(float("nan"))
        for _ in range(4):
            torch.matmul(x, y, out=a)
        r = client.matmul(a, b)
    side.synchronize()
    check(client, r, a, b)
    row("ordering", "f32", "2048x512x2048", "A written on a side stream", "waited for", "", "", "", "", "")


def test_misaligned_operands_are_refused_by_the_client_and_copied_by_mm(client):
    base = torch.randn(65, 64, device="cuda")
    a = base[1:]  # 256 bytes in: aligned
    odd = torch.randn(64 * 64 + 1, device="cuda")[1:].view(64, 64)  # 4 bytes in
    b = torch.randn(64, 32, device="cuda")
    check(client, client.matmul(a, b), a, b)
    with pytest.raises(arbiter.InvalidArgument, match="4 bytes past a 256-byte boundary"):
        client.matmul(odd, b)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback: computed by the daemon
        c = arbiter_torch.mm(odd, b.t().contiguous().t(), client=client)  # misaligned A, column-major B
    check_c(client, c, client.select(64, 32, 64, "f32").candidate, odd, b)
    row("refusals", "f32", "64x32x64", "misaligned refused by matmul", "copied by mm", "", "", "", "", "")


def test_mm_falls_back_to_torch_when_the_daemon_is_unreachable():
    a, b = operands(64, 64, 64, torch.float32, seed=4)
    nowhere = "unix:" + os.path.join(tempfile.gettempdir(), "arbiter-py-no-such-daemon.sock")
    with arbiter.Client(nowhere) as c, pytest.warns(arbiter_torch.ArbiterFallbackWarning, match="unavailable"):
        out = arbiter_torch.mm(a, b, client=c)
    assert torch.equal(out, torch.mm(a, b))


def all_regions(client):
    r = client._call("ListAllRegions", client._admin.ListAllRegions, pb.ListRegionsRequest(), admin=True)
    return [x.owner.pid for x in r.regions]


def start_worker(seed, calls):
    return subprocess.Popen([sys.executable, os.path.join(HERE, "cuda_worker.py"), ADDRESS, str(seed), str(calls)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def test_two_client_processes_at_once(client):
    workers = [start_worker(seed, 50) for seed in (11, 12)]
    try:
        pids = []
        for w in workers:  # both have registered their segments: each its own session
            line = w.stdout.readline().split()
            assert line[:1] == ["READY"], line
            pids.append(int(line[1]))
        owners = all_regions(client)
        assert all(pid in owners for pid in pids)
        for w in workers:  # then both call at once
            w.stdin.write("go\n")
            w.stdin.flush()
        done = [w.stdout.readline().split() for w in workers]
        codes = [w.wait(timeout=300) for w in workers]
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()
    assert codes == [0, 0] and all(d[:2] == ["DONE", "50"] for d in done), (codes, done)
    left = [pid for pid in all_regions(client) if pid in pids]
    assert not left, "regions of closed clients remain: %s" % left
    row("two processes", "f32", "512x640x384", "2 x 50 calls at once", "worst err/tol %s, %s"
        % (done[0][2], done[1][2]), "no regions left", "", "", "", "")


def test_a_killed_client_process_leaves_no_regions(client):
    worker = start_worker(13, 1)
    line = worker.stdout.readline().split()
    assert line[:1] == ["READY"], line
    pid = int(line[1])
    assert pid in all_regions(client)
    worker.kill()  # SIGKILL: no close(); the session's socket closes with the process
    worker.wait()
    deadline = time.monotonic() + 30  # the daemon ends the session when it sees the socket close
    while pid in all_regions(client):
        assert time.monotonic() < deadline, "the daemon kept a killed client's regions for 30 s"
        time.sleep(0.05)
    row("killed process", "f32", "512x640x384", "SIGKILL after registering", "regions released", "", "", "",
        "", "")
