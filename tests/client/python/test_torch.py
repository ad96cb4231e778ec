"""PyTorch CPU tensors through Client.matmul and arbiter.torch.mm, and mm's documented fallbacks.

CUDA tensors: test_cuda_regions.py (the bookkeeping and the refusals, without a GPU)."""

import math
import os
import tempfile
import warnings

import pytest

torch = pytest.importorskip("torch", reason="torch is not importable (Debian's python3-torch): PyTorch tests skipped")

import arbiter  # noqa: E402
import arbiter.torch as arbiter_torch  # noqa: E402

M, N, K = 21, 45, 19
ROUNDOFF = {torch.float32: 2.0**-24, torch.float64: 2.0**-53, torch.float16: 2.0**-11, torch.bfloat16: 2.0**-8}


def operands(dtype, m=M, n=N, k=K):
    g = torch.Generator().manual_seed(7)
    return torch.randn(m, k, generator=g).to(dtype), torch.randn(k, n, generator=g).to(dtype)


def assert_close(c, a, b):
    ref = a.double() @ b.double()
    worst = ((c.double() - ref).abs().max() / ref.abs().max()).item()
    assert math.isfinite(worst) and worst <= 4 * ROUNDOFF[a.dtype] * math.sqrt(a.shape[1]), worst


def nowhere():
    return arbiter.Client("unix:" + os.path.join(tempfile.gettempdir(), "arbiter-py-no-such-daemon.sock"))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16], ids=str)
def test_cpu_tensors_of_every_dtype_go_by_bytes(client, dtype):
    a, b = operands(dtype)
    r = client.matmul(a, b, tuning="off")
    assert isinstance(r.c, torch.Tensor) and r.c.dtype == dtype and r.c.shape == (M, N) and r.c.device.type == "cpu"
    assert_close(r.c, a, b)


def test_mm_is_torch_mm_computed_by_the_daemon(client):
    a, b = operands(torch.float32)
    bt = b.t().contiguous().t()  # column-major B, as torch.mm accepts it
    assert not bt.is_contiguous()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback
        c = arbiter_torch.mm(a, bt, client=client, tuning="off")
    assert c.shape == torch.mm(a, b).shape and c.dtype == torch.float32
    assert_close(c, a, b)


def test_mm_uses_the_default_client_at_arbiter_address(daemon, monkeypatch):
    monkeypatch.setenv("ARBITER_ADDRESS", daemon.address)
    arbiter_torch.set_default_client(None)
    try:
        a, b = operands(torch.bfloat16)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            c = arbiter_torch.mm(a, b, tuning="off")
        assert arbiter_torch.default_client().address == daemon.address
        assert c.dtype == torch.bfloat16
        assert_close(c, a, b)
    finally:
        arbiter_torch.default_client().close()
        arbiter_torch.set_default_client(None)


def test_mm_refuses_mismatched_shapes_saying_what_was_expected(client):
    with pytest.raises(arbiter.InvalidArgument, match=r"A's columns \(k=3\) must equal B's rows \(4\)"):
        arbiter_torch.mm(torch.zeros(2, 3), torch.zeros(4, 5), client=client)


def test_mm_falls_back_to_torch_when_the_daemon_is_unreachable():
    a, b = operands(torch.float32)
    with nowhere() as client, pytest.warns(arbiter_torch.ArbiterFallbackWarning, match="unavailable"):
        c = arbiter_torch.mm(a, b, client=client)
    assert torch.equal(c, torch.mm(a, b))


def test_mm_leaves_autograd_products_to_torch():
    a, b = operands(torch.float32)
    a.requires_grad_(True)
    with nowhere() as client, warnings.catch_warnings():
        warnings.simplefilter("error")  # not sent, so no unreachable-daemon fallback either
        c = arbiter_torch.mm(a, b, client=client)
    assert c.grad_fn is not None


def test_mm_on_a_device_arbiter_does_not_serve_falls_back_to_torch(client):
    # The meta device: neither the CPU (bytes) nor a CUDA GPU (zero-copy).
    a, b = torch.empty(4, 3, device="meta"), torch.empty(3, 5, device="meta")
    with pytest.warns(arbiter_torch.ArbiterFallbackWarning, match="serves CPU and CUDA tensors, not meta"):
        c = arbiter_torch.mm(a, b, client=client)
    assert c.device.type == "meta" and c.shape == (4, 5)


def test_client_matmul_refuses_tensors_off_the_cpu_and_gpu(client):
    with pytest.raises(arbiter.InvalidArgument, match="expected CPU tensors .* or CUDA tensors"):
        client.matmul(torch.empty(4, 3, device="meta"), torch.empty(3, 5, device="meta"))


def test_client_matmul_refuses_mixed_tensor_dtypes(client):
    with pytest.raises(arbiter.InvalidArgument, match="one dtype for both"):
        client.matmul(torch.zeros(2, 3), torch.zeros(3, 2, dtype=torch.float64))


def test_client_matmul_refuses_integer_tensors(client):
    with pytest.raises(arbiter.InvalidArgument, match="expected torch.float32"):
        client.matmul(torch.zeros(2, 3, dtype=torch.int32), torch.zeros(3, 2, dtype=torch.int32))
