// A fixed set of threads that run the parts of one job at a time: Run(parts, fn)
// calls fn(0) on the caller and fn(1..parts-1) on the pool's helpers, and
// returns once every part has. The helpers are started once and sleep between
// jobs, so a job costs a wake-up per part, not a thread's creation (ParallelFor's
// way, tens of microseconds a thread) - for jobs run every few hundred
// microseconds, such as packing a received operand into pinned staging one
// chunk at a time.
//
// Thread-safety: Run is called by one thread at a time (the pool's owner).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace arbiter {

class ForkJoinPool {
 public:
  // `threads` parts at most per job, the caller's included (threads - 1 helpers; < 1 counts as 1).
  explicit ForkJoinPool(int threads);
  ~ForkJoinPool();
  ForkJoinPool(const ForkJoinPool&) = delete;
  ForkJoinPool& operator=(const ForkJoinPool&) = delete;

  int threads() const { return static_cast<int>(helpers_.size()) + 1; }
  // fn(part) for part in [0, min(parts, threads())); returns when all have returned.
  void Run(int parts, const std::function<void(int)>& fn);

 private:
  void Loop(int part);

  std::mutex mu_;
  std::condition_variable work_;  // a new job, or stop
  std::condition_variable done_;  // pending_ reached 0
  const std::function<void(int)>* fn_ = nullptr;  // guarded by mu_: the job
  int parts_ = 0;                                 // guarded by mu_: the job's parts
  uint64_t job_ = 0;                              // guarded by mu_: counts jobs
  int pending_ = 0;                               // guarded by mu_: helper parts not yet done
  bool stop_ = false;                             // guarded by mu_
  std::vector<std::thread> helpers_;              // helper i runs part i + 1
};

}  // namespace arbiter
