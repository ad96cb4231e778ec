"""Every way a call fails: refused before sending (saying what was expected), or the daemon's
gRPC status as an ArbiterError subclass carrying its code and message."""

import os
import tempfile

import grpc
import numpy as np
import pytest

import arbiter
from conftest import Daemon

F32 = np.float32


def nowhere():
    """A client whose every RPC would fail UNAVAILABLE: an error other than that was raised before sending."""
    return arbiter.Client("unix:" + os.path.join(tempfile.gettempdir(), "arbiter-py-no-such-daemon.sock"))


def z(shape, dtype=F32):
    return np.zeros(shape, dtype)


REFUSED_OPERANDS = [
    ("mismatched_k", lambda: (z((2, 3)), z((4, 5))), {}, "A's columns (k=3) must equal B's rows (4)"),
    ("one_dimensional", lambda: (z(3), z((3, 2))), {}, "expected 2-D operands"),
    ("three_dimensional", lambda: (z((2, 2, 2)), z((2, 2))), {}, "expected 2-D operands"),
    ("zero_dimension", lambda: (z((0, 3)), z((3, 2))), {}, "every dimension must be at least 1"),
    ("mixed_dtypes", lambda: (z((2, 3)), z((3, 2), np.float64)), {}, "expected one dtype for both"),
    ("integer_dtype", lambda: (z((2, 3), np.int32), z((3, 2), np.int32)), {}, "expected float32, float64, float16"),
    ("uint16_without_bf16", lambda: (z((2, 3), np.uint16), z((3, 2), np.uint16)), {}, "need dtype='bf16'"),
    ("float32_as_bf16", lambda: (z((2, 3)), z((3, 2))), {"dtype": "bf16"}, "arbiter.to_bf16"),
    ("unknown_dtype_name", lambda: (z((2, 3)), z((3, 2))), {"dtype": "int8"}, "expected one of f32, f64, f16, bf16"),
    ("not_row_major", lambda: (z((3, 2)).T, z((3, 2))), {}, "not C-contiguous"),
    ("big_endian", lambda: (z((2, 3), ">f4"), z((3, 2), ">f4")), {}, "big-endian"),
    ("a_list", lambda: ([[1.0, 2.0]], z((2, 1))), {}, "numpy.ndarray or both torch.Tensor"),
    ("unknown_determinism", lambda: (z((2, 3)), z((3, 2))), {"determinism": "fast"}, "'run_to_run'"),
    ("unknown_tuning", lambda: (z((2, 3)), z((3, 2))), {"tuning": "later"}, "'sync', 'async', 'off'"),
]


@pytest.mark.parametrize("make,kwargs,expected", [r[1:] for r in REFUSED_OPERANDS],
                         ids=[r[0] for r in REFUSED_OPERANDS])
def test_matmul_refuses_bad_operands_before_sending(make, kwargs, expected):
    a, b = make()
    with nowhere() as client, pytest.raises(arbiter.InvalidArgument) as caught:
        client.matmul(a, b, **kwargs)
    e = caught.value
    assert expected in str(e)
    assert e.code == grpc.StatusCode.INVALID_ARGUMENT and e.method == "Matmul"
    assert isinstance(e, ValueError)


REFUSED_CALLS = [
    ("select_dim_not_integer", lambda c: c.select("4", 4, 4, "f32"), "m='4': expected an integer"),
    ("select_unknown_dtype", lambda c: c.select(4, 4, 4, "f8"), "expected one of f32"),
    ("tune_shape_without_dtype", lambda c: c.tune([(4, 4, 4)]), "expected (m, n, k) with dtype="),
    ("invalidate_shape_without_dtype", lambda c: c.invalidate(shape=(4, 4, 4)), "needs dtype= too"),
]


@pytest.mark.parametrize("call,expected", [r[1:] for r in REFUSED_CALLS], ids=[r[0] for r in REFUSED_CALLS])
def test_calls_refuse_bad_arguments_before_sending(call, expected):
    with nowhere() as client, pytest.raises(arbiter.InvalidArgument, match=expected.replace("(", r"\(")
                                            .replace(")", r"\)")):
        call(client)


DAEMON_REFUSALS = [
    ("select_m_zero", lambda c: c.select(0, 4, 4, "f32"), arbiter.InvalidArgument, "Select", "problem.m"),
    ("force_without_reason", lambda c: c.force(4, 4, 4, "f32", "openblas", reason=""), arbiter.InvalidArgument,
     "Force", "reason"),
    ("force_unknown_candidate", lambda c: c.force(4, 4, 4, "f32", "no_such_kernel", reason="test"),
     arbiter.NotFound, "Force", "no_such_kernel"),
    ("invalidate_nothing", lambda c: c.invalidate(), arbiter.InvalidArgument, "Invalidate", "nothing to invalidate"),
    ("quarantine_bad_scope", lambda c: c.quarantine("openblas", scope="bogus", reason="test"),
     arbiter.InvalidArgument, "Quarantine", "scope"),
    ("clear_unknown_quarantine", lambda c: c.clear_quarantine("no_such_kernel"), arbiter.NotFound,
     "ClearQuarantine", "no_such_kernel"),
    ("tune_k_zero", lambda c: c.tune([(4, 4, 0)], "f32"), arbiter.InvalidArgument, "Tune", "problem.k"),
]


@pytest.mark.parametrize("call,kind,method,mentions", [r[1:] for r in DAEMON_REFUSALS],
                         ids=[r[0] for r in DAEMON_REFUSALS])
def test_daemon_refusals_carry_its_code_and_message(client, call, kind, method, mentions):
    with pytest.raises(kind) as caught:
        call(client)
    e = caught.value
    assert e.method == method and mentions in e.details
    assert e.code.name in str(e) and e.details in str(e)


def test_unreachable_daemon_is_unavailable():
    with nowhere() as client, pytest.raises(arbiter.Unavailable) as caught:
        client.info()
    assert caught.value.code == grpc.StatusCode.UNAVAILABLE
    assert isinstance(caught.value, ConnectionError)


def test_expired_deadline_is_deadline_exceeded(daemon):
    # A deadline of zero raced a 2x3 matmul on a loaded machine (the reply won); a shape this daemon
    # never saw, measured first (tuning="sync"), cannot beat a microsecond.
    with arbiter.Client(daemon.address, timeout=1e-6) as client, pytest.raises(arbiter.DeadlineExceeded) as caught:
        client.matmul(z((301, 299)), z((299, 297)), tuning="sync")
    assert isinstance(caught.value, TimeoutError)


def test_operands_over_the_daemons_message_limit_are_resource_exhausted():
    d = Daemon("unix", args=["--max-message-bytes=65536", "--tuning=off"])
    try:
        with arbiter.Client(d.address) as client, pytest.raises(arbiter.ResourceExhausted) as caught:
            client.matmul(z((200, 100)), z((100, 3)))  # A alone is 80 kB
        assert caught.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "65536" in caught.value.details
    finally:
        d.stop()


def test_a_closed_client_refuses_calls(daemon):
    client = arbiter.Client(daemon.address)
    client.close()
    client.close()  # idempotent
    with pytest.raises(ValueError, match="closed"):
        client.health()


def test_token_file_must_exist_and_hold_a_token(tmp_path):
    with pytest.raises(FileNotFoundError):
        arbiter.Client("127.0.0.1:1", token_file=str(tmp_path / "missing"))
    empty = tmp_path / "empty"
    empty.write_text("\n")
    with pytest.raises(ValueError, match="empty"):
        arbiter.Client("127.0.0.1:1", token_file=str(empty))
