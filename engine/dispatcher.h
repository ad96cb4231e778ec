// Runs a selected candidate on a caller's operands: leases a device stream
// (waiting in the bounded queue), checks the deadline again once it holds one,
// copies the operands in, times the kernel alone with the device timer and
// copies C out. A sampled share of dispatches is also checked against the
// reference; an out-of-budget result quarantines the candidate for its bucket
// (the result is still returned: the client asked for that kernel's answer).
//
// Ownership: borrows the backend, stream pool, quarantine and verdict cache
// (the Arbiter owns them); never owns its observer.
// Thread-safe: the sampling counter is atomic; everything else is borrowed
// from thread-safe owners.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "engine/backend.h"
#include "engine/call_context.h"
#include "engine/observer.h"
#include "engine/problem.h"
#include "engine/quarantine.h"
#include "engine/selection.h"
#include "engine/status.h"
#include "engine/stream_pool.h"
#include "engine/verdict_cache.h"

namespace arbiter {

struct DispatchResult {
  std::vector<uint8_t> c;
  Selection selection;
  double device_seconds = 0;  // the kernel alone, by the device timer
};

// DEADLINE_EXCEEDED, saying how long ago and at which point (`where`), once
// `deadline` has passed; OK when it has not or is unset.
absl::Status CheckDeadline(const Deadline& deadline, const char* where);

// INVALID_ARGUMENT naming the expected size when `a_bytes` or `b_bytes` does not
// hold `p`'s operand A or B as stored.
absl::Status CheckOperandSizes(const Problem& p, size_t a_bytes, size_t b_bytes);

class Dispatcher {
 public:
  // `verify_fraction`: share of dispatches also checked against the reference.
  Dispatcher(Backend& backend, StreamPool& streams, Quarantine& quarantine, VerdictCache& cache,
             double verify_fraction)
      : backend_(backend),
        streams_(streams),
        quarantine_(quarantine),
        cache_(cache),
        verify_fraction_(verify_fraction) {}
  Dispatcher(const Dispatcher&) = delete;
  Dispatcher& operator=(const Dispatcher&) = delete;

  // Set before the engine serves; not synchronized.
  void set_observer(ArbiterObserver* observer) { observer_ = observer; }

  // Runs `selection` (which names its member) on `p` with host operands `a` and
  // `b`, whose sizes the caller checked. Not started - and out of the queue at
  // once - when `caller` stops waiting for a stream (DEADLINE_EXCEEDED or
  // CANCELLED); RESOURCE_EXHAUSTED when the queue for streams is full.
  absl::StatusOr<DispatchResult> Run(const Problem& p, const Selection& selection,
                                     const CallContext& caller, const void* a, const void* b);

 private:
  // Every (1/verify_fraction)-th dispatch: an exact, testable rate.
  bool SampleForVerification();
  // Checks a live dispatch's C against the reference over the operands still on the device.
  absl::Status Verify(const Problem& p, const Selection& selection, Stream& stream,
                      const Buffer& a, const Buffer& b, const std::vector<uint8_t>& c);

  Backend& backend_;
  StreamPool& streams_;
  Quarantine& quarantine_;
  VerdictCache& cache_;
  const double verify_fraction_;
  ArbiterObserver* observer_ = nullptr;
  std::atomic<uint64_t> dispatches_{0};
};

}  // namespace arbiter
