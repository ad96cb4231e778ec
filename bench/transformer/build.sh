#!/usr/bin/env bash
# Builds transformer_bench with nvcc alone (no CMake: the kernel families'
# sources are compiled in directly, beside the bench's own four .cu files),
# for carrying to the GPU machine.
#   usage: bench/transformer/build.sh OUT_DIR
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:?usage: build.sh OUT_DIR}
rm -rf "$out/obj" && mkdir -p "$out/obj"
flags=(-std=c++17 -O3 -I"$root" -Xptxas=-warn-spills,-warn-lmem-usage,-Werror)
sm80_90=(-gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_90,code=sm_90)
nvcc "${flags[@]}" "${sm80_90[@]}" -c "$root/kernels/gemv/gemv.cu" -o "$out/obj/gemv.o" &
nvcc "${flags[@]}" "${sm80_90[@]}" -c "$root/kernels/splitk/splitk.cu" -o "$out/obj/splitk.o"
wait
nvcc "${flags[@]}" "${sm80_90[@]}" -c "$root/kernels/common/split_reduce.cu" -o "$out/obj/split_reduce.o" &
nvcc "${flags[@]}" -gencode=arch=compute_90,code=sm_90 -c "$root/kernels/splitk_tiny/splitk_tiny.cu" -o "$out/obj/splitk_tiny.o"
wait
nvcc "${flags[@]}" -gencode=arch=compute_90a,code=sm_90a -c "$root/kernels/wgmma/wgmma_gemm.cu" -o "$out/obj/wgmma.o" &
nvcc "${flags[@]}" -gencode=arch=compute_90,code=sm_90 -c "$root/kernels/skinny/skinny_stream.cu" -o "$out/obj/skinny_stream.o"
wait
nvcc "${flags[@]}" -gencode=arch=compute_90a,code=sm_90a -c "$root/kernels/wgmma_bt/wgmma_bt.cu" -o "$out/obj/wgmma_bt.o" &
nvcc "${flags[@]}" -gencode=arch=compute_90a,code=sm_90a -c "$root/kernels/wgmma_ragged/wgmma_ragged.cu" -o "$out/obj/wgmma_ragged.o"
wait
nvcc "${flags[@]}" -gencode=arch=compute_90,code=sm_90 -c "$root/kernels/mid_stream/mid_stream.cu" -o "$out/obj/mid_stream.o" &
nvcc "${flags[@]}" "${sm80_90[@]}" -c "$root/kernels/common/pad.cu" -o "$out/obj/pad.o" &
nvcc "${flags[@]}" "${sm80_90[@]}" -c "$root/backends/cuda/device_kernels.cu" -o "$out/obj/device_kernels.o"
wait
nvcc "${flags[@]}" -gencode=arch=compute_90,code=sm_90 -c "$root/bench/transformer/transformer_bench.cu" -o "$out/obj/bench.o"
wait
nvcc "${flags[@]}" -gencode=arch=compute_90,code=sm_90 -c "$root/bench/transformer/candidates.cu" -o "$out/obj/bench_candidates.o" &
nvcc "${flags[@]}" -gencode=arch=compute_90,code=sm_90 -c "$root/bench/transformer/problem.cu" -o "$out/obj/bench_problem.o" &
nvcc "${flags[@]}" -gencode=arch=compute_90,code=sm_90 -c "$root/bench/transformer/claims.cu" -o "$out/obj/bench_claims.o"
wait
nvcc -o "$out/transformer_bench" "$out"/obj/*.o -lcublas -lcublasLt
echo "built $out/transformer_bench"
