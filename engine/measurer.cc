#include "engine/measurer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "engine/oracle.h"

namespace arbiter {

namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Adds the host wall time of its scope to one phase of a TuningCost.
class PhaseTimer {
 public:
  explicit PhaseTimer(double* phase) : phase_(phase), t0_(Clock::now()) {}
  ~PhaseTimer() { *phase_ += SecondsSince(t0_); }
  PhaseTimer(const PhaseTimer&) = delete;
  PhaseTimer& operator=(const PhaseTimer&) = delete;

 private:
  double* phase_;
  Clock::time_point t0_;
};

// The smaller M used to check batch invariance: about half of M, allowed by coverage. 0 if none.
int64_t SmallerM(const ShapeCoverage& shape, int64_t m) {
  int64_t m2 = (m / 2) / shape.align_m * shape.align_m;
  if (m2 < shape.min_m || m2 < 1 || m2 >= m) return 0;
  return m2;
}

std::string Us(double seconds) { return absl::StrFormat("%.3gus", seconds * 1e6); }

absl::Status CancelledRace(const Problem& p) {
  return absl::CancelledError(absl::StrCat("measurement of ", p.ToString(), " cancelled"));
}

}  // namespace

std::string RaceExtension::ToString() const {
  if (candidates.empty()) return "";
  return absl::StrFormat("%s timed %d more paired round%s (%.3gms of device time): %s",
                         absl::StrJoin(candidates, " and "), rounds, rounds == 1 ? "" : "s",
                         device_seconds * 1e3, ended);
}

struct Measurer::Operands {
  Problem p;
  std::unique_ptr<Buffer> a, b, c;
  std::unique_ptr<Buffer> c2;  // a second C for the claim re-runs, allocated when first needed
  std::vector<int64_t> rows;   // the rows of C checked against the reference, sorted
  std::vector<double> ref;     // the reference of those rows, packed
  TuningCost* cost = nullptr;

  bool all_rows() const { return static_cast<int64_t>(rows.size()) == p.m; }
  size_t count() const { return static_cast<size_t>(p.m * p.n); }
  GemmArgs Args(Stream& s) const { return GemmArgs{p, a->data(), b->data(), c->data(), &s}; }
};

struct Measurer::Entrant {
  const CandidateSpec* spec = nullptr;
  const CandidateMember* member = nullptr;
  CandidateResult* result = nullptr;
  std::vector<double> samples;  // device seconds, in the order taken
  std::vector<int> rounds;      // the timing round each of `samples` was taken in
  double device = 0;            // their sum
  bool active = true;           // still sampling
  std::string stopped;          // why it stopped before its median was stable, if it did
  std::string hold_note;        // its samples' hold expired (Stream::LastHoldExpired), if one did
  absl::Status error;           // a run or the timer failed
  Measurement* measurement = nullptr;  // whose result `result` is
  double oracle_run = 0;        // device seconds of its oracle run (warm, not a sample)
  std::string claim_deferred_behind;   // its claim check waits for the race: a candidate that
                                       // holds the same claim ran far faster; empty otherwise
};

absl::StatusOr<std::vector<Measurement>> Measurer::Measure(
    const Problem& p, const std::vector<const RegisteredCandidate*>& candidates) {
  ASSIGN_OR_RETURN(MeasureReport report, Race(p, candidates));
  return std::move(report.measurements);
}

absl::StatusOr<MeasureReport> Measurer::Race(
    const Problem& p, const std::vector<const RegisteredCandidate*>& candidates) {
  MeasureReport report;
  report.samples = RaceSamples(options_.min_samples);
  Operands ops;
  ops.p = p;
  ops.cost = &report.cost;
  RETURN_IF_ERROR(PrepareOperands(ops));
  ASSIGN_OR_RETURN(std::vector<Entrant> entrants, CheckCandidates(candidates, ops, &report));
  RETURN_IF_ERROR(TimePaired(entrants, ops, &report));
  for (Entrant& e : entrants) {
    WriteResult(e);
    for (size_t i = 0; i < e.samples.size(); ++i) {
      report.samples.Add(e.result->name, e.rounds[i], e.samples[i]);
    }
  }
  RETURN_IF_ERROR(ExtendCloseRace(entrants, ops, &report));
  RETURN_IF_ERROR(CheckDeferredClaims(entrants, ops));
  return report;
}

absl::Status Measurer::PrepareOperands(Operands& ops) {
  const Problem& p = ops.p;
  TuningCost& cost = *ops.cost;
  {
    PhaseTimer phase(&cost.setup);
    const uint64_t seed = options_.seed ? options_.seed : std::random_device{}();
    ASSIGN_OR_RETURN(ops.a, backend_.Allocate(p.a_bytes()));
    ASSIGN_OR_RETURN(ops.b, backend_.Allocate(p.b_bytes()));
    ASSIGN_OR_RETURN(ops.c, backend_.Allocate(p.c_bytes()));
    // Where the stream can, on the device: no host fill of M*K + K*N elements, no copy.
    RETURN_IF_ERROR(stream_.FillRandom(*ops.a, p.dtype, static_cast<size_t>(p.m * p.k), seed));
    RETURN_IF_ERROR(stream_.FillRandom(*ops.b, p.dtype, static_cast<size_t>(p.k * p.n),
                                       seed ^ 0x9e3779b97f4a7c15ull));
    RETURN_IF_ERROR(stream_.Synchronize());
  }
  {
    // Once for every candidate: the operands are the same for all of them.
    PhaseTimer phase(&cost.reference);
    const double volume = static_cast<double>(p.m) * static_cast<double>(p.n) * p.k;
    ops.rows = SampledRows(p.m, volume <= options_.oracle_full_volume ? p.m : options_.oracle_rows);
    if (ops.all_rows()) {
      RETURN_IF_ERROR(stream_.Reference(p, *ops.a, *ops.b, &ops.ref));
    } else {
      RETURN_IF_ERROR(stream_.ReferenceRows(p, *ops.a, *ops.b, ops.rows, &ops.ref));
    }
  }
  cost.rows_checked = static_cast<int64_t>(ops.rows.size());
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Measurer::Entrant>> Measurer::CheckCandidates(
    const std::vector<const RegisteredCandidate*>& candidates, Operands& ops,
    MeasureReport* report) {
  const Problem& p = ops.p;
  report->measurements.reserve(candidates.size());  // entrants and holders point into it
  std::vector<Entrant> entrants;
  // Candidates that passed and hold their claims, with their checked run's device time.
  struct Holder {
    const std::string* name;
    Determinism claim;
    double seconds;
  };
  std::vector<Holder> holders;
  for (const RegisteredCandidate* rc : candidates) {
    RETURN_IF_ERROR(Checkpoint());
    if (Cancelled()) return CancelledRace(p);
    Measurement& meas = report->measurements.emplace_back();
    CandidateResult& r = meas.result;
    r.name = rc->spec.name;
    r.version = rc->spec.version;
    r.tier = rc->spec.tier;
    const CandidateMember* member = rc->spec.Member(p.dtype);
    if (member == nullptr) {
      r.state = ResultState::kUnmeasured;
      r.reason = absl::StrCat("no ", DTypeName(p.dtype), " entry point");
      continue;
    }
    r.determinism = member->contract.determinism;
    Launching(rc->spec, "oracle");
    double checked_run = 0;
    if (!PassesOracle(*member, ops, &r, &report->cost, &checked_run)) continue;
    // Far slower than a candidate that holds the same claim, it can only matter if
    // its checked run was slow by accident (a module loaded on first launch): its
    // claim is checked after the race, and only if the race says it can matter.
    const Holder* faster = nullptr;
    if (options_.check_determinism && r.determinism >= Determinism::kRunToRun) {
      for (const Holder& h : holders) {
        if (h.claim >= r.determinism && h.seconds * options_.hopeless_factor < checked_run) {
          faster = &h;
          break;
        }
      }
    }
    if (faster == nullptr) {
      RETURN_IF_ERROR(Checkpoint());
      Launching(rc->spec, "determinism");
      if (!HoldsDeterminismClaims(*member, ops, &meas)) continue;
      holders.push_back({&r.name, r.determinism, checked_run});
    }
    Entrant& e = entrants.emplace_back();
    e.measurement = &meas;
    e.result = &r;
    e.spec = &rc->spec;
    e.member = member;
    e.claim_deferred_behind = faster ? *faster->name : "";
    e.oracle_run = checked_run;
  }
  ops.c2.reset();
  return entrants;
}

absl::Status Measurer::CheckDeferredClaims(std::vector<Entrant>& entrants, Operands& ops) {
  double best = 0;
  for (const Entrant& e : entrants) {
    const CandidateResult& r = *e.result;
    if (r.timed() && (best == 0 || r.median_seconds < best)) best = r.median_seconds;
  }
  for (Entrant& e : entrants) {
    CandidateResult& r = *e.result;
    if (e.claim_deferred_behind.empty() || !r.timed()) continue;
    if (r.median_seconds > options_.hopeless_factor * best) {
      // It cannot be served where the claim matters: a faster candidate holds it.
      absl::StrAppend(&r.reason, r.reason.empty() ? "" : "; ", DeterminismName(r.determinism),
                      " claim not checked: over ", absl::StrFormat("%g", options_.hopeless_factor),
                      "x slower than ", e.claim_deferred_behind,
                      ", which holds it; recorded as nondeterministic");
      r.determinism = Determinism::kNondeterministic;
      continue;
    }
    // Fast after all: its claim is checked as any other's, against a fresh first run.
    RETURN_IF_ERROR(Checkpoint());
    Launching(*e.spec, "determinism");
    absl::Status s;
    {
      PhaseTimer phase(&ops.cost->determinism);
      s = stream_.Poison(*ops.c, ops.p.dtype, ops.count());
      if (s.ok()) s = e.member->run(ops.Args(stream_));
      if (s.ok()) s = stream_.Synchronize();
    }
    if (!s.ok()) {
      r.state = ResultState::kError;
      r.reason = absl::StrCat("run before the claim check failed: ", s.ToString());
      continue;
    }
    HoldsDeterminismClaims(*e.member, ops, e.measurement);
  }
  ops.c2.reset();
  return absl::OkStatus();
}

bool Measurer::PassesOracle(const CandidateMember& member, Operands& ops, CandidateResult* r,
                            TuningCost* cost, double* seconds) {
  PhaseTimer phase(&cost->oracle);
  const Problem& p = ops.p;
  absl::Status s = stream_.Poison(*ops.c, p.dtype, ops.count());
  if (s.ok()) s = stream_.TimerStart();
  if (s.ok()) s = member.run(ops.Args(stream_));
  if (s.ok()) s = stream_.TimerStop();
  if (s.ok()) s = stream_.Synchronize();
  if (s.ok()) {
    absl::StatusOr<double> elapsed = stream_.ElapsedSeconds();
    if (elapsed.ok()) *seconds = *elapsed;
    s = elapsed.status();
  }
  if (!s.ok()) {
    r->state = ResultState::kError;
    r->reason = absl::StrCat("run failed: ", s.ToString());
    return false;
  }
  // Every element of C must be finite, rows checked or not: an unwritten element is NaN.
  absl::StatusOr<int64_t> nonfinite = stream_.CountNonFinite(*ops.c, p.dtype, ops.count());
  const size_t row_bytes = static_cast<size_t>(p.n) * ElementSize(p.dtype);
  std::vector<uint8_t> rows(ops.rows.size() * row_bytes);
  if (nonfinite.ok()) {
    s = ops.all_rows() ? stream_.CopyToHost(rows.data(), *ops.c, rows.size())
                       : stream_.CopyRowsToHost(rows.data(), *ops.c, row_bytes, ops.rows);
  }
  if (!nonfinite.ok() || !s.ok()) {
    r->state = ResultState::kError;
    r->reason = absl::StrCat("reading C failed: ",
                             (nonfinite.ok() ? s : nonfinite.status()).ToString());
    return false;
  }
  const OracleReport report =
      ops.all_rows() ? CheckOutput(p, member.contract.accuracy, rows.data(), ops.ref)
                     : CheckRows(p, member.contract.accuracy, rows.data(), ops.ref, ops.rows);
  r->max_abs_error = report.max_abs_error;
  r->max_rel_error = report.max_rel_error;
  if (!report.pass || *nonfinite > 0) {
    r->state = ResultState::kFailedOracle;
    r->reason = report.detail;
    if (*nonfinite > report.nonfinite) {
      r->reason = absl::StrCat(*nonfinite, " of ", ops.count(),
                               " elements of C non-finite (unwritten, NaN or Inf); ", report.detail);
    }
    return false;
  }
  return true;
}

bool Measurer::HoldsDeterminismClaims(const CandidateMember& member, Operands& ops,
                                      Measurement* meas) {
  CandidateResult& r = meas->result;
  if (!options_.check_determinism || r.determinism < Determinism::kRunToRun) return true;
  PhaseTimer phase(&ops.cost->determinism);
  const Problem& p = ops.p;
  if (ops.c2 == nullptr) {
    absl::StatusOr<std::unique_ptr<Buffer>> c2 = backend_.Allocate(p.c_bytes());
    if (!c2.ok()) {
      r.state = ResultState::kError;
      r.reason = absl::StrCat("allocating C for the claim check failed: ", c2.status().ToString());
      return false;
    }
    ops.c2 = *std::move(c2);
  }
  // Runs `q` (p, or p with a smaller M) into the poisoned second C and counts the
  // elements of its first rows that differ bitwise from the first run's C.
  auto rerun = [&](const Problem& q) -> absl::StatusOr<int64_t> {
    const size_t count = static_cast<size_t>(q.m * q.n);
    RETURN_IF_ERROR(stream_.Poison(*ops.c2, q.dtype, count));
    RETURN_IF_ERROR(member.run(GemmArgs{q, ops.a->data(), ops.b->data(), ops.c2->data(), &stream_}));
    RETURN_IF_ERROR(stream_.Synchronize());
    return stream_.CountDifferences(*ops.c, *ops.c2, q.dtype, count);
  };
  const size_t count = ops.count();
  absl::StatusOr<int64_t> diff = rerun(p);
  if (!diff.ok() || *diff > 0) {
    r.state = ResultState::kQuarantined;
    r.reason = diff.ok() ? absl::StrCat("run_to_run claim failed: ", *diff, " of ", count,
                                        " elements differ bitwise between two runs on identical "
                                        "inputs (", p.ToString(), ")")
                         : absl::StrCat("second run failed: ", diff.status().ToString());
    meas->claim_violation = diff.ok();
    return false;
  }
  if (r.determinism == Determinism::kBatchInvariant) {
    if (const int64_t m2 = SmallerM(member.contract.shape, p.m); m2 > 0) {
      Problem sub = p;
      sub.m = m2;
      const size_t sub_count = static_cast<size_t>(m2 * p.n);
      diff = rerun(sub);
      if (!diff.ok() || *diff > 0) {
        r.state = ResultState::kQuarantined;
        r.reason = diff.ok() ? absl::StrCat("batch_invariant claim failed: ", *diff, " of ",
                                            sub_count, " elements of the first ", m2,
                                            " rows differ between M=", p.m, " and M=", m2, " (",
                                            p.ToString(), ")")
                             : absl::StrCat("run at M=", m2, " failed: ", diff.status().ToString());
        meas->claim_violation = diff.ok();
        return false;
      }
    }
  }
  return true;
}

absl::Status Measurer::TimePaired(std::vector<Entrant>& entrants, const Operands& ops,
                                  MeasureReport* report) {
  if (entrants.empty()) return absl::OkStatus();
  // The last candidate checked may have faulted the device: seen here, while the
  // hooks still name it, before the warmup names another.
  RETURN_IF_ERROR(Checkpoint());
  const GemmArgs args = ops.Args(stream_);
  ASSIGN_OR_RETURN(const bool warm, Warmup(entrants, args, &report->cost));
  if (!warm) return absl::OkStatus();  // every entrant carries the error

  const size_t n = entrants.size();
  const Clock::time_point t0 = Clock::now();
  for (int round = 0; std::any_of(entrants.begin(), entrants.end(), [](const Entrant& e) {
         return e.active;
       });
       ++round) {
    for (size_t j : RoundOrder(n, round)) {
      Entrant& e = entrants[j];
      if (!e.active) continue;
      RETURN_IF_ERROR(TimeSample(e, round, args, report));
      if (!e.error.ok()) e.active = false;
    }
    report->cost.rounds = round + 1;
    ReadClock(report);
    StopSampling(entrants, round, SecondsSince(t0), report->cost);
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> Measurer::Warmup(std::vector<Entrant>& entrants, const GemmArgs& args,
                                      TuningCost* cost) {
  PhaseTimer phase(&cost->warmup);
  for (int w = 0; w < options_.warmup_runs; ++w) {
    for (Entrant& e : entrants) {
      if (Cancelled()) return CancelledRace(args.problem);
      if (!e.active) continue;
      Launching(*e.spec, "timing");
      e.error = e.member->run(args);
      e.active = e.error.ok();
    }
  }
  // One flush before any sample: what it sets up the first time (a CUDA stream's
  // flush buffer) may wait for the device, and samples flush behind a launch hold.
  absl::Status s = options_.cold_cache ? stream_.FlushCache() : absl::OkStatus();
  if (s.ok()) s = stream_.Synchronize();
  if (!s.ok()) {
    for (Entrant& e : entrants) e.error.Update(s);
    return false;
  }
  return true;
}

double Measurer::RoundRatio(const Entrant& e, const Entrant& best, int round) const {
  if (e.rounds.empty() || e.rounds.back() != round) return 0.0;
  if (!(e.oracle_run > options_.hopeless_factor * best.oracle_run)) return 0.0;
  for (size_t i = best.rounds.size(); i-- > 0 && best.rounds[i] >= round;) {
    if (best.rounds[i] == round && best.samples[i] > 0) return e.samples.back() / best.samples[i];
  }
  return 0.0;
}

void Measurer::StopSampling(std::vector<Entrant>& entrants, int round, double wall,
                            const TuningCost& cost) const {
  const double share = options_.device_budget_seconds / static_cast<double>(entrants.size());
  // The fastest so far, by median, among those with samples.
  const Entrant* best = nullptr;
  SampleStats best_st;
  for (const Entrant& e : entrants) {
    if (!e.error.ok() || e.samples.empty()) continue;
    const SampleStats st = Summarize(e.samples);
    if (best == nullptr || st.median < best_st.median) {
      best = &e;
      best_st = st;
    }
  }
  // The timed rounds leave extend_reserve of the budget to a close race's extra rounds.
  const double reserve = std::clamp(options_.extend_reserve, 0.0, 1.0);
  const bool device_spent = cost.device >= options_.device_budget_seconds * (1 - reserve);
  const bool budget_spent = device_spent || wall >= options_.wall_budget_seconds;
  const bool out_of_time = wall > options_.wall_limit_seconds;
  for (Entrant& e : entrants) {
    if (!e.active) continue;
    const SampleStats st = Summarize(e.samples);
    const bool enough = st.count >= options_.min_samples;
    if (st.count >= options_.max_samples || (enough && st.spread <= options_.stable_spread)) {
      e.active = false;
    } else if (&e != best && enough && best_st.count >= options_.min_samples &&
               st.q1 > best_st.q3) {
      // Even its faster samples are slower than the best's slower ones.
      e.active = false;
      e.stopped = absl::StrCat("stopped: cannot win, lower quartile ", Us(st.q1),
                               " above the best's upper quartile ", Us(best_st.q3));
    } else if (best != nullptr && &e != best &&
               st.median > options_.hopeless_factor * best_st.median &&
               (st.count >= 3 || e.device >= share)) {
      e.active = false;
      e.stopped = absl::StrFormat("stopped early: over %gx the best median (%s)",
                                  options_.hopeless_factor, Us(best_st.median));
    } else if (best != nullptr && &e != best &&
               st.median > options_.hopeless_factor * best_st.median &&
               RoundRatio(e, *best, round) > options_.hopeless_factor) {
      // Cold, back to back in one round, it took over hopeless_factor times the best's
      // time, and so did its oracle run: what a round's samples share cannot make up that
      // much, so one sample is enough (a slow generic kernel costs one timed run, not three).
      e.active = false;
      e.stopped = absl::StrFormat(
          "stopped early: %.3gx the best (%s) in round %d and its oracle run over %gx; "
          "%d sample%s",
          RoundRatio(e, *best, round), best->spec->name, round, options_.hopeless_factor,
          st.count, st.count == 1 ? "" : "s");
    } else if (budget_spent && enough) {
      e.active = false;
      e.stopped = device_spent ? "device-time budget spent before the median was stable"
                               : "host-time budget spent before the median was stable";
    } else if (out_of_time) {
      e.active = false;
      e.stopped = "wall-clock limit reached before the median was stable";
    }
  }
}

void Measurer::WriteResult(Entrant& e) {
  CandidateResult& r = *e.result;
  if (!e.error.ok()) {
    r.state = ResultState::kError;
    r.reason = absl::StrCat("timing failed: ", e.error.ToString());
    r.median_seconds = 0;
    r.spread = 0;
    return;
  }
  const SampleStats st = Summarize(e.samples);
  r.state = ResultState::kTimed;
  r.median_seconds = st.median;
  r.spread = st.spread;
  r.samples = st.count;
  r.reason = e.hold_note.empty() ? e.stopped
             : e.stopped.empty() ? e.hold_note
                                 : absl::StrCat(e.stopped, "; ", e.hold_note);
}

void Measurer::ReadClock(MeasureReport* report) {
  if (std::optional<double> mhz = backend_.SmClockMhz()) {
    report->sm_clock_min_mhz =
        report->sm_clock_min_mhz == 0 ? *mhz : std::min(report->sm_clock_min_mhz, *mhz);
    report->sm_clock_max_mhz = std::max(report->sm_clock_max_mhz, *mhz);
  }
}

absl::Status Measurer::TimeSample(Entrant& e, int round, const GemmArgs& args,
                                  MeasureReport* report) {
  TuningCost& cost = report->cost;
  RETURN_IF_ERROR(Checkpoint());  // the last sample is complete: nothing in flight
  if (Cancelled()) return CancelledRace(args.problem);
  Launching(*e.spec, "timing");
  absl::Status s;
  // Not held once a hold expired on it: its launch waits for the device, so each
  // hold would only stall the sample for the hold's whole bound.
  ScopedLaunchHold hold(stream_, options_.hold_launches && e.hold_note.empty());
  s = hold.status();
  if (s.ok() && options_.cold_cache) {
    // Enqueued, not waited for: the start event follows the flush in stream
    // order, and the host enqueues the candidate while the flush runs. Waiting
    // here put the candidate's host-side launch inside the timed window (on the
    // H200 +4 us for our kernels, +11 us for cublasGemmEx, enough to flip ranks
    // of small problems: bench/results/small-gemm-floor-h200.md).
    PhaseTimer phase(&cost.flush);
    s = stream_.FlushCache();
  }
  absl::StatusOr<double> t = absl::UnknownError("not timed");
  {
    PhaseTimer phase(&cost.timing);
    if (s.ok()) s = stream_.TimerStart();
    if (s.ok()) s = e.member->run(args);
    if (s.ok()) s = stream_.TimerStop();
    hold.Release();
    t = s.ok() ? stream_.ElapsedSeconds() : absl::StatusOr<double>(s);
  }
  if (t.ok() && hold.Expired()) {
    // Its launch waited for the device (a synchronizing call): the hold gave up,
    // and its samples carry its host-side cost as they did before holds.
    e.hold_note = "its launch waits for the device: timed without the launch hold";
  }
  if (!t.ok()) {
    e.error = t.status();
    return absl::OkStatus();
  }
  e.samples.push_back(*t);
  e.rounds.push_back(round);
  e.device += *t;
  cost.device += *t;
  return absl::OkStatus();
}

absl::Status Measurer::ExtendCloseRace(std::vector<Entrant>& entrants, const Operands& ops,
                                       MeasureReport* report) {
  if (!options_.extend || options_.extend_rounds <= 0) return absl::OkStatus();
  TuningCost& cost = report->cost;
  RaceExtension& ext = report->extension;
  const int cap = static_cast<int>(std::ceil(options_.extend_rounds * cost.rounds));
  const GemmArgs args = ops.Args(stream_);
  const Clock::time_point t0 = Clock::now();
  double round_device = 0;  // the most device time one extra round took: what the next may take
  for (;;) {
    std::vector<Entrant*> close;
    for (const std::string& name : options_.extend(report->measurements, report->samples)) {
      for (Entrant& e : entrants) {
        if (e.result->name == name && e.error.ok() && !e.samples.empty() &&
            std::find(close.begin(), close.end(), &e) == close.end()) {
          close.push_back(&e);
        }
      }
    }
    if (close.size() < 2) {
      if (!ext.candidates.empty()) ext.ended = "settled";
      return absl::OkStatus();
    }
    for (const Entrant* e : close) {
      if (std::find(ext.candidates.begin(), ext.candidates.end(), e->result->name) ==
          ext.candidates.end()) {
        ext.candidates.push_back(e->result->name);
      }
    }
    // What one more round would add: the most a round took so far, else the
    // candidates' medians.
    double next = round_device;
    if (next == 0) {
      for (const Entrant* e : close) next += e->result->median_seconds;
    }
    if (ext.rounds >= cap) {
      ext.ended = absl::StrFormat("not settled within %d more rounds (%gx the race's %d)", cap,
                                  options_.extend_rounds, cost.rounds - ext.rounds);
      return absl::OkStatus();
    }
    if (cost.device + next > options_.device_budget_seconds) {
      ext.ended = absl::StrFormat(
          "not settled when one more round would pass the race's device budget (%.3gms)",
          options_.device_budget_seconds * 1e3);
      return absl::OkStatus();
    }
    if (SecondsSince(t0) > options_.wall_limit_seconds) {
      ext.ended = "not settled by the wall-clock limit";
      return absl::OkStatus();
    }
    // One sample of each, in the order the race's own rounds take.
    const int round = cost.rounds;
    const double before = cost.device;
    for (size_t j : RoundOrder(close.size(), round)) {
      Entrant& e = *close[j];
      const size_t had = e.samples.size();
      RETURN_IF_ERROR(TimeSample(e, round, args, report));
      if (e.samples.size() > had) report->samples.Add(e.result->name, round, e.samples.back());
    }
    cost.rounds = round + 1;
    ++ext.rounds;
    ext.device_seconds += cost.device - before;
    round_device = std::max(round_device, cost.device - before);
    ReadClock(report);
    for (Entrant* e : close) WriteResult(*e);
  }
}

}  // namespace arbiter
