// Measures one bucket on a backend: fresh random operands of the requested
// shape (never zeros) and one f64 reference for all candidates, then
//   1. the oracle: each candidate runs once on NaN-poisoned C; every element of C
//      must be finite (counted on the device) and the checked rows must be within
//      the candidate's budget - all rows while the full f64 reference is cheap
//      (M*N*K <= oracle_full_volume, or M <= oracle_rows), else a sample of rows
//      (SampledRows: first and last rows, partial-tile edges, one row per block);
//   2. its determinism claim: run again (and, for batch_invariant, at a smaller
//      M) into a second poisoned C, compared bitwise on the device. A candidate
//      whose checked run took over hopeless_factor times that of a candidate that
//      holds the same claim (or a stronger one) is checked after the race instead,
//      and only if its median is within hopeless_factor of the best's; if not, it
//      cannot be served where the claim matters, and is recorded as
//      nondeterministic with the reason (a slow generic kernel behind a fast one
//      runs twice, for the oracle and one sample, instead of four times);
//   3. paired timing: the candidates that passed are timed interleaved, one
//      sample of each per round (RoundOrder: each first in turn, each after
//      different others), each sample cold (cache flushed) and by the device
//      timer with the stream held while it is enqueued (Stream::HoldLaunches:
//      no host-side launch cost in the window), so drift in clocks or
//      temperature, and whatever one candidate leaves behind for the next, lands
//      on every candidate alike instead of picking a winner. A candidate
//      stops sampling once its median is stable, once it cannot win (its lower
//      quartile above the best's upper quartile), or once it is far slower than
//      the best (hopeless_factor) and either took that much longer than the
//      best's sample of the same round (one sample is then enough) or has spent
//      its share of the device-time budget or 3 samples; the race stops
//      when the budget of device time, or of host time, is spent (every candidate
//      still gets min_samples) or the wall-clock limit is reached;
//   4. a close race's extra rounds (MeasureOptions::extend): where the caller
//      says two candidates are close (the fastest ahead of the incumbent by
//      median, not separated by the rounds so far), those two alone are timed
//      in further interleaved rounds until it says they are settled, within a
//      cap on the rounds and the race's device budget.
// A candidate that fails, errors or cannot be timed is recorded with its state
// and reason - never as a latency. Where the time went is reported per phase.
//
// Not thread-safe: one Measurer per worker stream.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/backend.h"
#include "engine/random_fill.h"  // FillRandom, for the measurer's users
#include "engine/registry.h"
#include "engine/round_order.h"  // RoundOrder, the rounds' order
#include "engine/sample_stats.h"  // Summarize, for the measurer's users
#include "engine/verdict.h"

namespace arbiter {

struct Measurement;
// A close race's candidates, asked once the timing rounds are over and again
// after each extra round (MeasureOptions::extend): the names of those whose
// comparison more rounds may settle (an incumbent and the challenger its rounds
// so far could not separate from the noise), or none. Gets every candidate's
// result and the race's samples as they stand.
using CloseRace = std::function<std::vector<std::string>(const std::vector<Measurement>&,
                                                         const RaceSamples&)>;

struct MeasureOptions {
  int warmup_runs = 0;              // untimed interleaved rounds before sampling; none by
                                    // default: the oracle and claim runs have already loaded
                                    // every kernel, and the median shrugs off one slow sample
  int min_samples = 5;              // every candidate timed gets at least this many samples,
                                    // unless it is hopeless or the wall-clock limit is hit
  int max_samples = 50;             // at most this many
  double stable_spread = 0.02;      // a candidate stops once IQR/median of its samples is below
  double device_budget_seconds = 0.1;   // device time of all timed samples of one race: once
                                        // spent, candidates with min_samples stop
  double wall_budget_seconds = 0.5;  // host wall time of the timing phase (flushes included):
                                     // once spent, candidates with min_samples stop, as for the
                                     // device budget (tiny kernels cost more in flushes than runs)
  double wall_limit_seconds = 10;   // host wall time of the timing phase: past it, sampling stops
  double hopeless_factor = 10;      // over this many times the best median, a candidate stops
                                    // once a sample took over this many times the best's in
                                    // the same round, or after 3 samples or its share of the
                                    // device budget
  bool cold_cache = true;           // flush the last-level cache before each sample
  bool hold_launches = true;        // enqueue each sample (flush, timer, candidate) behind a
                                    // hold on the stream, released once all is enqueued
  uint64_t seed = 0;                // operand seed; 0 picks a fresh one per measurement
  bool check_determinism = true;    // rerun to check run_to_run / batch_invariant claims
  int64_t oracle_rows = 64;         // all rows of C checked up to this M; past it (and past
                                    // oracle_full_volume), a sample of about this many rows
                                    // plus partial-tile edges
  double oracle_full_volume = 1024.0 * 1024 * 1024;  // M*N*K up to which every row is
                                    // checked whatever M is: there the full reference costs
                                    // less than the race it guards
  // Polled between runs; once it returns true the measurement stops with
  // CANCELLED and nothing it measured is returned. Unset: never cancelled.
  std::function<bool()> cancelled;
  // A close race gets more evidence before it decides: once the timing rounds
  // are over, the candidates `extend` names are timed alone in further
  // interleaved rounds (whatever their spread) until it names none, until
  // extend_rounds times the race's rounds have been added, until one more round
  // would take the race's device time past device_budget_seconds, or past the
  // wall-clock limit. Unset (or extend_rounds 0): no extra rounds.
  CloseRace extend;
  // Four times: a 3-4% margin whose rounds scatter by about as much needs some
  // 40-50 paired rounds before the sign test's bound clears 2% (on the H200 a
  // 3.6% cuBLASLt pair was not separated by 20 and was by 100).
  double extend_rounds = 4.0;
  // The share of device_budget_seconds the timing rounds leave unspent for the
  // extra rounds, which stop at the whole budget: 0 (the default) leaves none,
  // so a race that spends its budget gets no extra rounds.
  double extend_reserve = 0;
};

// Result of measuring a candidate; `claim_violation` is set (with evidence in
// result.reason) when a determinism claim failed: the arbiter quarantines it.
struct Measurement {
  CandidateResult result;
  bool claim_violation = false;
};

// The extra rounds of a close race (MeasureOptions::extend).
struct RaceExtension {
  std::vector<std::string> candidates;  // those timed further; empty: the race was not close
  int rounds = 0;                       // extra rounds run
  double device_seconds = 0;            // their device time (counted in TuningCost::device too)
  std::string ended;                    // why they stopped: "settled", "round cap ..." etc.
  // "vendor and ours timed 10 more paired rounds (0.21ms of device time): settled";
  // empty when the race was not close.
  std::string ToString() const;
};

// Everything one measurement produced: per candidate, in the order given;
// each timed candidate's samples with the round each was taken in (for
// Decide's paired comparison; not persisted); where the time went; the SM
// clock range seen while timing (0 where unknown).
struct MeasureReport {
  std::vector<Measurement> measurements;
  RaceSamples samples;
  TuningCost cost;  // extra rounds included (rounds, device, timing, flush)
  double sm_clock_min_mhz = 0;
  double sm_clock_max_mhz = 0;
  RaceExtension extension;
};

// What the measurer tells its caller, and asks it, as it goes. Called on the
// measuring thread.
class MeasureHooks {
 public:
  virtual ~MeasureHooks() = default;
  // Before the first kernel of `candidate` in `phase` ("oracle", "determinism",
  // "timing") is launched, and before each of its timed samples. The candidate
  // named last is the one whose kernels may be running until the next call or
  // the end of the measurement (the tuning intent journal records it).
  virtual void Launching(const CandidateSpec& candidate, std::string_view phase) = 0;
  // Between candidates, between a candidate's phases and before each timed
  // sample, with no kernel in flight on the stream: a non-OK status stops the
  // measurement and Race returns it (nothing is recorded). May block (e.g. while
  // queued dispatches use the stream).
  virtual absl::Status Checkpoint() = 0;
};

class Measurer {
 public:
  // `hooks` (may be null) must outlive the Measurer.
  Measurer(Backend& backend, Stream& stream, const MeasureOptions& options,
           MeasureHooks* hooks = nullptr)
      : backend_(backend), stream_(stream), options_(options), hooks_(hooks) {}
  Measurer(const Measurer&) = delete;
  Measurer& operator=(const Measurer&) = delete;

  // Measures each candidate on problem `p`. The candidates must cover `p`.
  // CANCELLED when options.cancelled said so.
  absl::StatusOr<MeasureReport> Race(const Problem& p,
                                     const std::vector<const RegisteredCandidate*>& candidates);
  // Race's measurements alone.
  absl::StatusOr<std::vector<Measurement>> Measure(
      const Problem& p, const std::vector<const RegisteredCandidate*>& candidates);

 private:
  struct Entrant;  // a candidate in the timing phase
  struct Operands;  // A, B, C, a second C, the reference and the rows it covers

  bool Cancelled() const { return options_.cancelled && options_.cancelled(); }
  // Allocates A, B and C, fills A and B, and computes the reference of the rows checked.
  absl::Status PrepareOperands(Operands& ops);
  // Phases 1 and 2 for every candidate, each with its measurement in `report`: the
  // entrants of the timing phase, the candidates that passed.
  absl::StatusOr<std::vector<Entrant>> CheckCandidates(
      const std::vector<const RegisteredCandidate*>& candidates, Operands& ops,
      MeasureReport* report);
  // Phase 1. Leaves the run's C in ops.c and its device time in `seconds`; false
  // (with r's state and reason set) when the run fails or C is not finite or out of budget.
  bool PassesOracle(const CandidateMember& member, Operands& ops, CandidateResult* r,
                    TuningCost* cost, double* seconds);
  // Phase 2: the member's determinism claim, checked against the first run's C.
  // False (state kQuarantined, and claim_violation when the claim was disproved
  // rather than a run failing) when it does not hold.
  bool HoldsDeterminismClaims(const CandidateMember& member, Operands& ops, Measurement* meas);
  // Phase 3: warm-up rounds, then interleaved timed rounds until every entrant has stopped.
  absl::Status TimePaired(std::vector<Entrant>& entrants, const Operands& ops,
                          MeasureReport* report);
  // options_.warmup_runs untimed runs of each entrant; false when the device then fails
  // to synchronize (every entrant then carries the error). Fails only when cancelled.
  absl::StatusOr<bool> Warmup(std::vector<Entrant>& entrants, const GemmArgs& args,
                              TuningCost* cost);
  // After `round`, `wall` seconds into the timed rounds: stops each entrant that is
  // stable, cannot win, is hopeless, or is out of budget, saying why in e.stopped.
  void StopSampling(std::vector<Entrant>& entrants, int round, double wall,
                    const TuningCost& cost) const;
  // e's sample of `round` over best's sample of the same round; 0 where either has none, or
  // where their oracle runs do not agree that e is over hopeless_factor x slower (one sample
  // alone may have met a hiccup).
  double RoundRatio(const Entrant& e, const Entrant& best, int round) const;
  // One cold, timed sample of `e` in `round`; a failed run or timer lands in
  // e.error. Fails only where a Checkpoint does or the race was cancelled.
  absl::Status TimeSample(Entrant& e, int round, const GemmArgs& args, MeasureReport* report);
  // The extra rounds of a close race (options_.extend), after the results were
  // written: updates the extended candidates' results and the race's samples.
  absl::Status ExtendCloseRace(std::vector<Entrant>& entrants, const Operands& ops,
                               MeasureReport* report);
  // An entrant's result from its samples so far: timed (median, spread, count,
  // why it stopped early), or the error its run or timer met.
  static void WriteResult(Entrant& e);
  // Widens the report's SM clock range by the clock now (where the backend reads it).
  void ReadClock(MeasureReport* report);
  // After the race, the claims deferred in phase 2: checked where the candidate's
  // median is within hopeless_factor of the best's; else recorded as not checked,
  // and the candidate as nondeterministic. Fails only where a Checkpoint does.
  absl::Status CheckDeferredClaims(std::vector<Entrant>& entrants, Operands& ops);

  // MeasureHooks::Launching and ::Checkpoint, when there are hooks.
  void Launching(const CandidateSpec& candidate, std::string_view phase) {
    if (hooks_ != nullptr) hooks_->Launching(candidate, phase);
  }
  absl::Status Checkpoint() { return hooks_ != nullptr ? hooks_->Checkpoint() : absl::OkStatus(); }

  Backend& backend_;
  Stream& stream_;
  MeasureOptions options_;
  MeasureHooks* hooks_;
};

}  // namespace arbiter
