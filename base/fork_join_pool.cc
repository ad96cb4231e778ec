#include "base/fork_join_pool.h"

#include <algorithm>

namespace arbiter {

ForkJoinPool::ForkJoinPool(int threads) {
  for (int part = 1; part < threads; ++part) helpers_.emplace_back([this, part] { Loop(part); });
}

ForkJoinPool::~ForkJoinPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_.notify_all();
  for (std::thread& t : helpers_) t.join();
}

void ForkJoinPool::Run(int parts, const std::function<void(int)>& fn) {
  parts = std::clamp(parts, 1, threads());
  if (parts > 1) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      fn_ = &fn;
      parts_ = parts;
      pending_ = parts - 1;
      ++job_;
    }
    work_.notify_all();
  }
  fn(0);
  if (parts == 1) return;
  std::unique_lock<std::mutex> lock(mu_);
  done_.wait(lock, [this] { return pending_ == 0; });
  fn_ = nullptr;
}

void ForkJoinPool::Loop(int part) {
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    work_.wait(lock, [&] { return stop_ || job_ != seen; });
    if (stop_) return;
    seen = job_;
    // A job of fewer parts leaves this helper out; it may also first wake in a
    // later job than the one that woke it: it runs its part of the current one.
    if (part >= parts_) continue;
    const std::function<void(int)>* fn = fn_;
    lock.unlock();
    (*fn)(part);
    lock.lock();
    if (--pending_ == 0) done_.notify_one();
  }
}

}  // namespace arbiter
