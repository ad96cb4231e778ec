// Values and comparisons the verdict store tests share: verdicts, results and
// quarantine entries with every field set, and exact comparisons of what comes back.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/bucket.h"
#include "engine/verdict.h"
#include "engine/verdict_store.h"
#include "gtest/gtest.h"

namespace arbiter::testing {

inline constexpr char kDevice[] = "NVIDIA H200|sm_90|driver 550.54|cuda 12.4";
inline constexpr char kOtherDevice[] = "cpu|x86_64|openblas 0.3.21";

inline Bucket BucketFor(int64_t m, int64_t n, int64_t k) {
  return BucketOf(Problem{DType::kF32, m, n, k});
}

inline CandidateResult Result(std::string name, int version, int tier, Determinism determinism,
                              ResultState state, std::string reason, double median, double spread,
                              int samples, double max_abs, double max_rel) {
  CandidateResult r;
  r.name = std::move(name);
  r.version = version;
  r.tier = tier;
  r.determinism = determinism;
  r.state = state;
  r.reason = std::move(reason);
  r.median_seconds = median;
  r.spread = spread;
  r.samples = samples;
  r.max_abs_error = max_abs;
  r.max_rel_error = max_rel;
  return r;
}

// A measured verdict on `fingerprint` for (dtype, bucket of m x n x k) that raced `raced`
// (timed, in that order); the first is the winner.
inline Verdict MakeVerdict(const std::string& fingerprint, DType dtype, int64_t m, int64_t n,
                           int64_t k, const std::vector<std::string>& raced) {
  Verdict v;
  v.fingerprint = fingerprint;
  v.dtype = dtype;
  v.measured = Problem{dtype, m, n, k};
  v.bucket = BucketOf(v.measured);
  for (size_t i = 0; i < raced.size(); ++i) {
    v.results.push_back(Result(raced[i], 1, 1, Determinism::kRunToRun, ResultState::kTimed, "",
                               1e-3 * static_cast<double>(i + 1), 0.01, 20, 1e-6, 1e-7));
    v.candidates += (i ? "," : "") + raced[i] + "@1";
  }
  v.winner = raced.empty() ? "" : raced[0];
  v.winner_version = 1;
  v.reason = "fastest";
  v.created_unix = 1700000000;
  return v;
}

inline void ExpectSameResult(const CandidateResult& want, const CandidateResult& got) {
  SCOPED_TRACE(want.name);
  EXPECT_EQ(want.name, got.name);
  EXPECT_EQ(want.version, got.version);
  EXPECT_EQ(want.tier, got.tier);
  EXPECT_EQ(want.determinism, got.determinism);
  EXPECT_EQ(want.state, got.state);
  EXPECT_EQ(want.reason, got.reason);
  // Exact: a stored figure must come back bit for bit.
  EXPECT_EQ(want.median_seconds, got.median_seconds);
  EXPECT_EQ(want.spread, got.spread);
  EXPECT_EQ(want.samples, got.samples);
  EXPECT_EQ(want.max_abs_error, got.max_abs_error);
  EXPECT_EQ(want.max_rel_error, got.max_rel_error);
}

inline void ExpectSameVerdict(const Verdict& want, const Verdict& got) {
  EXPECT_EQ(want.fingerprint, got.fingerprint);
  EXPECT_EQ(want.dtype, got.dtype);
  EXPECT_EQ(want.bucket, got.bucket);
  EXPECT_EQ(want.scope.ToString(), got.scope.ToString());
  EXPECT_EQ(want.candidates, got.candidates);
  EXPECT_EQ(want.winner, got.winner);
  EXPECT_EQ(want.winner_version, got.winner_version);
  EXPECT_EQ(want.source, got.source);
  EXPECT_EQ(want.reason, got.reason);
  EXPECT_EQ(want.measured, got.measured);
  EXPECT_EQ(want.created_unix, got.created_unix);
  ASSERT_EQ(want.results.size(), got.results.size());
  for (size_t i = 0; i < want.results.size(); ++i)
    ExpectSameResult(want.results[i], got.results[i]);
}

// (dtype, bucket) of each verdict, sorted: what a listing holds, order aside.
inline std::vector<std::pair<DType, Bucket>> Keys(const std::vector<Verdict>& verdicts) {
  std::vector<std::pair<DType, Bucket>> keys;
  for (const Verdict& v : verdicts) keys.emplace_back(v.dtype, v.bucket);
  std::sort(keys.begin(), keys.end());
  return keys;
}

inline QuarantineEntry Quarantined(const std::string& fingerprint, const std::string& candidate,
                                   const std::string& scope) {
  QuarantineEntry q;
  q.candidate = candidate;
  q.version = 4;
  q.scope = scope;
  q.fingerprint = fingerprint;
  q.reason = "claimed run_to_run; two runs differ in 12 elements";
  q.created_unix = 1713000000;
  return q;
}

}  // namespace arbiter::testing
