"""The admin calls: on a local listener without a token, and on a daemon that requires one."""

import io

import grpc
import numpy as np
import pytest

import arbiter
from arbiter.progress import TuneDisplay
from conftest import Daemon


@pytest.fixture(scope="module")
def admin():
    """A daemon of this module's own (the tests change its verdicts, forces and quarantine), on a Unix socket."""
    d = Daemon("unix", args=["--tuning=off"])
    with arbiter.Client(d.address) as client:
        yield client
    d.stop()


def test_info_and_health_describe_the_cpu_daemon(admin):
    info = admin.info()
    assert info.backend == "cpu" and info.version and info.fingerprint and info.store_path.endswith("verdicts.db")
    assert info.candidates == len(admin.candidates())
    assert admin.health() == "SERVING"
    assert admin.health("arbiter.v1.Dispatch") == "SERVING"


def test_candidates_carry_contracts_and_eligibility(admin):
    candidates = {c.name: c for c in admin.candidates()}
    assert "cpu_reference" in candidates
    reference = candidates["cpu_reference"]
    assert reference.eligible and reference.version >= 1 and reference.tier == 1
    contracts = {c.dtype: c for c in reference.contracts}
    assert set(contracts) == {"f32", "f64", "f16", "bf16"}
    assert contracts["f64"].accuracy_abs > 0 and contracts["f64"].shape.min_m == 1


def test_tune_measures_each_shape_in_order_and_reports_progress(admin):
    seen = []
    outcomes = admin.tune([(33, 17, 9), (5, 70, 3, "f64")], "f32", progress=seen.append)
    assert seen == outcomes
    assert [o.problem for o in outcomes] == [(33, 17, 9, "f32"), (5, 70, 3, "f64")]
    assert [(o.index, o.total) for o in outcomes] == [(0, 2), (1, 2)]
    for o in outcomes:
        assert o.ok and o.verdict.source == "measured" and o.verdict.winner
        assert all(r.state for r in o.verdict.results)
    assert admin.select(33, 17, 9, "f32").source == "measured"
    buckets = {v.bucket for v in admin.verdicts(dtype="f32")}
    assert outcomes[0].verdict.bucket in buckets
    assert outcomes[1].verdict.bucket not in buckets  # it is f64's
    assert [v.bucket for v in admin.verdicts(bucket=outcomes[1].verdict.bucket)] == [outcomes[1].verdict.bucket]


def test_tune_progress_bar_shows_every_problem():
    outcome = arbiter.TuneOutcome(1, 2, (4, 5, 6, "f32"), None, "")
    lines = io.StringIO()
    display = TuneDisplay(2, True, stream=lines, delay=0, use_tqdm=False)
    display.update(outcome)
    display.close()
    assert lines.getvalue() == "tune [2/2] f32 4x5x6: done\n"
    quiet = io.StringIO()
    display = TuneDisplay(2, False, stream=quiet, delay=0)
    display.update(outcome)
    display.close()
    assert quiet.getvalue() == ""


def test_tune_progress_bar_with_tqdm():
    pytest.importorskip("tqdm", reason="tqdm is not installed (python3-tqdm)")
    bar = io.StringIO()
    display = TuneDisplay(2, True, stream=bar, delay=0)
    display.update(arbiter.TuneOutcome(0, 2, (4, 5, 6, "f32"), None, "no candidate"))
    display.close()
    assert "1/2" in bar.getvalue() and "failed: no candidate" in bar.getvalue()


def test_force_then_unforce_a_bucket(admin):
    bucket = admin.force(48, 24, 12, "f64", "cpu_reference", reason="pin for a test")
    s = admin.select(48, 24, 12, "f64")
    assert (s.candidate, s.source, s.bucket) == ("cpu_reference", "forced", bucket)
    a = np.ones((48, 12)); b = np.ones((12, 24))
    r = admin.matmul(a, b)
    assert (r.candidate, r.source) == ("cpu_reference", "forced") and (r.c == 12).all()
    assert [(f.bucket, f.candidate, f.reason) for f in admin.forces()] == [(bucket, "cpu_reference", "pin for a test")]
    assert admin.unforce(48, 24, 12, "f64") is True
    assert admin.unforce(48, 24, 12, "f64") is False
    assert admin.select(48, 24, 12, "f64").source != "forced"


def test_a_force_of_one_exact_shape_serves_that_shape_alone(admin):
    bucket = admin.force(40, 24, 12, "f64", "cpu_reference", reason="pin this shape", exact=True)
    assert admin.select(40, 24, 12, "f64").source == "forced"
    assert admin.select(48, 24, 12, "f64").bucket == bucket  # same bucket, another shape
    assert admin.select(48, 24, 12, "f64").source != "forced"
    assert [(f.scope, f.candidate) for f in admin.forces()] == [("40x24x12", "cpu_reference")]
    assert admin.unforce(40, 24, 12, "f64") is False  # the bucket has no force of its own
    assert admin.unforce(40, 24, 12, "f64", exact=True) is True
    assert admin.select(40, 24, 12, "f64").source != "forced"


def test_invalidate_removes_verdicts_so_they_are_measured_again(admin):
    admin.tune([(100, 9, 9)], "f16", progress=False)
    assert admin.select(100, 9, 9, "f16").source == "measured"
    assert admin.invalidate(candidate="no_such_kernel") == 0  # every argument narrows the scope
    assert admin.invalidate(candidate="cpu_blocked", dtype="f16", shape=(100, 9, 9)) == 1
    assert admin.select(100, 9, 9, "f16").source == "tier_default"
    assert admin.verdicts(dtype="f16") == []


def test_quarantine_takes_a_candidate_out_until_cleared(admin):
    admin.quarantine("cpu_blocked", scope="bf16", reason="test evidence")
    entries = admin.quarantined()
    assert [(q.candidate, q.scope, q.reason) for q in entries] == [("cpu_blocked", "bf16", "test evidence")]
    assert {c.name: c for c in admin.candidates()}["cpu_blocked"].quarantine == entries
    a = arbiter.to_bf16(np.ones((8, 8), np.float32))
    assert admin.matmul(a, a, dtype="bf16").candidate != "cpu_blocked"
    assert admin.clear_quarantine("cpu_blocked") == 1
    assert admin.quarantined() == []


def test_admin_without_the_token_is_unauthenticated(guarded_daemon):
    with arbiter.Client(guarded_daemon.address) as client:
        for call in (client.info, client.candidates, client.verdicts, client.quarantined,
                     lambda: client.tune([(8, 8, 8)], "f32", progress=False),
                     lambda: client.force(8, 8, 8, "f32", "openblas", reason="no token")):
            with pytest.raises(arbiter.Unauthenticated) as caught:
                call()
            assert caught.value.code == grpc.StatusCode.UNAUTHENTICATED
            assert "--admin-token-file" in caught.value.details


def test_admin_with_a_wrong_token_is_permission_denied(guarded_daemon, tmp_path):
    wrong = tmp_path / "wrong"
    wrong.write_text("not-the-token\n")
    with arbiter.Client(guarded_daemon.address, token_file=str(wrong)) as client:
        with pytest.raises(arbiter.PermissionDenied) as caught:
            client.force(8, 8, 8, "f32", "openblas", reason="wrong token")
        assert caught.value.code == grpc.StatusCode.PERMISSION_DENIED


def test_admin_with_the_token_is_served(guarded_daemon):
    with arbiter.Client(guarded_daemon.address, token_file=guarded_daemon.token_file) as client:
        assert client.info().backend == "cpu"
        bucket = client.force(8, 8, 8, "f32", "openblas", reason="with the token")
        assert client.select(8, 8, 8, "f32").bucket == bucket
        assert client.unforce(8, 8, 8, "f32") is True


def test_dispatch_needs_no_token(guarded_daemon):
    with arbiter.Client(guarded_daemon.address) as client:
        assert client.select(8, 8, 8, "f32", tuning="off").candidate
        assert client.health() == "SERVING"
