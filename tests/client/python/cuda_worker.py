"""One client process of test_cuda.py's concurrent cases: python3 cuda_worker.py ADDRESS SEED CALLS.

Makes its own operands on the GPU, runs one matmul (registering its segments), prints
"READY <pid>" and waits for a line on stdin, then runs CALLS matmuls, checks each against
the float64 product within the f32 budget, prints "DONE <calls> <worst error / tolerance>"
and exits (closing its client). Exits non-zero on any error.
"""

import math
import os
import sys

import torch

import arbiter


def main():
    address, seed, calls = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    g = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(512, 384, device="cuda", generator=g)
    b = torch.randn(384, 640, device="cuda", generator=g)
    ref = a.double() @ b.double()
    # The f32 budget of every candidate is within this: k^0.5-scaled roundoff, with room.
    tolerance = 64 * 2.0**-24 * math.sqrt(a.shape[1]) * ref.abs().max().item()
    with arbiter.Client(address) as client:
        client.matmul(a, b)
        print("READY %d" % os.getpid(), flush=True)
        sys.stdin.readline()
        worst = 0.0
        for _ in range(calls):
            c = client.matmul(a, b).c
            worst = max(worst, ((c.double() - ref).abs().max() / tolerance).item())
        print("DONE %d %.3g" % (calls, worst), flush=True)
    return 0 if worst <= 1 else 1


if __name__ == "__main__":
    sys.exit(main())
