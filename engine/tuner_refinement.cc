// The Tuner's refinement jobs (tuner.h): a shape refined inside its measured
// bucket, raced among the bucket verdict's leaders and tile entrants, and the
// split that follows where it beats the bucket's winner beyond the noise. The
// queue, the fleet's leases and the bucket's own race are in tuner.cc; what races
// a refinement, what serves it and where a bucket splits, in refinement.cc.
#include "engine/tuner.h"

#include <algorithm>
#include <map>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/refinement.h"
#include "engine/selection_policy.h"
#include "spdlog/spdlog.h"

namespace arbiter {

namespace {

std::string Us(double seconds) { return absl::StrFormat("%.4gus", seconds * 1e6); }

}  // namespace

absl::StatusOr<Verdict> Tuner::RunRefinement(const std::shared_ptr<Job>& job) {
  const Problem& p = job->problem;
  const BucketKey& key = job->bucket();
  if (!node_verdicts_.empty()) {
    // A bucket set aside for this node is measured and kept here alone, whole.
    absl::StatusOr<Verdict> stored = store_.GetVerdict(fingerprint_, key.dtype, key.bucket);
    if (node_verdicts_.SetAside(key, stored.ok() ? &*stored : nullptr)) return MeasureBucket(job);
  }
  const std::vector<const RegisteredCandidate*> eligible =
      Eligible(registry_, quarantine_, p, nullptr);
  const std::string raced = RacedSet(eligible);
  // The bucket's verdicts as they are now (they may have changed since the job was queued).
  const auto refinable = [&](const absl::StatusOr<std::optional<Verdict>>& bucket) {
    return bucket.ok() && *bucket && (*bucket)->candidates == raced &&
           !((*bucket)->measured == p) && !(*bucket)->winner.empty();
  };
  // `p`'s fresh refinement in the store, if there is one.
  const auto refined = [&]() -> std::optional<Verdict> {
    absl::StatusOr<std::optional<Verdict>> bucket = LoadBucket(key);
    if (!refinable(bucket)) return std::nullopt;
    const Verdict* own = RefinementOf(**bucket, p);
    return own != nullptr ? std::optional<Verdict>(*own) : std::nullopt;
  };
  absl::StatusOr<std::optional<Verdict>> bucket = LoadBucket(key);
  if (!refinable(bucket)) return MeasureBucket(job);
  if (!job->remeasure) {
    if (std::optional<Verdict> own = refined()) return *std::move(own);  // refined meanwhile
  }
  // One refiner per shape in the fleet; the bucket's own lease is apart.
  std::unique_ptr<StoreLease> lease;
  if (store_.shared()) {
    std::optional<Verdict> theirs;
    ASSIGN_OR_RETURN(lease, TakeLease(job, VerdictScope::Shape(p), refined, &theirs));
    if (!theirs && lease != nullptr && !job->remeasure) theirs = refined();
    if (theirs) {
      spdlog::info("{} refined by another daemon: {}@v{}", p.ToString(), theirs->winner,
                   theirs->winner_version);
      if (absl::Status s = Recache(key); !s.ok()) spdlog::debug("{}", s.ToString());
      return *std::move(theirs);
    }
    bucket = LoadBucket(key);  // the holder may have split the bucket meanwhile
    if (!refinable(bucket)) return MeasureBucket(job);
  }
  return RefineShape(job, **bucket, eligible);
}

absl::StatusOr<Verdict> Tuner::RefineShape(const std::shared_ptr<Job>& job, const Verdict& bucket,
                                           const std::vector<const RegisteredCandidate*>& eligible) {
  const Problem& p = job->problem;
  const std::vector<std::string> leaders = Leaders(bucket, options_.refine);
  std::map<std::string, OutputTile> tiles;
  for (const RegisteredCandidate* c : eligible) {
    if (const CandidateMember* member = c->spec.Member(p.dtype)) {
      tiles[c->spec.name] = member->contract.tile;
    }
  }
  const std::vector<TileEntrant> by_tile = TileEntrants(
      bucket, p, leaders, tiles, backend_.info().multiprocessors, options_.refine);
  std::vector<std::string> names = leaders;
  std::string tile_reasons;
  for (const TileEntrant& e : by_tile) {
    names.push_back(e.name);
    absl::StrAppend(&tile_reasons, tile_reasons.empty() ? "" : "; ", e.name, ": ", e.why);
  }
  std::vector<const RegisteredCandidate*> racers;
  for (const std::string& name : names) {
    for (const RegisteredCandidate* c : eligible) {
      if (c->spec.name == name) racers.push_back(c);
    }
  }
  const std::string at = bucket.measured.ToString();
  spdlog::info("refining {} inside bucket {} (measured at {}) over {} leading candidates{}{}",
               p.ToString(), bucket.bucket.ToString(), at, racers.size(),
               tile_reasons.empty() ? "" : " and by tile: ", tile_reasons);
  const auto not_raced = [&](const RegisteredCandidate& c) {
    const CandidateResult* r = bucket.Result(c.spec.name);
    const CandidateResult* w = bucket.Result(bucket.winner);
    if (r != nullptr && r->timed() && w != nullptr && w->median_seconds > 0) {
      return absl::StrFormat("not a leader of the bucket's verdict: %s at %s, %.2fx its winner",
                             Us(r->median_seconds), at, r->median_seconds / w->median_seconds);
    }
    return absl::StrCat("not a leader of the bucket's verdict: ",
                        r != nullptr ? ResultStateName(r->state) : "not raced", " at ", at);
  };
  // A few entrants at one shape: the bucket race's budget for the share of the
  // candidates they are, and no more than the refinement's own.
  MeasureOptions measure = options_.measure;
  const double share = static_cast<double>(racers.size()) / std::max<size_t>(eligible.size(), 1);
  measure.device_budget_seconds = std::min(measure.device_budget_seconds * share,
                                           options_.refine.device_budget_seconds);
  measure.wall_budget_seconds *= share;
  measure.extend_reserve = options_.refine.close_race_reserve;
  // Decided first against the bucket's winner as the incumbent: whether this shape
  // disagrees with the bucket beyond the noise, which splits it ...
  RaceSamples samples;
  ASSIGN_OR_RETURN(Verdict v,
                   RaceAt(job, eligible, racers, bucket.winner, not_raced, measure, &samples,
                          /*refinement=*/true));
  const bool disagrees = !v.winner.empty() && v.winner != bucket.winner;
  const Verdict raced = v;
  // ... but the shape is served by the fastest here: the bucket's winner won at
  // another shape and is no incumbent at this one (refinement.h).
  const Verdict* earlier = RefinementOf(bucket, p);
  std::optional<std::string> previous;
  if (earlier != nullptr && !earlier->winner.empty()) previous = earlier->winner;
  const Decision d = DecideRefinement(v.results, Determinism::kNondeterministic, previous,
                                      bucket.winner, options_.noise, &samples);
  const std::string against_bucket = std::move(v.reason);
  v.winner = d.winner;
  v.winner_version = d.winner_version;
  v.scope = VerdictScope::Shape(p);
  const std::string by_tile_text =
      tile_reasons.empty() ? "" : absl::StrCat(" and by tile (", tile_reasons, ")");
  v.reason = absl::StrCat("refined among the leaders of the bucket's verdict (measured at ", at,
                          ", winner ", bucket.winner, ")", by_tile_text, ": ", d.reason,
                          "; against the bucket's winner: ", against_bucket);
  RETURN_IF_ERROR(store_.PutVerdict(v));
  Log(v);
  if (disagrees && !IsSplit(bucket)) RETURN_IF_ERROR(Split(job, bucket, raced));
  RETURN_IF_ERROR(Recache(BucketKeyOf(p)));
  if (v.winner.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("no leading candidate passed the oracle for ", p.ToString(), ": ", v.reason));
  }
  return v;
}

absl::Status Tuner::Split(const std::shared_ptr<Job>& job, const Verdict& bucket,
                          const Verdict& raced) {
  const Problem& p = job->problem;
  const auto halves = SplitBetween(bucket.bucket, bucket.measured, p);
  const Transfer t = TransferOf(raced, bucket.winner);
  const std::string evidence = absl::StrFormat(
      "at %s %s (%s) beat the bucket's winner %s (%s, %.3fx) beyond the noise", p.ToString(),
      t.best, Us(t.best_seconds), bucket.winner, Us(t.bucket_winner_seconds), t.regret());
  if (!halves) {
    spdlog::info("bucket {} not split: {}, but no half-octave separates {} from {}",
                 bucket.bucket.ToString(), evidence, p.ToString(), bucket.measured.ToString());
    return absl::OkStatus();
  }
  const bool first_home = halves->first.Contains(bucket.measured);
  const VerdictScope& home = first_home ? halves->first : halves->second;
  const VerdictScope& away = first_home ? halves->second : halves->first;
  spdlog::info("splitting bucket {} into {} and {}: {}", bucket.bucket.ToString(),
               halves->first.ToString(), halves->second.ToString(), evidence);
  // The half holding the bucket's measured shape keeps the bucket's figures.
  Verdict kept = bucket;
  kept.scoped.clear();
  kept.scope = home;
  kept.reason = absl::StrCat("split (", evidence, "); this half keeps the bucket's figures at ",
                             bucket.measured.ToString(), ": ", bucket.reason);
  // The other half takes the race that found the disagreement, at the refined
  // shape and decided against the bucket's winner: racing the same shape again
  // would spend the device time twice (it was most of a refinement's cost on the H200).
  Verdict other = raced;
  other.scope = away;
  other.reason = absl::StrCat("split (", evidence, "); this half measured at ", p.ToString(),
                              " by its refinement's race: ", raced.reason);
  RETURN_IF_ERROR(store_.PutVerdict(kept));
  RETURN_IF_ERROR(store_.PutVerdict(other));
  Log(other);
  return absl::OkStatus();
}

}  // namespace arbiter
