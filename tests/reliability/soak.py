#!/usr/bin/env python3
"""Soak and kill -9 harness for arbiterd on loopback (CPU backend).

Usage: soak.py PATH/TO/arbiterd [--seconds 30] [--kills 5] [--json FILE]

Soak: concurrent Matmul, Select, Admin and /metrics clients against one daemon
for --seconds, with more Matmul clients than the queue admits, so that it is
overloaded. Under overload a call may only be answered OK, RESOURCE_EXHAUSTED
or DEADLINE_EXCEEDED; any other code fails the run. The daemon's RSS is sampled
twice a second and must stay under --max-rss-mb; p50/p99 latency per method is
reported. Afterwards the daemon is stopped with SIGTERM: it must exit 0 within
--shutdown-grace-seconds plus a margin for a loaded machine (issue 10, item 4),
else the run fails; the store then passes SQLite's integrity_check, and a
restarted daemon serves every force and verdict the Admin client last had
acknowledged.

Kill loop: --kills times, the daemon is started on the same store, loaded, and
killed with SIGKILL at a random moment while an Admin client forces, unforces,
tunes and invalidates a set of buckets no other client touches. After each
restart, every acknowledged change is there: for each bucket, the force and
the presence of a verdict are what the last acknowledged operation left - or
what the one in flight at the kill would have left.

Prints the figures and "soak: ok" last, or "soak: FAILED: ..."; --json writes
them for tests/reliability/RESULTS.md. Needs python3-grpcio, python3-grpc-tools
and python3-numpy (scripts/install-deps.sh).
"""

import argparse
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.request

import grpc
import numpy as np
from grpc_tools import protoc

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HEALTH_PROTO = """
syntax = "proto3";
package grpc.health.v1;
message HealthCheckRequest { string service = 1; }
message HealthCheckResponse {
  enum ServingStatus { UNKNOWN = 0; SERVING = 1; NOT_SERVING = 2; SERVICE_UNKNOWN = 3; }
  ServingStatus status = 1;
}
service Health { rpc Check(HealthCheckRequest) returns (HealthCheckResponse); }
"""
START_SECONDS = 120
CALL_SECONDS = 10  # each client call's deadline
GRACE_SECONDS = 5  # --shutdown-grace-seconds
# How long SIGTERM may take: the grace, plus arbiterd's own margin (about 1 s) and
# slack for a machine loaded by other tests; past it the daemon is killed and the run fails.
SHUTDOWN_SECONDS = GRACE_SECONDS + 5
OVERLOAD_CODES = {grpc.StatusCode.OK, grpc.StatusCode.RESOURCE_EXHAUSTED,
                  grpc.StatusCode.DEADLINE_EXCEEDED}

pb = pb_grpc = health_pb = health_grpc = None


def generate_stubs(out_dir):
    global pb, pb_grpc, health_pb, health_grpc
    health_dir = os.path.join(out_dir, "health_src", "soak_health")
    os.makedirs(health_dir)
    with open(os.path.join(health_dir, "health.proto"), "w") as f:
        f.write(HEALTH_PROTO)
    for include, proto in ((os.path.join(REPO, "proto"), "arbiter/v1/arbiter.proto"),
                           (os.path.join(out_dir, "health_src"), "soak_health/health.proto")):
        if protoc.main(["grpc_tools.protoc", "-I" + include, "--python_out=" + out_dir,
                        "--grpc_python_out=" + out_dir, os.path.join(include, proto)]) != 0:
            raise RuntimeError("grpc_tools.protoc failed on " + proto)
    sys.path.insert(0, out_dir)
    from arbiter.v1 import arbiter_pb2, arbiter_pb2_grpc
    from soak_health import health_pb2, health_pb2_grpc
    pb, pb_grpc, health_pb, health_grpc = arbiter_pb2, arbiter_pb2_grpc, health_pb2, health_pb2_grpc


class Daemon:
    """arbiterd on an ephemeral port over `store`, its log appended to `log_path`."""

    def __init__(self, binary, store, log_path, extra_args):
        self.port_file = store + ".port"
        if os.path.exists(self.port_file):
            os.remove(self.port_file)
        args = [binary, "--listen=127.0.0.1:0", "--port-file=" + self.port_file, "--backend=cpu",
                "--store=" + store, "--metrics-listen=127.0.0.1:0"] + list(extra_args)
        self.log_path = log_path
        with open(log_path, "a") as log:
            self.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        self.port = self._wait_for_port()
        self.channel = grpc.insecure_channel("127.0.0.1:%d" % self.port)
        self.dispatch = pb_grpc.DispatchStub(self.channel)
        self.admin = pb_grpc.AdminStub(self.channel)
        self._wait_serving()
        self.metrics_port = self._metrics_port()

    def _wait_for_port(self):
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError("arbiterd exited with %d at start; log:\n%s" %
                                   (self.process.returncode, self.log_tail()))
            try:
                with open(self.port_file) as f:
                    return int(f.read().strip())
            except (OSError, ValueError):
                time.sleep(0.02)  # between checks for the port file
        raise RuntimeError("arbiterd wrote no port file; log:\n" + self.log_tail())

    def _wait_serving(self):
        stub = health_grpc.HealthStub(self.channel)
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            try:
                if stub.Check(health_pb.HealthCheckRequest(), timeout=5).status == 1:
                    return
            except grpc.RpcError:
                pass
            time.sleep(0.02)  # between health checks
        raise RuntimeError("arbiterd never became SERVING; log:\n" + self.log_tail())

    def _metrics_port(self):
        with open(self.log_path) as f:
            lines = [l for l in f if "metrics on http://127.0.0.1:" in l]
        return int(lines[-1].split("127.0.0.1:")[1].split("/")[0])

    def log_tail(self, n=20):
        with open(self.log_path) as f:
            return "".join(f.readlines()[-n:])

    def rss_mb(self):
        try:
            with open("/proc/%d/status" % self.process.pid) as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) / 1024.0
        except OSError:
            pass
        return None

    def kill9(self):
        self.channel.close()
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def terminate(self, timeout=60):
        self.channel.close()
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            return None


class Calls:
    """Latencies and status codes per method, from every client thread."""

    def __init__(self):
        self.lock = threading.Lock()
        self.latency = {}
        self.codes = {}
        self.unexpected = []

    def record(self, method, seconds, code, detail=""):
        with self.lock:
            self.latency.setdefault(method, []).append(seconds)
            key = "%s %s" % (method, code.name)
            self.codes[key] = self.codes.get(key, 0) + 1
            if code not in OVERLOAD_CODES and len(self.unexpected) < 20:
                self.unexpected.append("%s: %s %s" % (method, code.name, detail))

    def summary(self):
        out = {}
        for method, samples in sorted(self.latency.items()):
            s = sorted(samples)
            out[method] = {"calls": len(s), "p50_ms": round(1e3 * s[len(s) // 2], 2),
                           "p99_ms": round(1e3 * s[min(len(s) - 1, int(0.99 * len(s)))], 2)}
        return out


def timed_call(calls, method, fn):
    t0 = time.monotonic()
    try:
        result = fn()
        calls.record(method, time.monotonic() - t0, grpc.StatusCode.OK)
        return result
    except grpc.RpcError as e:
        calls.record(method, time.monotonic() - t0, e.code(), e.details())
        return None


DTYPES = None  # filled once stubs exist


def operands(rng, dtype, m, n, k):
    a = rng.standard_normal((m, k)) * 0.5
    b = rng.standard_normal((k, n)) * 0.5
    if dtype == pb.DTYPE_F32:
        return a.astype(np.float32).tobytes(), b.astype(np.float32).tobytes()
    if dtype == pb.DTYPE_F64:
        return a.tobytes(), b.tobytes()
    if dtype == pb.DTYPE_F16:
        return a.astype(np.float16).tobytes(), b.astype(np.float16).tobytes()
    # bf16: the upper half of each f32 (truncation: any bf16 value is a valid operand)
    return ((a.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16).tobytes(),
            (b.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16).tobytes())


# Shapes the load clients use: a few hot buckets, and now and then a fresh one.
HOT_SHAPES = [(64, 64, 64), (128, 64, 32), (100, 30, 70), (1, 256, 256), (256, 1, 128),
              (33, 65, 17), (200, 200, 200), (7, 9, 11)]
# Buckets only the Admin client touches (f64: the load clients never send it).
ADMIN_SHAPES = [(3, 5, 7), (12, 20, 24), (40, 40, 40), (96, 10, 3), (5, 300, 9), (17, 17, 129)]


def shape_for(rng, fresh_share=0.05):
    if rng.random() < fresh_share:
        return tuple(int(x) for x in rng.integers(1, 300, size=3))
    return HOT_SHAPES[rng.integers(len(HOT_SHAPES))]


def matmul_client(daemon, calls, stop, seed):
    rng = np.random.default_rng(seed)
    while not stop.is_set():
        m, n, k = shape_for(rng)
        dtype = DTYPES[rng.integers(len(DTYPES))]
        a, b = operands(rng, dtype, m, n, k)
        request = pb.MatmulRequest(problem=pb.Problem(dtype=dtype, m=m, n=n, k=k), a=a, b=b)
        timed_call(calls, "Matmul", lambda: daemon.dispatch.Matmul(request, timeout=CALL_SECONDS))


def select_client(daemon, calls, stop, seed):
    rng = np.random.default_rng(seed)
    while not stop.is_set():
        m, n, k = shape_for(rng, fresh_share=0.2)
        dtype = DTYPES[rng.integers(len(DTYPES))]
        request = pb.SelectRequest(problem=pb.Problem(dtype=dtype, m=m, n=n, k=k))
        timed_call(calls, "Select", lambda: daemon.dispatch.Select(request, timeout=CALL_SECONDS))


def metrics_client(daemon, calls, stop):
    url = "http://127.0.0.1:%d/metrics" % daemon.metrics_port
    while not stop.is_set():
        t0 = time.monotonic()
        try:
            with urllib.request.urlopen(url, timeout=CALL_SECONDS) as r:
                ok = r.status == 200 and b"arbiter_serving" in r.read()
        except OSError as e:
            ok = False
        calls.record("GET /metrics", time.monotonic() - t0,
                     grpc.StatusCode.OK if ok else grpc.StatusCode.UNAVAILABLE)
        stop.wait(0.5)  # Prometheus' pace, not a synchronization


class TuneRefused(Exception):
    """A Tune's progress for a problem came back without a verdict: its error."""


class AdminModel:
    """What the Admin client may find per admin bucket: its force and whether a verdict exists.

    An acknowledged call leaves exactly one possibility. A call that was not
    acknowledged (killed, or past its deadline) may or may not have landed, so
    it adds its outcome to the possibilities until a check or the next
    acknowledged call on that bucket settles them. The force and the verdict
    are changed by different calls, so each is tracked apart.
    """

    def __init__(self, eligible):
        self.eligible = eligible  # candidate names that cover f64
        self.forces = {shape: {None} for shape in ADMIN_SHAPES}
        self.verdicts = {shape: {False} for shape in ADMIN_SHAPES}
        self.acknowledged = 0

    def step(self, daemon, calls, rng):
        """One random admin operation on one admin bucket; False once the daemon is gone."""
        shape = ADMIN_SHAPES[rng.integers(len(ADMIN_SHAPES))]
        problem = pb.Problem(dtype=pb.DTYPE_F64, m=shape[0], n=shape[1], k=shape[2])
        op = rng.integers(4)
        if op == 0:
            field, value = self.forces, self.eligible[rng.integers(len(self.eligible))]
            call = lambda: daemon.admin.Force(pb.ForceRequest(problem=problem, candidate=value,
                                                              reason="soak"), timeout=CALL_SECONDS)
            method = "Force"
        elif op == 1:
            field, value = self.forces, None
            call = lambda: daemon.admin.Unforce(pb.UnforceRequest(problem=problem), timeout=CALL_SECONDS)
            method = "Unforce"
        elif op == 2:
            field, value = self.verdicts, True

            def call():
                for progress in daemon.admin.Tune(pb.TuneRequest(problems=[problem]),
                                                  timeout=4 * CALL_SECONDS):
                    if not progress.HasField("verdict"):
                        raise TuneRefused(progress.error)
            method = "Tune"
        else:
            field, value = self.verdicts, False
            call = lambda: daemon.admin.Invalidate(pb.InvalidateRequest(problem=problem),
                                                   timeout=CALL_SECONDS)
            method = "Invalidate"
        t0 = time.monotonic()
        try:
            call()
        except TuneRefused as e:
            # The tuning queue full (every client here is one peer, 127.0.0.1): an
            # overload answer, nothing measured. Any other refusal is unexpected.
            overloaded = str(e).startswith("RESOURCE_EXHAUSTED")
            calls.record(method, time.monotonic() - t0,
                         grpc.StatusCode.RESOURCE_EXHAUSTED if overloaded else grpc.StatusCode.UNKNOWN,
                         str(e))
            return True
        except grpc.RpcError as e:
            calls.record(method, time.monotonic() - t0, e.code(), e.details())
            field[shape].add(value)  # it may have landed
            return e.code() not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED)
        calls.record(method, time.monotonic() - t0, grpc.StatusCode.OK)
        field[shape] = {value}
        self.acknowledged += 1
        return True

    def check(self, daemon):
        """Compares a (restarted) daemon's forces and verdicts with the model; a list of errors."""
        listed = daemon.admin.ListVerdicts(pb.ListVerdictsRequest(dtype=pb.DTYPE_F64),
                                           timeout=CALL_SECONDS)
        forces = {f.bucket: f.candidate for f in listed.forces}
        verdicts = {v.bucket for v in listed.verdicts}
        errors = []
        for shape in ADMIN_SHAPES:
            bucket = daemon.dispatch.Select(pb.SelectRequest(
                problem=pb.Problem(dtype=pb.DTYPE_F64, m=shape[0], n=shape[1], k=shape[2]),
                tuning=pb.TUNING_POLICY_OFF), timeout=CALL_SECONDS).bucket
            force, verdict = forces.get(bucket), bucket in verdicts
            if force not in self.forces[shape]:
                errors.append("f64 %s: force %s, acknowledged %s" % (bucket, force, self.forces[shape]))
            if verdict not in self.verdicts[shape]:
                errors.append("f64 %s: verdict %s, acknowledged %s" %
                              (bucket, "present" if verdict else "absent", self.verdicts[shape]))
            self.forces[shape], self.verdicts[shape] = {force}, {verdict}
        return errors


def admin_client(daemon, calls, stop, model, seed):
    rng = np.random.default_rng(seed)
    while not stop.is_set():
        if not model.step(daemon, calls, rng):
            return
        # Reads that every operator runs while the daemon is loaded.
        timed_call(calls, "ListQuarantine",
                   lambda: daemon.admin.ListQuarantine(pb.ListQuarantineRequest(), timeout=CALL_SECONDS))
        timed_call(calls, "ServerInfo",
                   lambda: daemon.admin.ServerInfo(pb.ServerInfoRequest(), timeout=CALL_SECONDS))


def eligible_f64(daemon):
    names = []
    for c in daemon.admin.ListCandidates(pb.ListCandidatesRequest(), timeout=CALL_SECONDS).candidates:
        if c.eligible and any(m.dtype == pb.DTYPE_F64 for m in c.members):
            names.append(c.name)
    return names


def start_load(daemon, calls, stop, model, seed, matmuls, selects):
    threads = [threading.Thread(target=matmul_client, args=(daemon, calls, stop, seed + i))
               for i in range(matmuls)]
    threads += [threading.Thread(target=select_client, args=(daemon, calls, stop, seed + 100 + i))
                for i in range(selects)]
    threads.append(threading.Thread(target=admin_client, args=(daemon, calls, stop, model, seed + 200)))
    threads.append(threading.Thread(target=metrics_client, args=(daemon, calls, stop)))
    for t in threads:
        t.start()
    return threads


def integrity(store):
    with sqlite3.connect(store) as db:
        return db.execute("PRAGMA integrity_check").fetchone()[0]


def soak(args, work, daemon_args):
    store = os.path.join(work, "soak.db")
    log = os.path.join(work, "soak-arbiterd.log")
    daemon = Daemon(args.arbiterd, store, log, daemon_args)
    calls = Calls()
    model = AdminModel(eligible_f64(daemon))
    stop = threading.Event()
    rss = []
    start = time.monotonic()
    threads = start_load(daemon, calls, stop, model, args.seed, args.matmul_clients, args.select_clients)
    while time.monotonic() - start < args.seconds:
        value = daemon.rss_mb()
        if value is not None:
            rss.append((round(time.monotonic() - start, 1), round(value, 1)))
        stop.wait(0.5)  # the sampling period
    stop.set()
    for t in threads:
        t.join()
    errors = list(calls.unexpected)
    warnings = []
    t0 = time.monotonic()
    code = daemon.terminate(timeout=SHUTDOWN_SECONDS)
    shutdown_seconds = round(time.monotonic() - t0, 2)
    if code is None:
        # SIGTERM is bounded by --shutdown-grace-seconds (issue 10, item 4). Killed so
        # that the store is still checked below.
        errors.append("SIGTERM: arbiterd still running after %d s (grace %s); killed; log:\n%s" %
                      (SHUTDOWN_SECONDS, GRACE_SECONDS, daemon.log_tail()))
    elif code != 0:
        errors.append("SIGTERM: arbiterd exited with %s; log:\n%s" % (code, daemon.log_tail()))
    check = integrity(store)
    if check != "ok":
        errors.append("store integrity_check after the soak: " + check)
    restarted = Daemon(args.arbiterd, store, log, daemon_args)
    errors += model.check(restarted)
    restarted.terminate()
    peak = max(v for _, v in rss) if rss else None
    if peak is not None and peak > args.max_rss_mb:
        errors.append("RSS peaked at %.0f MiB, over the bound of %d MiB" % (peak, args.max_rss_mb))
    quarter = max(1, len(rss) // 4)
    return {
        "seconds": args.seconds,
        "clients": {"matmul": args.matmul_clients, "select": args.select_clients, "admin": 1,
                    "metrics": 1},
        "daemon_flags": daemon_args,
        "calls": calls.summary(),
        "codes": calls.codes,
        "admin_acknowledged": model.acknowledged,
        "rss_mb": {"first_quarter_peak": max(v for _, v in rss[:quarter]) if rss else None,
                   "last_quarter_peak": max(v for _, v in rss[-quarter:]) if rss else None,
                   "peak": peak, "bound": args.max_rss_mb, "samples": len(rss)},
        "store_integrity": check,
        "shutdown_seconds": shutdown_seconds if code is not None else None,
        "warnings": warnings,
    }, errors


def kill_loop(args, work, daemon_args):
    store = os.path.join(work, "kill.db")
    log = os.path.join(work, "kill-arbiterd.log")
    rng = random.Random(args.seed)
    calls = Calls()
    errors = []
    model = None
    survived = 0
    for i in range(args.kills):
        try:
            daemon = Daemon(args.arbiterd, store, log, daemon_args)
        except RuntimeError as e:
            errors.append("restart %d: %s" % (i, e))
            break
        if model is None:
            model = AdminModel(eligible_f64(daemon))
        else:
            errors += ["after kill %d: %s" % (i, e) for e in model.check(daemon)]
        stop = threading.Event()
        threads = start_load(daemon, calls, stop, model, args.seed + 1000 * i, 3, 1)
        stop.wait(rng.uniform(0.5, 2.5))  # a random moment under load: the point of the kill
        daemon.kill9()
        stop.set()
        for t in threads:
            t.join()
        check = integrity(store)
        if check != "ok":
            errors.append("store integrity_check after kill %d: %s" % (i, check))
        survived += 1
    if model is not None and not errors:
        daemon = Daemon(args.arbiterd, store, log, daemon_args)
        errors += ["after the last kill: " + e for e in model.check(daemon)]
        daemon.terminate()
    return {"kills": survived, "admin_acknowledged": model.acknowledged if model else 0,
            "codes": calls.codes}, errors


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("arbiterd")
    parser.add_argument("--seconds", type=float, default=30, help="length of the soak")
    parser.add_argument("--kills", type=int, default=5, help="kill -9's in the kill loop")
    parser.add_argument("--matmul-clients", type=int, default=8)
    parser.add_argument("--select-clients", type=int, default=2)
    parser.add_argument("--max-rss-mb", type=int, default=1024)
    parser.add_argument("--seed", type=int, default=int(time.time()))
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()

    work = tempfile.mkdtemp(prefix="arbiter-soak-")
    generate_stubs(os.path.join(work, "stubs"))
    global DTYPES
    DTYPES = [pb.DTYPE_F32, pb.DTYPE_F16, pb.DTYPE_BF16]
    # Overload on purpose: two device streams, a queue of four, eight Matmul clients.
    daemon_args = ["--tuning=async", "--workers=2", "--max-queue=4", "--verify-fraction=0.05",
                   "--shutdown-grace-seconds=%d" % GRACE_SECONDS]
    figures = {"seed": args.seed, "work": work}
    errors = []
    try:
        figures["soak"], soak_errors = soak(args, work, daemon_args)
        errors += soak_errors
        figures["kill_loop"], kill_errors = kill_loop(args, work, daemon_args)
        errors += kill_errors
    except Exception:
        errors.append(traceback.format_exc())
    print(json.dumps(figures, indent=2, sort_keys=True))
    for w in figures.get("soak", {}).get("warnings", []):
        print("soak: warning: " + w)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=2, sort_keys=True)
    if errors:
        print("soak: FAILED: %d problems (logs in %s)" % (len(errors), work))
        for e in errors:
            print("  " + e)
        return 1
    print("soak: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
