// Host-side cost of one cublasGemmEx call by the thread that makes it: the same
// thread every call, a thread's first call, calls hopping among 16 warm threads,
// and a hand-off to one launcher thread (bench/results/launch-cost-h200.md says
// why the daemon's dispatch cares). Build here, run on the GPU machine:
//   nvcc -O2 -std=c++17 -gencode=arch=compute_90,code=sm_90 \
//     bench/launch_cost/launch_cost.cu -lcublas -o /tmp/launch_cost
//   ../shared/device/bundle .device-exp /tmp/launch_cost   # then: .device-exp/run launch_cost
// Host wall time around the call alone (what the host pays to enqueue; the
// device's time is not this program's subject), median of 200 calls after 20
// warm-ups, the stream synchronized between calls.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>
using Clock = std::chrono::steady_clock;
__global__ void Empty() {}
struct Turns {  // threads take turns, call i on thread i % kThreads
  std::mutex mu;
  std::condition_variable cv;
  int turn = -1;
};
static double Median(std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }
int main() {
  cudaSetDevice(0);
  cudaStream_t s; cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cublasHandle_t h; cublasCreate(&h); cublasSetStream(h, s);
  void* ws; cudaMalloc(&ws, 32 << 20); cublasSetWorkspace(h, ws, 32 << 20);
  const int n_max = 2048; void *a, *b, *c;
  cudaMalloc(&a, size_t(n_max) * n_max * 2); cudaMalloc(&b, size_t(n_max) * n_max * 2); cudaMalloc(&c, size_t(n_max) * n_max * 2);
  cudaMemset(a, 0x3c, size_t(n_max) * n_max * 2); cudaMemset(b, 0x3c, size_t(n_max) * n_max * 2);
  cudaEvent_t e0; cudaEventCreate(&e0);
  const float alpha = 1, beta = 0;
  auto gemm = [&](int n) {
    cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, b, CUDA_R_16BF, n, a, CUDA_R_16BF, n, &beta, c,
                 CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  };
  const int kThreads = 16, kCalls = 200;
  for (int n : {256, 1024, 2048}) {
    for (int i = 0; i < 20; ++i) gemm(n);
    cudaStreamSynchronize(s);
    // same thread
    std::vector<double> same, ev, empty;
    for (int i = 0; i < kCalls; ++i) {
      auto t0 = Clock::now(); gemm(n); auto t1 = Clock::now();
      same.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      cudaStreamSynchronize(s);
      t0 = Clock::now(); cudaEventRecord(e0, s); t1 = Clock::now();
      ev.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      t0 = Clock::now(); Empty<<<1, 32, 0, s>>>(); t1 = Clock::now();
      empty.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      cudaStreamSynchronize(s);
    }
    // a different thread each call (threads kept alive, taking turns)
    std::vector<double> hop(kCalls);
    Turns t;
    std::vector<std::thread> pool;
    for (int w = 0; w < kThreads; ++w) {
      pool.emplace_back([&, w] {
        cudaSetDevice(0);
        for (int i = w; i < kCalls; i += kThreads) {
          std::unique_lock<std::mutex> l(t.mu);
          t.cv.wait(l, [&] { return t.turn == i; });
          l.unlock();
          auto t0 = Clock::now(); gemm(n); auto t1 = Clock::now();
          hop[i] = std::chrono::duration<double, std::micro>(t1 - t0).count();
          cudaStreamSynchronize(s);
          l.lock(); t.turn = i + 1; t.cv.notify_all();
        }
      });
    }
    { std::lock_guard<std::mutex> l(t.mu); t.turn = 0; t.cv.notify_all(); }
    for (auto& th : pool) th.join();
    std::vector<double> first(hop.begin(), hop.begin() + kThreads), rest(hop.begin() + kThreads, hop.end());
    printf("n=%d  gemm same thread %.1f us | new thread's first call %.1f us | thread-hopping after %.1f us | eventRecord %.1f | empty launch %.1f\n",
           n, Median(same), Median(first), Median(rest), Median(ev), Median(empty));
  }

  {
    // per-thread or per-(thread, shape)? 16 threads warm at 1024, then each calls 512 for the first time
    std::vector<double> first512(kThreads), again1024(kThreads);
    std::vector<std::thread> pool;
    std::mutex mu;
    for (int w = 0; w < kThreads; ++w) {
      pool.emplace_back([&, w] {
        cudaSetDevice(0);
        std::lock_guard<std::mutex> l(mu);  // one at a time
        gemm(1024); cudaStreamSynchronize(s);
        gemm(1024); cudaStreamSynchronize(s);
        auto t0 = Clock::now(); gemm(512); auto t1 = Clock::now(); cudaStreamSynchronize(s);
        first512[w] = std::chrono::duration<double, std::micro>(t1 - t0).count();
        t0 = Clock::now(); gemm(1024); t1 = Clock::now(); cudaStreamSynchronize(s);
        again1024[w] = std::chrono::duration<double, std::micro>(t1 - t0).count();
      });
    }
    for (auto& th : pool) th.join();
    printf("threads warm at 1024: first call at 512 %.1f us, 1024 again on the same thread %.1f us\n",
           Median(first512), Median(again1024));
  }
  {
    // a launcher thread: the caller hands the gemm over and waits until it is enqueued
    std::mutex mu; std::condition_variable cv; int asked = 0, done = 0; bool stop = false;
    std::thread launcher([&] {
      cudaSetDevice(0);
      std::unique_lock<std::mutex> l(mu);
      while (true) {
        cv.wait(l, [&] { return asked > done || stop; });
        if (stop) return;
        l.unlock(); gemm(1024); l.lock();
        ++done; cv.notify_all();
      }
    });
    std::vector<double> rt;
    for (int i = 0; i < 220; ++i) {
      auto t0 = Clock::now();
      { std::unique_lock<std::mutex> l(mu); ++asked; cv.notify_all(); cv.wait(l, [&] { return done == asked; }); }
      auto t1 = Clock::now();
      if (i >= 20) rt.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      cudaStreamSynchronize(s);
    }
    { std::lock_guard<std::mutex> l(mu); stop = true; cv.notify_all(); }
    launcher.join();
    printf("handed to a launcher thread (condvar), 1024: %.1f us round trip\n", Median(rt));
  }
  return 0;
}
