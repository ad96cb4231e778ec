#!/usr/bin/python3
"""Writes the seed corpora of the libFuzzer targets (tests/fuzz/corpus/<target>).

request_fuzzer: one file per request type the daemon serves - the selector byte
the target reads first, then a well-formed message of that type (and, for
Matmul, a few refusals: operands of the wrong size, a zero dimension, no
dtype) - so that mutation starts inside the validation, not at protobuf's
parser.

store_fuzzer: a store written by this tree's SQLite store (a verdict, a force
and a quarantine entry), by the fuzz target itself
(ARBITER_STORE_FUZZ_WRITE_SEED), so mutation reaches the schema and the rows.

Usage: make_corpus.py BUILD_DIR   (a build with -DARBITER_FUZZ=ON: scripts/fuzz.sh)
Run again after a change to the proto or the store's schema; commit the result.
"""

import os
import shutil
import struct
import subprocess
import sys
import tempfile

from grpc_tools import protoc

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def stubs(out_dir):
    proto_dir = os.path.join(REPO, "proto")
    if protoc.main(["grpc_tools.protoc", "-I" + proto_dir, "--python_out=" + out_dir,
                    os.path.join(proto_dir, "arbiter/v1/arbiter.proto")]) != 0:
        raise RuntimeError("protoc failed")
    sys.path.insert(0, out_dir)
    from arbiter.v1 import arbiter_pb2
    return arbiter_pb2


def request_seeds(pb):
    """(name, selector, message) for request_fuzzer; the selectors are its switch."""
    f32 = pb.Problem(dtype=pb.DTYPE_F32, m=8, n=6, k=4)
    ones = lambda count: struct.pack("<%df" % count, *([1.0] * count))
    return [
        ("matmul", 0, pb.MatmulRequest(problem=f32, a=ones(8 * 4), b=ones(4 * 6))),
        ("matmul_f64", 0, pb.MatmulRequest(problem=pb.Problem(dtype=pb.DTYPE_F64, m=3, n=5, k=2),
                                           a=b"\0" * 48, b=b"\0" * 80,
                                           required_determinism=pb.DETERMINISM_RUN_TO_RUN)),
        ("matmul_short_a", 0, pb.MatmulRequest(problem=f32, a=ones(3), b=ones(4 * 6))),
        ("matmul_zero_m", 0, pb.MatmulRequest(problem=pb.Problem(dtype=pb.DTYPE_F16, m=0, n=2, k=2))),
        ("matmul_no_dtype", 0, pb.MatmulRequest(problem=pb.Problem(m=2, n=2, k=2))),
        ("select", 1, pb.SelectRequest(problem=pb.Problem(dtype=pb.DTYPE_BF16, m=16, n=32, k=24),
                                       tuning=pb.TUNING_POLICY_SYNC)),
        ("force", 2, pb.ForceRequest(problem=f32, candidate="cpu_blocked", reason="seed")),
        ("unforce", 3, pb.UnforceRequest(problem=f32)),
        ("invalidate", 4, pb.InvalidateRequest(candidate="openblas", dtype=pb.DTYPE_F32)),
        ("invalidate_all", 4, pb.InvalidateRequest(all=True)),
        ("quarantine", 5, pb.QuarantineRequest(candidate="cpu_blocked", scope="f32/m(4,8]n(4,8]k(2,4]",
                                               reason="seed")),
        ("clear_quarantine", 6, pb.ClearQuarantineRequest(candidate="cpu_blocked")),
        ("list_verdicts", 7, pb.ListVerdictsRequest(dtype=pb.DTYPE_F32, candidate="openblas")),
        ("list_quarantine", 8, pb.ListQuarantineRequest()),
        ("list_candidates", 9, pb.ListCandidatesRequest()),
        ("server_info", 10, pb.ServerInfoRequest()),
        ("tune", 11, pb.TuneRequest(problems=[f32, pb.Problem(dtype=pb.DTYPE_F64, m=1, n=1, k=1)])),
    ]


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    build = sys.argv[1]
    corpus = os.path.join(HERE, "corpus")
    with tempfile.TemporaryDirectory() as tmp:
        pb = stubs(tmp)
        out = os.path.join(corpus, "request_fuzzer")
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)
        for name, selector, message in request_seeds(pb):
            with open(os.path.join(out, name), "wb") as f:
                f.write(bytes([selector]) + message.SerializeToString())

        out = os.path.join(corpus, "store_fuzzer")
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)
        seed = os.path.join(tmp, "seed.sqlite")
        subprocess.run([os.path.join(build, "bin", "store_fuzzer")], check=True,
                       env=dict(os.environ, ARBITER_STORE_FUZZ_WRITE_SEED=seed))
        shutil.copy(seed, os.path.join(out, "store_with_one_of_each_row"))
        with open(os.path.join(out, "empty"), "wb"):
            pass
    print("corpus written under", corpus)


if __name__ == "__main__":
    main()
