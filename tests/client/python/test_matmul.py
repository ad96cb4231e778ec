"""Client.matmul and Client.select on numpy arrays, every dtype, against a CPU arbiterd."""

import math

import numpy as np
import pytest

import arbiter

# Ragged, non-square: no dimension a power of two, m != n != k.
M, N, K = 37, 91, 53
SOURCES = {"measured", "forced", "tier_default", "provisional"}


def operands(dtype, m=M, n=N, k=K, seed=1):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((m, k)).astype(dtype), rng.standard_normal((k, n)).astype(dtype))


def assert_close(c, a, b, storage_roundoff):
    """C within a few storage roundoffs (sqrt(k)-scaled) of the f64 product of the operands as stored."""
    ref = np.asarray(a, np.float64) @ np.asarray(b, np.float64)
    c = np.asarray(c, np.float64)
    assert np.isfinite(c).all(), "C has NaN or Inf"
    scale = np.abs(ref).max()
    worst = np.abs(c - ref).max() / scale
    assert worst <= 4 * storage_roundoff * math.sqrt(a.shape[1]), "max error %g of max|ref| %g" % (worst, scale)


@pytest.mark.parametrize("dtype,roundoff", [(np.float32, 2.0**-24), (np.float64, 2.0**-53), (np.float16, 2.0**-11)])
def test_matmul_matches_the_reference_and_keeps_the_dtype(client, dtype, roundoff):
    a, b = operands(dtype)
    r = client.matmul(a, b, tuning="off")
    assert isinstance(r.c, np.ndarray)
    assert r.c.shape == (M, N) and r.c.dtype == np.dtype(dtype) and r.c.flags.writeable
    assert_close(r.c, a, b, roundoff)


def test_bf16_as_uint16_bits_with_dtype_bf16(client):
    a32, b32 = operands(np.float32)
    a, b = arbiter.to_bf16(a32), arbiter.to_bf16(b32)
    r = client.matmul(a, b, dtype="bf16", tuning="off")
    assert r.c.dtype == np.uint16 and r.c.shape == (M, N)
    assert_close(arbiter.from_bf16(r.c), arbiter.from_bf16(a), arbiter.from_bf16(b), 2.0**-8)


def test_bf16_ml_dtypes_arrays(client):
    ml_dtypes = pytest.importorskip("ml_dtypes", reason="ml_dtypes is not installed (Debian 12 has no package)")
    a32, b32 = operands(np.float32)
    a, b = a32.astype(ml_dtypes.bfloat16), b32.astype(ml_dtypes.bfloat16)
    r = client.matmul(a, b, tuning="off")
    assert r.c.dtype == a.dtype
    assert_close(r.c.astype(np.float32), a.astype(np.float32), b.astype(np.float32), 2.0**-8)


def test_result_names_candidate_version_source_and_device_time(client):
    a, b = operands(np.float64, m=29, n=13, k=7)  # the bucket of the next test: measured once for both
    r = client.matmul(a, b, tuning="sync")
    assert r.candidate and r.version >= 1 and r.bucket
    assert r.source == "measured"
    assert r.device_seconds > 0


def test_select_after_matmul_names_the_candidate_that_served_it(client):
    a, b = operands(np.float64, m=29, n=13, k=7)
    served = client.matmul(a, b, tuning="sync")
    s = client.select(29, 13, 7, "f64")
    assert (s.candidate, s.version, s.bucket) == (served.candidate, served.version, served.bucket)
    assert s.source == "measured" and s.reason
    assert s.verdict is not None and s.verdict.winner == s.candidate
    assert {x.name for x in s.verdict.results} >= {s.candidate}
    assert s.verdict.measured == (29, 13, 7)


def test_select_accepts_numpy_and_named_dtypes(client):
    by_name = client.select(5, 6, 7, "float32", tuning="off")
    by_numpy = client.select(5, 6, 7, np.float32, tuning="off")
    assert by_name.bucket == by_numpy.bucket and by_name.candidate == by_numpy.candidate


def test_tuning_off_serves_the_tier_default_without_measuring(client):
    a, b = operands(np.float32, m=3, n=300, k=5)
    assert client.matmul(a, b, tuning="off").source == "tier_default"


def test_required_determinism_is_met(client):
    a, b = operands(np.float32, m=19, n=23, k=17)
    r = client.matmul(a, b, determinism="batch_invariant", tuning="off")
    contracts = {c.name: c for c in client.candidates()}[r.candidate].contracts
    assert {c.dtype: c.determinism for c in contracts}["f32"] == "batch_invariant"


def test_c_larger_than_grpcs_default_4mib_message_arrives(client):
    a, b = operands(np.float32, m=1200, n=1100, k=3)  # C is 5.3 MB
    r = client.matmul(a, b, tuning="off")
    assert_close(r.c, a, b, 2.0**-24)


def test_float32_rounds_to_nearest_even_bf16():
    one_and_half_ulp = np.float32(1 + 2.0**-8)  # halfway between 1 and 1+2^-7: even is 1
    three_halves_ulp = np.float32(1 + 3 * 2.0**-8)  # halfway between 1+2^-7 and 1+2^-6: even is 1+2^-6
    bits = arbiter.to_bf16(np.array([one_and_half_ulp, three_halves_ulp, np.inf, -2.5], np.float32))
    assert arbiter.from_bf16(bits).tolist() == [1.0, 1 + 2.0**-6, math.inf, -2.5]
    assert np.isnan(arbiter.from_bf16(arbiter.to_bf16(np.array([np.nan], np.float32))))[0]
