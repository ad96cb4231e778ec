#include "engine/dispatcher.h"

#include "absl/strings/str_cat.h"
#include "engine/oracle.h"
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
  const CandidateMember* member = sel.member;
  if (member == nullptr) {
    return absl::InternalError(absl::StrCat("selected candidate ", sel.candidate, " has no ",
                                            DTypeName(p.dtype), " entry point"));
  }
  ASSIGN_OR_RETURN(StreamPool::Lease stream, streams_.Acquire(/*bounded=*/true, caller));
  RETURN_IF_ERROR(CheckDeadline(caller.deadline, "while selecting or queued for a device stream"));
  absl::StatusOr<DispatchResult> result = [&]() -> absl::StatusOr<DispatchResult> {
    ASSIGN_OR_RETURN(std::unique_ptr<Buffer> da, backend_.Allocate(p.a_bytes()));
    ASSIGN_OR_RETURN(std::unique_ptr<Buffer> db, backend_.Allocate(p.b_bytes()));
    ASSIGN_OR_RETURN(std::unique_ptr<Buffer> dc, backend_.Allocate(p.c_bytes()));
    RETURN_IF_ERROR(stream->CopyToDevice(*da, a, p.a_bytes()));
    RETURN_IF_ERROR(stream->CopyToDevice(*db, b, p.b_bytes()));
    const GemmArgs args{p, da->data(), db->data(), dc->data(), stream.get()};
    RETURN_IF_ERROR(stream->TimerStart());
    if (absl::Status s = member->run(args); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat(sel.candidate, " failed on ", p.ToString(), ": ",
                                                 s.message()));
    }
    RETURN_IF_ERROR(stream->TimerStop());
    DispatchResult r;
    ASSIGN_OR_RETURN(r.device_seconds, stream->ElapsedSeconds());
    r.c.resize(p.c_bytes());
    RETURN_IF_ERROR(stream->CopyToHost(r.c.data(), *dc, p.c_bytes()));
    r.selection = sel;
    if (SampleForVerification()) {
      // A failed check quarantines the candidate but the (already computed) result is still
      // returned with the error logged: the client asked for this kernel's answer.
      if (absl::Status v = Verify(p, sel, *stream, *da, *db, r.c); !v.ok()) {
        spdlog::error("sampled verification of {} on {}: {}", sel.candidate, p.ToString(),
                      v.ToString());
      }
    }
    return r;
  }();
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
                                const Buffer& a, const Buffer& b, const std::vector<uint8_t>& c) {
  std::vector<double> ref;
  RETURN_IF_ERROR(stream.Reference(p, a, b, &ref));
  const OracleReport report = CheckOutput(p, sel.member->contract.accuracy, c.data(), ref);
  if (observer_) observer_->OnVerification(p, sel, report.max_rel_error, report.pass);
  if (report.pass) return absl::OkStatus();
  const QuarantineScope scope = QuarantineScope::OfBucket(BucketKeyOf(p));
  RETURN_IF_ERROR(quarantine_.Add(sel.candidate, sel.version, scope,
                                  absl::StrCat("sampled dispatch ", p.ToString(),
                                               " out of budget: ", report.detail)));
  cache_.Clear();
  return absl::DataLossError(absl::StrCat(sel.candidate, " produced an out-of-budget result on ",
                                          p.ToString(), "; quarantined for ", scope.ToString()));
}

}  // namespace arbiter
