// A verdict: which candidate serves a (device, dtype, bucket), and the figures
// it was decided on. Every eligible candidate appears in `results`, timed or
// unmeasured with a reason - a verdict that raced only some hides the fastest.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/bucket.h"
#include "engine/contract.h"
#include "engine/problem.h"

namespace arbiter {

enum class VerdictSource { kMeasured = 1, kForced = 2, kTierDefault = 3, kProvisional = 4 };
const char* VerdictSourceName(VerdictSource s);  // "measured", "forced", ...
std::optional<VerdictSource> ParseVerdictSource(std::string_view s);

enum class ResultState {
  kTimed = 1,        // passed the oracle and was timed
  kFailedOracle = 2, // output outside its declared budget, or NaN/Inf/unwritten
  kError = 3,        // launch or runtime error, or a declined problem
  kUnmeasured = 4,   // never timed, with a reason (time budget, not run, ...)
  kQuarantined = 5,  // a claim (determinism, accuracy) failed when checked
};
const char* ResultStateName(ResultState s);
std::optional<ResultState> ParseResultState(std::string_view s);

struct CandidateResult {
  std::string name;
  int version = 0;
  int tier = 0;
  Determinism determinism = Determinism::kNondeterministic;
  ResultState state = ResultState::kUnmeasured;
  std::string reason;           // why not timed, or empty
  double median_seconds = 0;    // device time; meaningful only when kTimed
  double spread = 0;            // relative: interquartile range / median
  int samples = 0;
  double max_abs_error = 0;     // oracle figures, when the oracle ran
  double max_rel_error = 0;     // max|c-ref| / max|ref|
  bool timed() const { return state == ResultState::kTimed; }
};

// Where the host wall time of one measurement went, phase by phase; the daemon
// exports it as arbiter_tuning_phase_seconds{phase} and logs it with the verdict.
struct TuningCost {
  double setup = 0;        // operands generated, allocated and copied to the device
  double reference = 0;    // the f64 reference, once per measurement
  double oracle = 0;       // each candidate's run on poisoned C, checked against the reference
  double determinism = 0;  // the claim re-runs and their bitwise comparison
  double warmup = 0;       // untimed interleaved rounds before sampling
  double flush = 0;        // cold-cache flushes before each timed sample, enqueued (a flush on
                           // a device runs on into `timing`, not waited for on its own)
  double timing = 0;       // the timed samples (host time around each)
  double device = 0;       // device time of the timed samples: part of `timing`
  int rounds = 0;          // interleaved timing rounds
  int64_t rows_checked = 0;  // rows of C checked against the reference (M when all of them)

  // Each phase by name, in the order above (`device` is not a phase of its own).
  std::vector<std::pair<const char*, double>> Phases() const;
  double Total() const;  // the sum of the phases
};
std::ostream& operator<<(std::ostream& os, const TuningCost& c);  // "12.3ms: setup 0.1ms 1%, ..."

// What part of its bucket a verdict serves. A bucket's verdict serves all of it;
// a refinement serves one exact shape; a half of a split bucket serves the
// shapes whose `dim` lies in (lo, hi] (refinement.h decides which).
struct VerdictScope {
  enum class Kind { kBucket = 0, kShape = 1, kHalf = 2 };
  Kind kind = Kind::kBucket;
  int64_t m = 0, n = 0, k = 0;  // kShape: the shape served
  char dim = 0;                 // kHalf: 'm', 'n' or 'k'
  int64_t lo = 0, hi = 0;       // kHalf: the range (lo, hi] of `dim` served

  static VerdictScope Shape(const Problem& p);
  static VerdictScope Half(char dim, int64_t lo, int64_t hi);
  bool whole() const { return kind == Kind::kBucket; }
  // Whether `p` (a shape of the verdict's bucket) is served by this scope.
  bool Contains(const Problem& p) const;
  // "" (whole bucket), "40x48x56" (a shape) or "m(32,48]" (a half).
  std::string ToString() const;
  static std::optional<VerdictScope> Parse(std::string_view text);
  bool operator==(const VerdictScope&) const = default;
};

// Transfer: how the bucket's winner fares at a shape measured inside its bucket
// (the bucket's own measured shape, a refinement, a split half). Both times are
// medians measured at that shape in the same race.
struct Transfer {
  std::string bucket_winner;
  double bucket_winner_seconds = 0;  // 0 when the bucket's winner was not timed there
  std::string best;                  // the fastest timed there
  double best_seconds = 0;
  // The bucket winner's time over the best's; 0 when either is unknown.
  double regret() const {
    return bucket_winner_seconds > 0 && best_seconds > 0 ? bucket_winner_seconds / best_seconds : 0;
  }
};

struct Verdict {
  std::string fingerprint;    // DeviceInfo::Fingerprint()
  DType dtype = DType::kF32;
  Bucket bucket;
  std::string candidates;     // "name@version,..." of every candidate raced, sorted
  std::string winner;
  int winner_version = 0;
  VerdictSource source = VerdictSource::kMeasured;
  std::string reason;         // why the winner won, with the numbers
  Problem measured;           // the shape the figures were taken on
  std::vector<CandidateResult> results;
  int64_t created_unix = 0;
  TuningCost cost;               // what measuring it took
  double sm_clock_min_mhz = 0;   // the SM clock seen during the timed rounds; 0 where the
  double sm_clock_max_mhz = 0;   // device reports none
  VerdictScope scope;            // what part of the bucket it serves: all of it by default
  // A bucket's verdict as served: its fresh refinements and split halves, each a
  // verdict of its own in the store (loaded with it by LoadBucketVerdicts).
  std::vector<Verdict> scoped;
  // Listing only, derived: how the bucket's winner fares at this verdict's shape.
  std::optional<Transfer> transfer;

  const CandidateResult* Result(std::string_view name) const;
};

std::ostream& operator<<(std::ostream& os, const CandidateResult& r);

// The text a store keys a verdict by: its bucket's, then "/" and its scope's when
// it serves less than the whole bucket ("m(32,64]a8.n(32,64]a8.k(32,64]a8/40x48x56").
// A store filtering by bucket matches the bucket's text and that text followed by "/".
std::string StoreKeyOf(const Bucket& bucket, const VerdictScope& scope);
// The bucket and scope of a stored key; nullopt when the text is not one.
std::optional<std::pair<Bucket, VerdictScope>> ParseStoreKey(const std::string& text);
std::ostream& operator<<(std::ostream& os, const Verdict& v);

}  // namespace arbiter
