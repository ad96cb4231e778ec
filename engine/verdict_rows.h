// How verdicts, forces and quarantine entries are stored as table rows, for both stores
// (SqliteVerdictStore, PostgresVerdictStore): each table's column order, what
// each field is stored as (enums by their engine names, never by number), and
// how a stored row reads back, where a value this build does not know is
// damage (DATA_LOSS naming the column), not a miss.
//
// A store reads a result row through its own Row, which has
//   std::string Text(int col) const;
//   absl::StatusOr<int64_t> Int(int col) const;
//   absl::StatusOr<double> Real(int col) const;
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "engine/contract.h"
#include "engine/dtype.h"
#include "engine/problem.h"
#include "engine/status.h"
#include "engine/verdict.h"
#include "engine/verdict_store.h"

namespace arbiter::verdict_rows {

// The only op stored today; part of the verdict key so other ops can join later.
inline constexpr char kOp[] = "matmul";

// One stored value, bound by the store as text, integer or real.
using Value = std::variant<std::string, int64_t, double>;

// "fingerprint dtype bucket", naming a verdict or force in errors.
std::string KeyText(const std::string& fingerprint, DType dtype, const Bucket& bucket);

// A verdicts row: fingerprint, op, dtype, bucket, candidates, winner,
// winner_version, source, reason, measured_dtype, measured_m, measured_n,
// measured_k, created_unix.
std::vector<Value> VerdictRow(const Verdict& v);
// The verdict_results row of v.results[ordinal]: fingerprint, op, dtype,
// bucket, ordinal, name, version, tier, determinism, state, reason,
// median_seconds, spread, samples, max_abs_error, max_rel_error.
std::vector<Value> ResultRow(const Verdict& v, size_t ordinal);

template <typename T, typename Parser>
absl::StatusOr<T> ParseColumn(const char* column, const std::string& text, Parser parse) {
  std::optional<T> value = parse(text);
  if (!value) {
    return absl::DataLossError(
        absl::StrCat("verdict store: column ", column, " holds unknown value \"", text, "\""));
  }
  return *value;
}

// A verdict from columns 0-12: fingerprint, dtype, bucket, candidates, winner,
// winner_version, source, reason, measured_dtype, measured_m, measured_n,
// measured_k, created_unix. Its results are read separately (ReadResult).
template <typename Row>
absl::StatusOr<Verdict> ReadVerdict(const Row& row) {
  Verdict v;
  v.fingerprint = row.Text(0);
  ASSIGN_OR_RETURN(v.dtype, ParseColumn<DType>("verdicts.dtype", row.Text(1), ParseDType));
  using Key = std::pair<Bucket, VerdictScope>;
  ASSIGN_OR_RETURN(const Key key, ParseColumn<Key>("verdicts.bucket", row.Text(2), ParseStoreKey));
  v.bucket = key.first;
  v.scope = key.second;
  v.candidates = row.Text(3);
  v.winner = row.Text(4);
  ASSIGN_OR_RETURN(const int64_t winner_version, row.Int(5));
  v.winner_version = static_cast<int>(winner_version);
  ASSIGN_OR_RETURN(v.source, ParseColumn<VerdictSource>("verdicts.source", row.Text(6),
                                                        ParseVerdictSource));
  v.reason = row.Text(7);
  ASSIGN_OR_RETURN(v.measured.dtype,
                   ParseColumn<DType>("verdicts.measured_dtype", row.Text(8), ParseDType));
  ASSIGN_OR_RETURN(v.measured.m, row.Int(9));
  ASSIGN_OR_RETURN(v.measured.n, row.Int(10));
  ASSIGN_OR_RETURN(v.measured.k, row.Int(11));
  ASSIGN_OR_RETURN(v.created_unix, row.Int(12));
  return v;
}

// A result from columns first..first+10: name, version, tier, determinism,
// state, reason, median_seconds, spread, samples, max_abs_error, max_rel_error.
template <typename Row>
absl::StatusOr<CandidateResult> ReadResult(const Row& row, int first) {
  CandidateResult r;
  r.name = row.Text(first);
  ASSIGN_OR_RETURN(const int64_t version, row.Int(first + 1));
  r.version = static_cast<int>(version);
  ASSIGN_OR_RETURN(const int64_t tier, row.Int(first + 2));
  r.tier = static_cast<int>(tier);
  ASSIGN_OR_RETURN(r.determinism, ParseColumn<Determinism>("verdict_results.determinism",
                                                           row.Text(first + 3), ParseDeterminism));
  ASSIGN_OR_RETURN(r.state, ParseColumn<ResultState>("verdict_results.state", row.Text(first + 4),
                                                     ParseResultState));
  r.reason = row.Text(first + 5);
  ASSIGN_OR_RETURN(r.median_seconds, row.Real(first + 6));
  ASSIGN_OR_RETURN(r.spread, row.Real(first + 7));
  ASSIGN_OR_RETURN(const int64_t samples, row.Int(first + 8));
  r.samples = static_cast<int>(samples);
  ASSIGN_OR_RETURN(r.max_abs_error, row.Real(first + 9));
  ASSIGN_OR_RETURN(r.max_rel_error, row.Real(first + 10));
  return r;
}

// A force from columns 0-5: fingerprint, dtype, bucket, candidate, reason, created_unix.
template <typename Row>
absl::StatusOr<Force> ReadForce(const Row& row) {
  Force f;
  f.fingerprint = row.Text(0);
  ASSIGN_OR_RETURN(f.dtype, ParseColumn<DType>("forces.dtype", row.Text(1), ParseDType));
  using Key = std::pair<Bucket, VerdictScope>;
  ASSIGN_OR_RETURN(const Key key, ParseColumn<Key>("forces.bucket", row.Text(2), ParseStoreKey));
  f.bucket = key.first;
  f.scope = key.second;
  f.candidate = row.Text(3);
  f.reason = row.Text(4);
  ASSIGN_OR_RETURN(f.created_unix, row.Int(5));
  return f;
}

// A quarantine entry from columns 0-5: candidate, version, scope, fingerprint, reason,
// created_unix.
template <typename Row>
absl::StatusOr<QuarantineEntry> ReadQuarantine(const Row& row) {
  QuarantineEntry q;
  q.candidate = row.Text(0);
  ASSIGN_OR_RETURN(const int64_t version, row.Int(1));
  q.version = static_cast<int>(version);
  q.scope = row.Text(2);
  q.fingerprint = row.Text(3);
  q.reason = row.Text(4);
  ASSIGN_OR_RETURN(q.created_unix, row.Int(5));
  return q;
}

}  // namespace arbiter::verdict_rows
