#!/usr/bin/env python3
"""Calls arbiterd from a client nobody here wrote: Python's grpcio, with stubs
generated from proto/arbiter/v1/arbiter.proto alone.

Usage: python_client_test.py PATH/TO/arbiterd

Starts the daemon on 127.0.0.1 (an ephemeral port, read from --port-file) with
the CPU backend and a temporary store, waits for grpc.health.v1 SERVING, then
runs a Matmul (C checked against a reference computed here) and a Select, and
checks how errors and admin auth look from outside. Prints "N passed, N failed"
last; exits 0 only when nothing failed.

Needs Debian's python3-grpcio and python3-grpc-tools (ctest runs it with the
python3 CMake found).
"""

import math
import os
import random
import signal
import struct
import subprocess
import sys
import tempfile
import time
import traceback

import grpc
from grpc_tools import protoc

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROTO_ROOT = os.path.join(REPO, "proto")

# grpc.health.v1 as the gRPC project specifies it; Debian ships no Python
# health package, so the two messages and the service are declared here.
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

STARTUP_SECONDS = 120  # registry verification and store open, on a loaded CI machine
RPC_SECONDS = 120      # a sync-tuned first Matmul measures every CPU candidate


def generate_stubs(out_dir):
    """Generates Python modules from arbiter.proto (and the health proto) into out_dir."""
    health_dir = os.path.join(out_dir, "health_src", "grpc_health_local")
    os.makedirs(health_dir)
    with open(os.path.join(health_dir, "health.proto"), "w") as f:
        f.write(HEALTH_PROTO)
    for include, proto in ((PROTO_ROOT, "arbiter/v1/arbiter.proto"),
                           (os.path.join(out_dir, "health_src"), "grpc_health_local/health.proto")):
        rc = protoc.main(["grpc_tools.protoc", "-I" + include, "--python_out=" + out_dir,
                          "--grpc_python_out=" + out_dir, os.path.join(include, proto)])
        if rc != 0:
            raise RuntimeError("grpc_tools.protoc failed on %s (exit %d)" % (proto, rc))
    sys.path.insert(0, out_dir)


class Daemon:
    """arbiterd in a subprocess, its log in the temp dir."""

    def __init__(self, binary, work, extra_args=()):
        self.work = work
        self.port_file = os.path.join(work, "port")
        self.log_path = os.path.join(work, "arbiterd.log")
        args = [binary, "--listen=127.0.0.1:0", "--port-file=" + self.port_file, "--backend=cpu",
                "--store=" + os.path.join(work, "verdicts.db")] + list(extra_args)
        self.log = open(self.log_path, "w")
        self.process = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        self.port = self._wait_for_port()
        self.channel = grpc.insecure_channel("127.0.0.1:%d" % self.port)

    def _wait_for_port(self):
        deadline = time.monotonic() + STARTUP_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError("arbiterd exited with %d before serving:\n%s"
                                   % (self.process.returncode, self.log_tail()))
            try:
                with open(self.port_file) as f:
                    text = f.read().strip()
                if text:
                    return int(text)
            except FileNotFoundError:
                pass
            time.sleep(0.1)  # polling for the port file, bounded by the deadline
        raise RuntimeError("arbiterd wrote no port file in %d s:\n%s" % (STARTUP_SECONDS, self.log_tail()))

    def log_tail(self, lines=30):
        if not self.log.closed:
            self.log.flush()
        with open(self.log_path) as f:
            return "".join(f.readlines()[-lines:])

    def stop(self):
        """SIGTERM, as an orchestrator sends it; returns the exit code."""
        self.channel.close()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()
        return self.process.returncode


def random_floats(count, rng):
    return [rng.uniform(-1.0, 1.0) for _ in range(count)]


def reference_matmul(a, b, m, n, k):
    """C = A * B, row-major, accumulated in Python floats (f64)."""
    c = [0.0] * (m * n)
    for i in range(m):
        row = a[i * k:(i + 1) * k]
        for j in range(n):
            c[i * n + j] = math.fsum(row[p] * b[p * n + j] for p in range(k))
    return c


class Suite:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def run(self, name, fn, *args):
        try:
            fn(*args)
        except Exception:  # a failed check or an RPC error: report it and go on
            self.failed += 1
            print("FAIL  %s\n%s" % (name, "".join("      " + l for l in
                                                     traceback.format_exc().splitlines(True))))
        else:
            self.passed += 1
            print("ok    %s" % name)


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def main(argv):
    if len(argv) != 2:
        print(__doc__)
        return 2
    binary = os.path.abspath(argv[1])
    suite = Suite()
    rng = random.Random(20240611)

    with tempfile.TemporaryDirectory(prefix="arbiter-pyclient-") as work:
        generate_stubs(os.path.join(work, "stubs"))
        from arbiter.v1 import arbiter_pb2 as pb
        from arbiter.v1 import arbiter_pb2_grpc as pb_grpc
        from grpc_health_local import health_pb2, health_pb2_grpc

        plain_dir = os.path.join(work, "plain")
        os.mkdir(plain_dir)
        daemon = Daemon(binary, plain_dir)
        dispatch = pb_grpc.DispatchStub(daemon.channel)
        admin = pb_grpc.AdminStub(daemon.channel)
        health = health_pb2_grpc.HealthStub(daemon.channel)

        def health_serving():
            for service in ("", "arbiter.v1.Dispatch"):
                response = health.Check(health_pb2.HealthCheckRequest(service=service),
                                        timeout=STARTUP_SECONDS, wait_for_ready=True)
                check(response.status == health_pb2.HealthCheckResponse.SERVING,
                      "health of %r is %s" % (service, response.status))

        # A ragged, non-square shape (no dim a multiple of 2), random data.
        m, n, k = 13, 7, 29
        a = random_floats(m * k, rng)
        b = random_floats(k * n, rng)
        problem = pb.Problem(dtype=pb.DTYPE_F64, m=m, n=n, k=k)
        served = {}

        def matmul_f64_matches_reference():
            response = dispatch.Matmul(pb.MatmulRequest(
                problem=problem, a=struct.pack("<%dd" % len(a), *a), b=struct.pack("<%dd" % len(b), *b)),
                timeout=RPC_SECONDS)
            check(len(response.c) == m * n * 8, "C has %d bytes, expected %d" % (len(response.c), m * n * 8))
            c = struct.unpack("<%dd" % (m * n), response.c)
            ref = reference_matmul(a, b, m, n, k)
            scale = max(abs(x) for x in ref)
            worst = max(abs(x - y) for x, y in zip(c, ref)) / scale
            check(worst <= 1e-12, "max relative error %g against the reference" % worst)
            check(response.candidate, "no candidate named")
            check(response.source != pb.VERDICT_SOURCE_UNSPECIFIED, "no verdict source")
            check(response.bucket, "no bucket")
            served["candidate"] = response.candidate
            served["bucket"] = response.bucket

        def matmul_f32_matches_reference():
            mm, nn, kk = 5, 11, 3
            a32 = [struct.unpack("<f", struct.pack("<f", x))[0] for x in random_floats(mm * kk, rng)]
            b32 = [struct.unpack("<f", struct.pack("<f", x))[0] for x in random_floats(kk * nn, rng)]
            response = dispatch.Matmul(pb.MatmulRequest(
                problem=pb.Problem(dtype=pb.DTYPE_F32, m=mm, n=nn, k=kk),
                a=struct.pack("<%df" % len(a32), *a32), b=struct.pack("<%df" % len(b32), *b32)),
                timeout=RPC_SECONDS)
            c = struct.unpack("<%df" % (mm * nn), response.c)
            ref = reference_matmul(a32, b32, mm, nn, kk)
            scale = max(abs(x) for x in ref)
            worst = max(abs(x - y) for x, y in zip(c, ref)) / scale
            check(worst <= 1e-5, "max relative error %g against the reference" % worst)

        def select_after_matmul_serves_the_measured_verdict():
            response = dispatch.Select(pb.SelectRequest(problem=problem), timeout=RPC_SECONDS)
            check(response.candidate == served.get("candidate"),
                  "Select names %r, the Matmul was served by %r" % (response.candidate, served.get("candidate")))
            check(response.bucket == served.get("bucket"), "bucket %r vs %r" % (response.bucket, served.get("bucket")))
            check(response.source == pb.VERDICT_SOURCE_MEASURED,
                  "source %s, expected MEASURED after a sync-tuned Matmul" % response.source)
            check(response.verdict.winner == response.candidate, "verdict winner %r" % response.verdict.winner)
            check(len(response.verdict.results) >= 1, "the verdict lists no candidate results")

        def wrong_operand_size_is_invalid_argument():
            try:
                dispatch.Matmul(pb.MatmulRequest(problem=problem, a=b"\0" * 8, b=b"\0" * 8), timeout=RPC_SECONDS)
            except grpc.RpcError as e:
                check(e.code() == grpc.StatusCode.INVALID_ARGUMENT, "got %s: %s" % (e.code(), e.details()))
            else:
                raise AssertionError("a Matmul with 8-byte operands succeeded")

        def admin_on_loopback_without_token_is_served():
            info = admin.ServerInfo(pb.ServerInfoRequest(), timeout=RPC_SECONDS)
            check(info.backend == "cpu", "backend %r" % info.backend)

        suite.run("health is SERVING", health_serving)
        suite.run("Matmul f64 13x7x29 matches the reference", matmul_f64_matches_reference)
        suite.run("Matmul f32 5x11x3 matches the reference", matmul_f32_matches_reference)
        suite.run("Select serves the measured verdict of the Matmul's bucket",
                  select_after_matmul_serves_the_measured_verdict)
        suite.run("a wrong operand size is INVALID_ARGUMENT", wrong_operand_size_is_invalid_argument)
        suite.run("admin on loopback without a token is served", admin_on_loopback_without_token_is_served)
        code = daemon.stop()
        suite.run("SIGTERM shuts down cleanly", lambda: check(code == 0, "arbiterd exited %s:\n%s"
                                                               % (code, daemon.log_tail())))

        # Admin auth, once the daemon has the flag.
        helptext = subprocess.run([binary, "--helpfull"], capture_output=True, text=True).stdout
        if "admin_token_file" not in helptext:
            print("skip  admin token checks: arbiterd has no --admin-token-file flag")
        else:
            guarded_dir = os.path.join(work, "guarded")
            os.mkdir(guarded_dir)
            token = "%032x" % rng.getrandbits(128)
            token_file = os.path.join(guarded_dir, "token")
            with open(token_file, "w") as f:
                f.write(token + "\n")
            guarded = Daemon(binary, guarded_dir, ["--admin-token-file=" + token_file])
            guarded_admin = pb_grpc.AdminStub(guarded.channel)
            force = pb.ForceRequest(problem=problem, candidate=served.get("candidate", ""), reason="python client")

            def admin_code(metadata):
                try:
                    guarded_admin.Force(force, metadata=metadata, timeout=RPC_SECONDS, wait_for_ready=True)
                except grpc.RpcError as e:
                    return e.code()
                return grpc.StatusCode.OK

            def expect(metadata, code):
                got = admin_code(metadata)
                check(got == code, "got %s, expected %s" % (got, code))

            suite.run("admin without a token is UNAUTHENTICATED",
                      expect, (), grpc.StatusCode.UNAUTHENTICATED)
            suite.run("admin with a wrong token is PERMISSION_DENIED",
                      expect, (("authorization", "Bearer wrong-token"),), grpc.StatusCode.PERMISSION_DENIED)
            suite.run("admin with the token may force",
                      expect, (("authorization", "Bearer " + token),), grpc.StatusCode.OK)
            guarded.stop()

            def refuses_non_loopback_without_token():
                exposed_dir = os.path.join(work, "exposed")
                os.mkdir(exposed_dir)
                try:
                    result = subprocess.run(
                        [binary, "--listen=0.0.0.0:0", "--backend=cpu",
                         "--port-file=" + os.path.join(exposed_dir, "port"),
                         "--store=" + os.path.join(exposed_dir, "verdicts.db")],
                        capture_output=True, text=True, timeout=STARTUP_SECONDS)
                except subprocess.TimeoutExpired:  # run() has killed it
                    raise AssertionError("arbiterd kept running on 0.0.0.0 without an admin token")
                check(result.returncode != 0, "arbiterd exited 0")
                check("--admin-token-file" in result.stdout + result.stderr,
                      "the refusal does not name --admin-token-file:\n" + result.stdout + result.stderr)
                check(not os.path.exists(os.path.join(exposed_dir, "port")), "it served before refusing")

            suite.run("a non-loopback listener without a token refuses to start", refuses_non_loopback_without_token)

    print("%d passed, %d failed" % (suite.passed, suite.failed))
    return 0 if suite.failed == 0 else 1


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except Exception:  # the daemon did not start, stubs did not generate, ...
        traceback.print_exc()
        print("0 passed, 1 failed")
        sys.exit(1)
