"""Client.host_buffer: numpy operands in host shared memory, sent by reference, against a CPU arbiterd.

The CPU daemon reads and writes the buffer in place; a CUDA daemon copies it over the bus
(tests/backends/cuda/cuda_regions_test.cc covers that side). What a user relies on: C is
right, nothing crosses the socket that need not, the region is the client's and goes
with it, and misuse is refused saying what was expected.
"""

import numpy as np
import pytest

import arbiter
from arbiter.v1 import arbiter_pb2 as pb
from conftest import Daemon
import grpc
from test_matmul import assert_close, operands

M, N, K = 37, 91, 53  # ragged, non-square


def test_operands_in_a_host_buffer_give_c_in_place(client):
    a0, b0 = operands(np.float32)
    with client.host_buffer(1 << 20) as buffer:
        a, b, c = buffer.array((M, K), "f32"), buffer.array((K, N), "f32"), buffer.array((M, N), "f32")
        a[:], b[:], c[:] = a0, b0, np.nan
        r = client.matmul(a, b, out=c, tuning="off")
        assert r.c is c, "C is the caller's array, written in place"
        assert_close(c, a0, b0, 2.0**-24)
        regions = client.regions()
        assert [x.id for x in regions] == [buffer.region]
        assert regions[0].kind == "host_memfd" and regions[0].bytes == 1 << 20
        # The daemon reads the buffer at call time: new contents, new C.
        a[:] = 2 * a0
        client.matmul(a, b, out=c, tuning="off")
        assert_close(c, 2 * a0, b0, 2.0**-24)
    assert client.regions() == [], "closing the buffer unregisters its region"


def test_a_and_b_in_a_host_buffer_without_out_get_c_in_the_reply(client):
    a0, b0 = operands(np.float64)
    buffer = client.host_buffer(1 << 20)
    a, b = buffer.array((M, K), "f64"), buffer.array((K, N), "f64")
    a[:], b[:] = a0, b0
    r = client.matmul(a, b, tuning="off")
    assert r.c.shape == (M, N) and r.c.dtype == np.float64
    assert not np.shares_memory(r.c, a) and not np.shares_memory(r.c, b)
    assert_close(r.c, a0, b0, 2.0**-53)


def test_arrays_outside_a_buffer_still_travel_as_bytes(client):
    a0, b0 = operands(np.float32)
    buffer = client.host_buffer(1 << 20)
    a = buffer.array((M, K), "f32")
    a[:] = a0
    r = client.matmul(a, b0.copy(), tuning="off")  # B is ordinary memory
    assert_close(r.c, a0, b0, 2.0**-24)


def test_bf16_bits_in_a_host_buffer(client):
    a32, b32 = operands(np.float32)
    buffer = client.host_buffer(1 << 20)
    a, b, c = buffer.array((M, K), "bf16"), buffer.array((K, N), "bf16"), buffer.array((M, N), "bf16")
    bits = a.dtype == np.uint16  # without ml_dtypes, bf16 arrays are its bits
    a[:] = arbiter.to_bf16(a32) if bits else a32
    b[:] = arbiter.to_bf16(b32) if bits else b32
    client.matmul(a, b, out=c, dtype="bf16" if bits else None, tuning="off")
    as_f32 = arbiter.from_bf16 if bits else (lambda x: np.asarray(x, np.float32))
    assert_close(as_f32(c), as_f32(a), as_f32(b), 2.0**-8)


def test_arrays_are_aligned_and_a_full_buffer_refuses_more(client):
    buffer = client.host_buffer(4096)
    x, y = buffer.array((3,), "f32"), buffer.array((5,), "f16")
    assert (y.__array_interface__["data"][0] - x.__array_interface__["data"][0]) % 256 == 0
    with pytest.raises(arbiter.ResourceExhausted, match="do not fit the buffer's 4096 bytes"):
        buffer.array((1024,), "f32")
    buffer.reset()
    assert buffer.array((1024,), "f32").shape == (1024,), "reset gives the whole buffer back"


def test_out_must_be_an_m_by_n_array_in_a_host_buffer_with_a_and_b(client):
    a0, b0 = operands(np.float32)
    buffer = client.host_buffer(1 << 20)
    a, b = buffer.array((M, K), "f32"), buffer.array((K, N), "f32")
    a[:], b[:] = a0, b0
    with pytest.raises(arbiter.InvalidArgument, match="out: expected a C-contiguous 37x91 array of float32 in a host"):
        client.matmul(a, b, out=np.empty((M, N), np.float32))  # ordinary memory
    with pytest.raises(arbiter.InvalidArgument, match="out: expected a C-contiguous 37x91"):
        client.matmul(a, b, out=buffer.array((N, M), "f32"))  # transposed shape
    with pytest.raises(arbiter.InvalidArgument, match="A and B must be arrays of host buffers"):
        client.matmul(a0, b, out=buffer.array((M, N), "f32"))


def test_another_client_cannot_name_this_clients_buffer(daemon, client):
    buffer = client.host_buffer(1 << 20)
    with arbiter.Client(daemon.address) as other:
        other.host_buffer(4096)  # a session of its own
        stolen = pb.MatmulRequest(problem=pb.Problem(dtype=pb.DTYPE_F32, m=4, n=4, k=4),
                                  a_ref=pb.OperandRef(region=buffer.region, offset=0),
                                  b_ref=pb.OperandRef(region=buffer.region, offset=256))
        with pytest.raises(arbiter.NotFound, match=buffer.region):
            other._call("Matmul", other._dispatch.Matmul, stolen)


def all_regions(client):
    """Every session's region ids (the admin listing; the test daemon's local listener allows it)."""
    return {r.id for r in client._call("ListAllRegions", client._admin.ListAllRegions, pb.ListRegionsRequest(),
                                       admin=True).regions}


def test_a_closed_clients_buffers_are_released(daemon, client):
    other = arbiter.Client(daemon.address)
    buffer = other.host_buffer(1 << 20)
    inside = buffer.array((4,), "f32")
    assert buffer.region in all_regions(client)
    other.close()
    assert buffer.region not in all_regions(client), "the daemon released the closed client's region"
    assert buffer.offset_of(inside) is None, "a closed buffer's arrays are no longer sent by reference"
    with pytest.raises(ValueError, match="closed"):
        buffer.array((1,), "f32")


def test_host_buffers_need_the_unix_socket(guarded_daemon):
    with arbiter.Client(guarded_daemon.address, token_file=guarded_daemon.token_file) as client:
        with pytest.raises(arbiter.FailedPrecondition, match=r"session on the daemon's Unix socket"):
            client.host_buffer(4096)


# Staging (Client(host_staging=True), the default): ordinary arrays of a megabyte or more, on the
# unix socket, go through a host buffer the client keeps instead of through the socket.

BIG = (256, 300, 520)  # A, B and C together past Client.STAGING_MIN_BYTES in f32


def staging_regions(client):
    return [r for r in client.regions() if r.label == "arbiter client staging"]


def test_large_arrays_are_staged_through_one_reused_host_buffer(client):
    m, n, k = BIG
    a, b = operands(np.float32, m, n, k, seed=5)
    assert (a.nbytes + b.nbytes + m * n * 4) >= client.STAGING_MIN_BYTES
    r = client.matmul(a, b, tuning="off")
    assert_close(r.c, a, b, 2.0**-24)
    staged = staging_regions(client)
    assert len(staged) == 1 and staged[0].kind == "host_memfd"
    a2, b2 = operands(np.float32, m, n, k, seed=6)
    r2 = client.matmul(a2, b2, tuning="off")
    assert_close(r2.c, a2, b2, 2.0**-24)
    assert not np.shares_memory(r.c, r2.c), "each C is the caller's own array"
    assert_close(r.c, a, b, 2.0**-24)  # the first C is not overwritten by the second call
    assert [x.id for x in staging_regions(client)] == [staged[0].id], "the same buffer, reused"
    # A larger call grows it: a new region, the old one released.
    a3, b3 = operands(np.float32, 2 * m, n, k, seed=7)
    assert_close(client.matmul(a3, b3, tuning="off").c, a3, b3, 2.0**-24)
    grown = staging_regions(client)
    assert len(grown) == 1 and grown[0].id != staged[0].id and grown[0].bytes > staged[0].bytes


def test_small_arrays_and_host_staging_off_travel_as_bytes(daemon, client):
    a, b = operands(np.float32)  # well under a megabyte
    assert_close(client.matmul(a, b, tuning="off").c, a, b, 2.0**-24)
    assert client.regions() == []
    with arbiter.Client(daemon.address, host_staging=False) as plain:
        m, n, k = BIG
        a, b = operands(np.float32, m, n, k, seed=8)
        assert_close(plain.matmul(a, b, tuning="off").c, a, b, 2.0**-24)
        assert plain.regions() == []


def test_concurrent_large_calls_are_all_right(client):
    import threading
    m, n, k = BIG
    results, errors = {}, []

    def call(seed):
        try:
            a, b = operands(np.float32, m, n, k, seed=seed)
            for _ in range(3):
                c = client.matmul(a, b, tuning="off").c
                assert_close(c, a, b, 2.0**-24)
            results[seed] = True
        except Exception as e:  # reported below, with the thread's seed
            errors.append((seed, e))

    threads = [threading.Thread(target=call, args=(s,)) for s in range(20, 24)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(results) == 4


def test_bf16_bits_are_staged_right(client):
    m, n, k = 2 * BIG[0], BIG[1], BIG[2]  # half the bytes of f32: twice the rows
    a32, b32 = operands(np.float32, m, n, k, seed=9)
    a, b = arbiter.to_bf16(a32), arbiter.to_bf16(b32)
    r = client.matmul(a, b, dtype="bf16", tuning="off")
    assert r.c.dtype == np.uint16 and r.c.shape == (m, n)
    assert staging_regions(client), "a megabyte of bf16 bits went through the staging buffer"
    assert_close(arbiter.from_bf16(r.c), arbiter.from_bf16(a), arbiter.from_bf16(b), 2.0**-8)


def reconnect(client):
    """After a restart the channel's first call would fail on the dead connection (UNAVAILABLE, as any gRPC
    client sees); these tests are about sessions, so they wait for the channel to connect again."""
    try:
        client.health()
    except arbiter.Unavailable:
        pass
    grpc.channel_ready_future(client._channel).result(timeout=30)


def test_after_a_daemon_restart_staging_recovers_and_a_lost_buffer_is_named():
    daemon = Daemon("unix")
    try:
        with arbiter.Client(daemon.address) as client:
            m, n, k = BIG
            a0, b0 = operands(np.float32, m, n, k, seed=11)
            assert_close(client.matmul(a0, b0, tuning="off").c, a0, b0, 2.0**-24)
            buffer = client.host_buffer(1 << 20)
            a, b, c = buffer.array((M, K), "f32"), buffer.array((K, N), "f32"), buffer.array((M, N), "f32")
            small_a, small_b = operands(np.float32)
            a[:], b[:] = small_a, small_b
            daemon.restart()  # every session and region forgotten
            reconnect(client)
            # Staged: the client opens a new session and a new staging buffer, and answers right.
            assert_close(client.matmul(a0, b0, tuning="off").c, a0, b0, 2.0**-24)
            assert len(staging_regions(client)) == 1
            # The host buffer went with the old session: naming it is refused, saying so.
            with pytest.raises(arbiter.FailedPrecondition, match="host buffer %s, which the daemon no longer has"
                               % buffer.region):
                client.matmul(a, b, out=c)
            with pytest.raises(arbiter.FailedPrecondition, match="no longer has"):
                client.matmul(a, b)
            fresh = client.host_buffer(1 << 20)  # a new one works
            fa, fb, fc = fresh.array((M, K), "f32"), fresh.array((K, N), "f32"), fresh.array((M, N), "f32")
            fa[:], fb[:] = small_a, small_b
            client.matmul(fa, fb, out=fc, tuning="off")
            assert_close(fc, small_a, small_b, 2.0**-24)
    finally:
        daemon.stop()


def test_a_host_buffer_named_first_after_a_restart_is_refused_naming_it():
    daemon = Daemon("unix")
    try:
        with arbiter.Client(daemon.address) as client:
            buffer = client.host_buffer(1 << 20)
            a, b, c = buffer.array((M, K), "f32"), buffer.array((K, N), "f32"), buffer.array((M, N), "f32")
            a[:], b[:] = operands(np.float32)
            daemon.restart()
            reconnect(client)
            with pytest.raises(arbiter.FailedPrecondition, match=buffer.region):
                client.matmul(a, b, out=c)  # the daemon says "no such session"; the client names the buffer
    finally:
        daemon.stop()
