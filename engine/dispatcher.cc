#include "engine/dispatcher.h"

#include <random>

#include "absl/strings/str_cat.h"
#include "engine/measurer.h"
#include "spdlog/spdlog.h"

namespace arbiter {

absl::Status CheckDeadline(const Deadline& deadline, const char* where) {
  if (!deadline) return absl::OkStatus();
  const auto now = std::chrono::system_clock::now();
  if (now <= *deadline) return absl::OkStatus();
  const auto late = std::chrono::duration_cast<std::chrono::milliseconds>(now - *deadline);
  return absl::DeadlineExceededError(absl::StrCat("deadline passed ", late.count(), " ms ago ",
                                                  where, "; the work was not started"));
}

absl::Status CheckOperandSizes(const Problem& p, size_t a_bytes, size_t b_bytes) {
  if (a_bytes != p.a_bytes()) {
    return absl::InvalidArgumentError(absl::StrCat("a: expected ", p.a_bytes(), " bytes (m*k = ",
                                                   p.m, "*", p.k, " elements of ", DTypeName(p.dtype),
                                                   "), got ", a_bytes));
  }
  if (b_bytes != p.b_bytes()) {
    return absl::InvalidArgumentError(absl::StrCat("b: expected ", p.b_bytes(), " bytes (k*n = ",
                                                   p.k, "*", p.n, " elements of ", DTypeName(p.dtype),
                                                   "), got ", b_bytes));
  }
  return absl::OkStatus();
}

absl::StatusOr<DispatchResult> Dispatcher::Run(const Problem& p, const Selection& sel,
                                               const CallContext& caller, const void* a,
                                               const void* b) {
  const HostPiece host_a[] = {{a, p.a_bytes()}}, host_b[] = {{b, p.b_bytes()}};
  DispatchIo io;
  io.a = Operand{.host = host_a, .bytes = p.a_bytes()};
  io.b = Operand{.host = host_b, .bytes = p.b_bytes()};
  return Run(p, sel, caller, io);
}

bool Dispatcher::HoldsLaunch(const std::string& candidate) const {
  absl::ReaderMutexLock lock(&unheld_mu_);
  auto it = expiries_.find(candidate);
  return it == expiries_.end() || it->second < kExpiriesBeforeUnheld;
}

void Dispatcher::HoldExpired(const std::string& candidate) {
  absl::MutexLock lock(&unheld_mu_);
  if (++expiries_[candidate] == kExpiriesBeforeUnheld) {
    spdlog::warn("{}'s launch waits for the device: its dispatches are timed without a launch "
                 "hold from now on (their device time includes the host's launch)", candidate);
  }
}

absl::StatusOr<DispatchResult> Dispatcher::Run(const Problem& p, const Selection& sel,
                                               const CallContext& caller, const DispatchIo& io) {
  const CandidateMember* member = sel.member;
  if (member == nullptr) {
    return absl::InternalError(absl::StrCat("selected candidate ", sel.candidate, " has no ",
                                            DTypeName(p.dtype), " entry point"));
  }
  if (io.events != nullptr && io.c_device == nullptr) {
    return absl::InvalidArgumentError(
        "completion EVENT: C must be written on the device (c_ref, a region); C sent back in the "
        "reply is complete when the reply arrives");
  }
  using Clock = std::chrono::steady_clock;
  auto seconds_since = [](Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  };
  const Clock::time_point queued = Clock::now();
  ASSIGN_OR_RETURN(StreamPool::Lease stream, streams_.Acquire(/*bounded=*/true, caller));
  const double lease_seconds = seconds_since(queued);
  RETURN_IF_ERROR(CheckDeadline(caller.deadline, "while selecting or queued for a device stream"));
  absl::StatusOr<DispatchResult> result = [&]() -> absl::StatusOr<DispatchResult> {
    DispatchResult r;
    r.stages.lease_seconds = lease_seconds;
    // Operands on the host go through device buffers; those on the device are used in place.
    std::unique_ptr<Buffer> da, db, dc;
    const Clock::time_point copy_in = Clock::now();
    auto place = [&](const Operand& o, size_t bytes, std::unique_ptr<Buffer>* owned,
                     void** at) -> absl::Status {
      if (o.device != nullptr) {
        *at = o.device;
        return absl::OkStatus();
      }
      ASSIGN_OR_RETURN(*owned, backend_.Allocate(bytes));
      if (o.host_side != nullptr) {
        RETURN_IF_ERROR(stream->CopyFromHostSide(**owned, o.host_side, bytes));
      } else {
        RETURN_IF_ERROR(stream->GatherToDevice(**owned, o.host));
      }
      *at = (*owned)->data();
      return absl::OkStatus();
    };
    void *a = nullptr, *b = nullptr, *c = io.c_device;
    RETURN_IF_ERROR(place(io.a, p.a_bytes(), &da, &a));
    RETURN_IF_ERROR(place(io.b, p.b_bytes(), &db, &b));
    if (c == nullptr) {
      ASSIGN_OR_RETURN(dc, backend_.Allocate(p.c_bytes()));
      c = dc->data();
    }
    if (da != nullptr || db != nullptr) r.stages.h2d_seconds = seconds_since(copy_in);

    // Sampled or not is known before launch: a sampled dispatch waits for its
    // kernel even when the client asked for an event.
    const bool sampled = SampleForVerification();
    const bool by_event = io.events != nullptr && !sampled;
    const Clock::time_point launch = Clock::now();
    if (!io.wait_event.empty()) RETURN_IF_ERROR(stream->WaitSharedEvent(io.wait_event));
    const GemmArgs args{p, a, b, c, stream.get()};
    // Without a wait for the kernel there is no device time to read: no timer.
    // With one, the timer and the launch are enqueued behind a hold (as the
    // measurer's samples are), so the device time reported and observed is the
    // kernel's: an idle device otherwise starts the timer at once and waits out
    // the host's launch (cuBLAS: 10-100 us on the H200) inside the window. The
    // kernel starts once the host has enqueued it and the stop event and
    // released the hold, whose own launch costs a few us more
    // (bench/results/launch-cost-h200.md). The same candidate on the same
    // operands enqueues the same work: the stream may replay a recording of it,
    // timer included (Stream::Launch), where no host launch separates the
    // events from the kernel and no hold is needed.
    const LaunchKey key{sel.candidate, sel.version, p, a, b, c, /*timed=*/!by_event};
    r.stages.replayed = stream->Replays(key);
    ScopedLaunchHold hold(*stream, !by_event && HoldsLaunch(sel.candidate) &&
                                       !r.stages.replayed);  // refused: unheld
    const auto work = [&]() -> absl::Status {
      if (!by_event) RETURN_IF_ERROR(stream->TimerStart());
      RETURN_IF_ERROR(member->run(args));
      if (!by_event) RETURN_IF_ERROR(stream->TimerStop());
      return absl::OkStatus();
    };
    if (absl::Status s = stream->Launch(key, work); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat(sel.candidate, " failed on ", p.ToString(), ": ",
                                                 s.message()));
    }
    if (by_event) {
      RETURN_IF_ERROR(io.events->Record(io.event_slot, *stream));
      r.stages.launch_seconds = seconds_since(launch);
      r.selection = sel;
      r.by_event = true;
      r.event_slot = io.event_slot;
      return r;
    }
    hold.Release();
    const Clock::time_point enqueued = Clock::now();
    r.stages.launch_seconds = std::chrono::duration<double>(enqueued - launch).count();
    // The one wait for the device: the timer's stop follows everything the
    // candidate enqueued, so C is complete on the device once it is seen.
    ASSIGN_OR_RETURN(r.device_seconds, stream->ElapsedSeconds());
    if (hold.Expired()) HoldExpired(sel.candidate);
    r.stages.kernel_seconds = seconds_since(enqueued);

    // C on the host: where the caller asked, else in the result.
    void* c_host = io.c_host;
    if (dc != nullptr) {
      const Clock::time_point copy_out = Clock::now();
      if (c_host == nullptr) {
        r.c.resize(p.c_bytes());
        c_host = r.c.data();
      }
      RETURN_IF_ERROR(stream->CopyToHost(c_host, *dc, p.c_bytes()));
      r.stages.d2h_seconds = seconds_since(copy_out);
    }
    // Else C is in the caller's region, already complete (ElapsedSeconds waited):
    // a second wait (a stream synchronize) would only add its own latency.
    r.selection = sel;
    if (io.events != nullptr) {  // sampled: C is complete, and the event says so at once
      RETURN_IF_ERROR(io.events->Record(io.event_slot, *stream));
      r.by_event = true;
      r.event_slot = io.event_slot;
    }
    if (sampled) {
      // A failed check quarantines the candidate but the (already computed) result is still
      // returned with the error logged: the client asked for this kernel's answer.
      BufferView va(a, p.a_bytes()), vb(b, p.b_bytes()), vc(c, p.c_bytes());
      std::vector<uint8_t> c_copy;
      if (c_host == nullptr) {  // C stayed on the device: the check reads a copy
        c_copy.resize(p.c_bytes());
        RETURN_IF_ERROR(stream->CopyToHost(c_copy.data(), vc, p.c_bytes()));
        c_host = c_copy.data();
      }
      if (absl::Status v = Verify(p, sel, *stream, va, vb, c_host); !v.ok()) {
        spdlog::error("sampled verification of {} on {}: {}", sel.candidate, p.ToString(),
                      v.ToString());
      }
    }
    return r;
  }();
  // A dispatch that failed part way may have left copies or a kernel in flight
  // on memory the caller frees or unmaps once it returns (its buffers, a region
  // released later): they finish first.
  if (!result.ok()) stream->Synchronize().IgnoreError();
  if (observer_) {
    observer_->OnDispatch(p, sel, result.ok() ? result->device_seconds : 0, result.status());
  }
  return result;
}

bool Dispatcher::SampleForVerification() {
  if (verify_fraction_ <= 0) return false;
  if (verify_fraction_ >= 1) return true;
  const uint64_t period = static_cast<uint64_t>(1.0 / verify_fraction_ + 0.5);
  return dispatches_.fetch_add(1) % period == 0;
}

absl::Status Dispatcher::Verify(const Problem& p, const Selection& sel, Stream& stream,
                                const Buffer& a, const Buffer& b, const void* c) {
  std::vector<double> ref;
  RETURN_IF_ERROR(stream.Reference(p, a, b, &ref));
  if (const int64_t unjudgeable = UnjudgeableElements(p.dtype, ref); unjudgeable > 0) {
    // NaN or Inf in the operands, or a product past the dtype's range: a correct
    // kernel writes NaN or Inf there too, so this sample says nothing about it.
    // Debug, not info: a client decides how often this happens (the metric counts it).
    spdlog::debug("sampled verification of {} on {} not judged: the reference has {} of {} "
                  "elements non-finite or beyond {}'s range (the client's operands)",
                  sel.candidate, p.ToString(), unjudgeable, ref.size(), DTypeName(p.dtype));
    if (observer_) observer_->OnVerification(p, sel, 0, VerificationOutcome::kUnjudgeable);
    return absl::OkStatus();
  }
  const OracleReport live = CheckOutput(p, sel.member->contract.accuracy, c, ref);
  if (live.pass) {
    if (observer_) observer_->OnVerification(p, sel, live.max_rel_error, VerificationOutcome::kPass);
    return absl::OkStatus();
  }
  // Out of budget on the client's data, which may defeat f32 accumulation (partial
  // sums that overflow, cancellation far below max|ref|) without any fault of the
  // kernel. It is quarantined only when it also fails on operands the daemon chose.
  ASSIGN_OR_RETURN(const OracleReport own, CheckOnOwnOperands(p, sel, stream));
  if (own.pass) {
    spdlog::warn("sampled verification of {} on {}: out of budget on the client's operands ({}) "
                 "but within budget on the daemon's own ({}); not quarantined",
                 sel.candidate, p.ToString(), live.detail, own.detail);
    if (observer_) {
      observer_->OnVerification(p, sel, own.max_rel_error, VerificationOutcome::kUnconfirmed);
    }
    return absl::OkStatus();
  }
  if (observer_) observer_->OnVerification(p, sel, own.max_rel_error, VerificationOutcome::kFail);
  const QuarantineScope scope = QuarantineScope::OfBucket(BucketKeyOf(p));
  RETURN_IF_ERROR(quarantine_.Add(sel.candidate, sel.version, scope,
                                  absl::StrCat("sampled dispatch ", p.ToString(),
                                               " out of budget on the client's operands (",
                                               live.detail, ") and on the daemon's own (",
                                               own.detail, ")")));
  cache_.Clear();
  return absl::DataLossError(absl::StrCat(sel.candidate, " produced an out-of-budget result on ",
                                          p.ToString(), "; quarantined for ", scope.ToString()));
}

absl::StatusOr<OracleReport> Dispatcher::CheckOnOwnOperands(const Problem& p,
                                                             const Selection& sel,
                                                             Stream& stream) {
  const uint64_t seed = std::random_device{}();
  std::vector<uint8_t> host_a(p.a_bytes()), host_b(p.b_bytes());
  FillRandom(p.dtype, host_a.data(), static_cast<size_t>(p.m * p.k), seed);
  FillRandom(p.dtype, host_b.data(), static_cast<size_t>(p.k * p.n), ~seed);
  ASSIGN_OR_RETURN(std::unique_ptr<Buffer> a, backend_.Allocate(p.a_bytes()));
  ASSIGN_OR_RETURN(std::unique_ptr<Buffer> b, backend_.Allocate(p.b_bytes()));
  ASSIGN_OR_RETURN(std::unique_ptr<Buffer> c, backend_.Allocate(p.c_bytes()));
  RETURN_IF_ERROR(stream.CopyToDevice(*a, host_a.data(), p.a_bytes()));
  RETURN_IF_ERROR(stream.CopyToDevice(*b, host_b.data(), p.b_bytes()));
  RETURN_IF_ERROR(stream.Poison(*c, p.dtype, static_cast<size_t>(p.m * p.n)));
  RETURN_IF_ERROR(sel.member->run(GemmArgs{p, a->data(), b->data(), c->data(), &stream}));
  RETURN_IF_ERROR(stream.Synchronize());
  std::vector<uint8_t> host_c(p.c_bytes());
  RETURN_IF_ERROR(stream.CopyToHost(host_c.data(), *c, p.c_bytes()));
  std::vector<double> ref;
  RETURN_IF_ERROR(stream.Reference(p, *a, *b, &ref));
  return CheckOutput(p, sel.member->contract.accuracy, host_c.data(), ref);
}

}  // namespace arbiter
