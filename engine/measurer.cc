#include "engine/measurer.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/oracle.h"

namespace arbiter {

namespace {

double Quantile(const std::vector<double>& sorted, double q) {
  const double pos = q * (sorted.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo);
}

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Runs the member once on poisoned C and copies C back to `host_c`.
absl::Status RunOnce(const CandidateMember& member, const GemmArgs& args, Buffer& c,
                     std::vector<uint8_t>* host_c) {
  Stream& s = *args.stream;
  const size_t count = static_cast<size_t>(args.problem.m * args.problem.n);
  RETURN_IF_ERROR(s.Poison(c, args.problem.dtype, count));
  RETURN_IF_ERROR(member.run(args));
  RETURN_IF_ERROR(s.Synchronize());
  host_c->resize(args.problem.c_bytes());
  return s.CopyToHost(host_c->data(), c, args.problem.c_bytes());
}

size_t BitwiseDifferences(const std::vector<uint8_t>& x, const std::vector<uint8_t>& y,
                          size_t elem, size_t count) {
  size_t diff = 0;
  for (size_t i = 0; i < count; ++i) {
    if (std::memcmp(x.data() + i * elem, y.data() + i * elem, elem) != 0) ++diff;
  }
  return diff;
}

// The smaller M used to check batch invariance: about half of M, allowed by coverage. 0 if none.
int64_t SmallerM(const ShapeCoverage& shape, int64_t m) {
  int64_t m2 = (m / 2) / shape.align_m * shape.align_m;
  if (m2 < shape.min_m || m2 < 1 || m2 >= m) return 0;
  return m2;
}

}  // namespace

SampleStats Summarize(std::vector<double> samples) {
  SampleStats s;
  s.count = static_cast<int>(samples.size());
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  s.median = Quantile(samples, 0.5);
  s.spread = s.median > 0 ? (Quantile(samples, 0.75) - Quantile(samples, 0.25)) / s.median : 0;
  return s;
}

void FillRandom(DType dtype, void* data, size_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 0.5);
  for (size_t i = 0; i < count; ++i) {
    double v = normal(rng);
    if (v == 0.0) v = 0.25;  // never zeros
    StoreFromDouble(dtype, data, i, v);
  }
}

absl::StatusOr<std::vector<Measurement>> Measurer::Measure(
    const Problem& p, const std::vector<const RegisteredCandidate*>& candidates) {
  const uint64_t seed = options_.seed ? options_.seed : std::random_device{}();
  std::vector<uint8_t> host_a(p.a_bytes()), host_b(p.b_bytes());
  FillRandom(p.dtype, host_a.data(), static_cast<size_t>(p.m * p.k), seed);
  FillRandom(p.dtype, host_b.data(), static_cast<size_t>(p.k * p.n), seed ^ 0x9e3779b97f4a7c15ull);

  ASSIGN_OR_RETURN(std::unique_ptr<Buffer> a, backend_.Allocate(p.a_bytes()));
  ASSIGN_OR_RETURN(std::unique_ptr<Buffer> b, backend_.Allocate(p.b_bytes()));
  ASSIGN_OR_RETURN(std::unique_ptr<Buffer> c, backend_.Allocate(p.c_bytes()));
  RETURN_IF_ERROR(stream_.CopyToDevice(*a, host_a.data(), p.a_bytes()));
  RETURN_IF_ERROR(stream_.CopyToDevice(*b, host_b.data(), p.b_bytes()));
  std::vector<double> ref;
  RETURN_IF_ERROR(stream_.Reference(p, *a, *b, &ref));

  const GemmArgs args{p, a->data(), b->data(), c->data(), &stream_};
  double best_median = 0;
  std::vector<Measurement> out;
  // The bucket budget covers the candidates' runs, not preparing operands and
  // reference; the first candidate always gets at least one timed sample.
  started_ = Clock::now();
  yielded_ = Clock::duration::zero();
  bool launched = false;
  for (const RegisteredCandidate* rc : candidates) {
    RETURN_IF_ERROR(Checkpoint());
    Measurement meas;
    CandidateResult& r = meas.result;
    r.name = rc->spec.name;
    r.version = rc->spec.version;
    r.tier = rc->spec.tier;
    const CandidateMember* member = rc->spec.Member(p.dtype);
    if (member == nullptr) {
      r.state = ResultState::kUnmeasured;
      r.reason = absl::StrCat("no ", DTypeName(p.dtype), " entry point");
    } else if (launched && BucketBudgetSpent()) {
      r.determinism = member->contract.determinism;
      r.state = ResultState::kUnmeasured;
      r.reason = absl::StrFormat("the bucket's budget (%gs holding the device) was spent before its turn",
                                 options_.bucket_budget_seconds);
    } else {
      r.determinism = member->contract.determinism;
      std::vector<uint8_t> first;
      launched = true;
      Launching(rc->spec, "oracle");
      if (!PassesOracle(*member, args, *c, ref, &r, &first)) {
        out.push_back(std::move(meas));
        continue;
      }
      RETURN_IF_ERROR(Checkpoint());
      const bool rerun = options_.check_determinism && r.determinism >= Determinism::kRunToRun;
      if (rerun) Launching(rc->spec, "determinism");
      const bool holds = HoldsDeterminismClaims(*member, args, *c, first, &meas);
      if (rerun) RETURN_IF_ERROR(Checkpoint());
      if (holds) {
        Launching(rc->spec, "timing");
        RETURN_IF_ERROR(TimeOnDevice(*member, args, best_median, &r));
        if (r.timed() && (best_median == 0 || r.median_seconds < best_median)) {
          best_median = r.median_seconds;
        }
      }
    }
    out.push_back(std::move(meas));
  }
  return out;
}

void Measurer::Launching(const CandidateSpec& candidate, std::string_view phase) {
  if (hooks_ != nullptr) hooks_->Launching(candidate, phase);
}

absl::Status Measurer::Checkpoint() {
  if (hooks_ == nullptr) return absl::OkStatus();
  const Clock::time_point t0 = Clock::now();
  absl::Status s = hooks_->Checkpoint();
  yielded_ += Clock::now() - t0;
  return s;
}

bool Measurer::BucketBudgetSpent() const {
  const double held = std::chrono::duration<double>(Clock::now() - started_ - yielded_).count();
  return held >= options_.bucket_budget_seconds;
}

bool Measurer::PassesOracle(const CandidateMember& member, const GemmArgs& args, Buffer& c,
                            const std::vector<double>& ref, CandidateResult* r,
                            std::vector<uint8_t>* out) {
  if (absl::Status s = RunOnce(member, args, c, out); !s.ok()) {
    r->state = ResultState::kError;
    r->reason = absl::StrCat("run failed: ", s.ToString());
    return false;
  }
  const OracleReport report = CheckOutput(args.problem, member.contract.accuracy, out->data(), ref);
  r->max_abs_error = report.max_abs_error;
  r->max_rel_error = report.max_rel_error;
  if (!report.pass) {
    r->state = ResultState::kFailedOracle;
    r->reason = report.detail;
    return false;
  }
  return true;
}

bool Measurer::HoldsDeterminismClaims(const CandidateMember& member, const GemmArgs& args,
                                      Buffer& c, const std::vector<uint8_t>& first,
                                      Measurement* meas) {
  if (!options_.check_determinism) return true;
  const Problem& p = args.problem;
  CandidateResult& r = meas->result;
  const size_t elem = ElementSize(p.dtype);
  const size_t count = static_cast<size_t>(p.m * p.n);
  if (r.determinism >= Determinism::kRunToRun) {
    std::vector<uint8_t> second;
    absl::Status s = RunOnce(member, args, c, &second);
    const size_t diff = s.ok() ? BitwiseDifferences(first, second, elem, count) : count;
    if (!s.ok() || diff > 0) {
      r.state = ResultState::kQuarantined;
      r.reason = s.ok() ? absl::StrCat("run_to_run claim failed: ", diff, " of ", count,
                                       " elements differ bitwise between two runs on identical inputs (",
                                       p.ToString(), ")")
                        : absl::StrCat("second run failed: ", s.ToString());
      meas->claim_violation = s.ok();
      return false;
    }
  }
  if (r.determinism == Determinism::kBatchInvariant) {
    if (const int64_t m2 = SmallerM(member.contract.shape, p.m); m2 > 0) {
      Problem sub = p;
      sub.m = m2;
      std::vector<uint8_t> rows;
      absl::Status s = RunOnce(member, GemmArgs{sub, args.a, args.b, args.c, args.stream}, c, &rows);
      const size_t sub_count = static_cast<size_t>(m2 * p.n);
      const size_t diff = s.ok() ? BitwiseDifferences(first, rows, elem, sub_count) : sub_count;
      if (!s.ok() || diff > 0) {
        r.state = ResultState::kQuarantined;
        r.reason = s.ok() ? absl::StrCat("batch_invariant claim failed: ", diff, " of ", sub_count,
                                         " elements of the first ", m2, " rows differ between M=", p.m,
                                         " and M=", m2, " (", p.ToString(), ")")
                          : absl::StrCat("run at M=", m2, " failed: ", s.ToString());
        meas->claim_violation = s.ok();
        return false;
      }
    }
  }
  return true;
}

absl::Status Measurer::TimeOnDevice(const CandidateMember& member, const GemmArgs& args,
                                    double best_median, CandidateResult* r) {
  absl::Status run_status;
  for (int i = 0; i < options_.warmup_runs && run_status.ok(); ++i) {
    run_status = member.run(args);
  }
  if (run_status.ok()) run_status = stream_.Synchronize();
  std::vector<double> samples;
  std::string stopped;
  const Clock::time_point t0 = Clock::now();
  while (run_status.ok() && static_cast<int>(samples.size()) < options_.max_samples) {
    if (options_.cold_cache) run_status = stream_.FlushCache();
    if (run_status.ok()) run_status = stream_.TimerStart();
    if (run_status.ok()) run_status = member.run(args);
    if (run_status.ok()) run_status = stream_.TimerStop();
    if (!run_status.ok()) break;
    absl::StatusOr<double> t = stream_.ElapsedSeconds();
    if (!t.ok()) {
      run_status = t.status();
      break;
    }
    samples.push_back(*t);
    const SampleStats st = Summarize(samples);
    const double spent = SecondsSince(t0);  // wall time: the budget covers sampling overheads too
    if (st.count >= options_.min_samples && st.spread <= options_.stable_spread) break;
    if (BucketBudgetSpent()) {
      stopped = absl::StrFormat("the bucket's budget (%gs holding the device) was spent after %d samples",
                                options_.bucket_budget_seconds, st.count);
      break;
    }
    if (st.count >= options_.min_samples && spent > options_.budget_seconds) {
      stopped = "time budget spent before the median was stable";
      break;
    }
    // A candidate already 10x slower than the best so far cannot win: don't spend the budget.
    if (st.count >= 3 && best_median > 0 && st.median > 10 * best_median) {
      stopped = absl::StrFormat("stopped early: over 10x the best median (%.3gus)", best_median * 1e6);
      break;
    }
    if (spent > 4 * options_.budget_seconds) {
      stopped = "hard time limit reached";
      break;
    }
    RETURN_IF_ERROR(Checkpoint());  // the sample is complete: nothing in flight
  }
  if (!run_status.ok()) {
    r->state = ResultState::kError;
    r->reason = absl::StrCat("timing failed: ", run_status.ToString());
    return absl::OkStatus();
  }
  const SampleStats st = Summarize(samples);
  r->state = ResultState::kTimed;
  r->median_seconds = st.median;
  r->spread = st.spread;
  r->samples = st.count;
  r->reason = stopped;
  return absl::OkStatus();
}

}  // namespace arbiter
