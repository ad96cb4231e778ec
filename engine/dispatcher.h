// Runs a selected candidate on a caller's operands: leases a device stream
// (waiting in the bounded queue), checks the deadline again once it holds one,
// copies the operands in, times the kernel alone with the device timer and
// copies C out. A sampled share of dispatches is also checked against the
// reference. That check judges the kernel, never the client's data: a sample
// whose reference is itself non-finite or overflows C's dtype is not judged,
// and an out-of-budget result on the client's operands is confirmed on the
// daemon's own random operands of the same shape before the candidate is
// quarantined for its bucket (the result is still returned either way: the
// client asked for that kernel's answer).
//
// Ownership: borrows the backend, stream pool, quarantine and verdict cache
// (the Arbiter owns them); never owns its observer.
// Thread-safe: the sampling counter is atomic, the candidates timed without a
// launch hold are behind a mutex; everything else is borrowed from thread-safe
// owners.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

#include "engine/backend.h"
#include "engine/call_context.h"
#include "engine/observer.h"
#include "engine/oracle.h"
#include "engine/problem.h"
#include "engine/quarantine.h"
#include "engine/selection.h"
#include "engine/status.h"
#include "engine/stream_pool.h"
#include "engine/verdict_cache.h"

namespace arbiter {

// Host wall time of each stage of one dispatch, for the per-stage breakdown; the
// stages do not overlap. A stage that did not happen (no copy for an operand
// already on the device) is 0.
struct DispatchStages {
  double lease_seconds = 0;   // waiting for a device stream (the bounded queue)
  double h2d_seconds = 0;     // operands copied to the device
  double launch_seconds = 0;  // enqueueing the kernel: the wait on the client's event (if
                              // any), the device timer's events and the candidate's
                              // launch call(s), on the host
  double kernel_seconds = 0;  // from the kernel enqueued to its end seen by the host: the
                              // one wait for the device (C complete there)
  double d2h_seconds = 0;     // C copied back
  bool replayed = false;      // the stream replayed a recording of the launch (Stream::Replays)
};

struct DispatchResult {
  std::vector<uint8_t> c;  // C, unless the caller gave it somewhere to go (DispatchIo)
  Selection selection;
  double device_seconds = 0;  // the kernel alone, by the device timer; 0 when not waited for
  DispatchStages stages;
  bool by_event = false;  // C completes when DispatchIo's event does, maybe after the return
  size_t event_slot = 0;  // with by_event: DispatchIo::event_slot
};

// Where one operand is: bytes on the host, in one piece or several (gathered
// in), or an address on the device (a region or resident tensor at an offset,
// used in place). The pieces are the caller's and outlive the dispatch.
struct Operand {
  absl::Span<const HostPiece> host = {};
  void* device = nullptr;
  // In a client's host region on a device backend (Buffer::host_side): copied
  // to the device from there (Stream::CopyFromHostSide).
  const void* host_side = nullptr;
  size_t bytes = 0;  // the bytes given (host) or available from `device` or `host_side`
};

// Where a dispatch reads A and B and puts C.
struct DispatchIo {
  Operand a, b;
  void* c_device = nullptr;  // C written here on the device (a region) ...
  // ... or copied here, p.c_bytes() of it (inline C, or a host region's on a
  // device backend); neither: DispatchResult::c
  void* c_host = nullptr;
  // An event of another process the stream waits on before reading A and B
  // (Stream::WaitSharedEvent); empty: none.
  std::string wait_event;
  // Keeps the regions and tensors the addresses point into alive until the
  // dispatch ends.
  std::vector<std::shared_ptr<const void>> hold;
  // Completion by event (C on the device only): when set, slot `event_slot` of
  // `events` is recorded after the kernel and the dispatch returns without
  // waiting for the device - so with no device time - unless it is sampled for
  // verification, which waits first.
  SharedEvents* events = nullptr;
  size_t event_slot = 0;
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
  // The same with operands anywhere (DispatchIo). C written on the device is
  // complete when Run returns - the host waits for the device timer's stop,
  // enqueued after everything the candidate enqueued - or, with io.events, when
  // that event completes. INVALID_ARGUMENT for io.events with C on the host.
  absl::StatusOr<DispatchResult> Run(const Problem& p, const Selection& selection,
                                     const CallContext& caller, const DispatchIo& io);

 private:
  // Whether `candidate`'s dispatches are timed behind a launch hold, and a hold
  // of its that expired.
  bool HoldsLaunch(const std::string& candidate) const;
  void HoldExpired(const std::string& candidate);
  // Every (1/verify_fraction)-th dispatch: an exact, testable rate.
  bool SampleForVerification();
  // Checks a live dispatch's C against the reference over the operands still on
  // the device; a failure is confirmed before anything is quarantined.
  absl::Status Verify(const Problem& p, const Selection& selection, Stream& stream,
                      const Buffer& a, const Buffer& b, const void* c);
  // Runs the selection on fresh random operands of `p`'s shape (the kind tuning
  // judges on) over poisoned C, and checks it against their reference.
  absl::StatusOr<OracleReport> CheckOnOwnOperands(const Problem& p, const Selection& selection,
                                                  Stream& stream);

  Backend& backend_;
  StreamPool& streams_;
  Quarantine& quarantine_;
  VerdictCache& cache_;
  const double verify_fraction_;
  ArbiterObserver* observer_ = nullptr;
  std::atomic<uint64_t> dispatches_{0};
  // How many of each candidate's holds expired (its launch waited for the
  // device, and the hold stalled the dispatch). A kernel's first launch in the
  // process may wait once, loading its module (CUDA's lazy loading): a second
  // expiry means the launch waits every time, and the candidate is timed
  // without a hold from then on.
  static constexpr int kExpiriesBeforeUnheld = 2;
  mutable absl::Mutex unheld_mu_;
  absl::flat_hash_map<std::string, int> expiries_ ABSL_GUARDED_BY(unheld_mu_);
};

}  // namespace arbiter
