#include "engine/verdict_rows.h"

namespace arbiter::verdict_rows {

std::string KeyText(const std::string& fingerprint, DType dtype, const Bucket& bucket) {
  return absl::StrCat(fingerprint, " ", DTypeName(dtype), " ", bucket.ToString());
}

std::vector<Value> VerdictRow(const Verdict& v) {
  return {v.fingerprint,
          std::string(kOp),
          std::string(DTypeName(v.dtype)),
          StoreKeyOf(v.bucket, v.scope),
          v.candidates,
          v.winner,
          int64_t{v.winner_version},
          std::string(VerdictSourceName(v.source)),
          v.reason,
          std::string(DTypeName(v.measured.dtype)),
          int64_t{v.measured.m},
          int64_t{v.measured.n},
          int64_t{v.measured.k},
          int64_t{v.created_unix}};
}

std::vector<Value> ResultRow(const Verdict& v, size_t ordinal) {
  const CandidateResult& r = v.results[ordinal];
  return {v.fingerprint,
          std::string(kOp),
          std::string(DTypeName(v.dtype)),
          StoreKeyOf(v.bucket, v.scope),
          static_cast<int64_t>(ordinal),
          r.name,
          int64_t{r.version},
          int64_t{r.tier},
          std::string(DeterminismName(r.determinism)),
          std::string(ResultStateName(r.state)),
          r.reason,
          r.median_seconds,
          r.spread,
          int64_t{r.samples},
          r.max_abs_error,
          r.max_rel_error};
}

}  // namespace arbiter::verdict_rows
