#include "engine/verdict_store.h"

#include <algorithm>
#include <string_view>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/postgres_verdict_store.h"
#include "engine/sqlite_verdict_store.h"

namespace arbiter {

absl::StatusOr<std::unique_ptr<VerdictStore>> VerdictStore::Open(const std::string& location,
                                                                 const StoreOptions& options) {
  if (IsPostgresUri(location)) {
    ASSIGN_OR_RETURN(std::unique_ptr<PostgresVerdictStore> store,
                     PostgresVerdictStore::Open(location, options));
    return std::unique_ptr<VerdictStore>(std::move(store));
  }
  if (!options.password_file.empty()) {
    return absl::InvalidArgumentError(
        "store password file: only a PostgreSQL store (postgresql://...) takes a password");
  }
  ASSIGN_OR_RETURN(std::unique_ptr<SqliteVerdictStore> store, SqliteVerdictStore::Open(location));
  return std::unique_ptr<VerdictStore>(std::move(store));
}

absl::StatusOr<std::optional<Verdict>> LoadBucketVerdicts(VerdictStore& store,
                                                          const std::string& fingerprint,
                                                          const BucketKey& key) {
  VerdictFilter filter;
  filter.dtype = key.dtype;
  filter.bucket = key.bucket;
  ASSIGN_OR_RETURN(std::vector<Verdict> all, store.ListVerdicts(fingerprint, filter));
  std::optional<Verdict> bucket;
  for (Verdict& v : all) {
    if (v.scope.whole()) bucket = std::move(v);
  }
  if (!bucket) return std::nullopt;
  for (Verdict& v : all) {
    if (!v.scope.whole() && v.candidates == bucket->candidates) bucket->scoped.push_back(std::move(v));
  }
  return bucket;
}

absl::Status CheckForceScope(const Force& f) {
  switch (f.scope.kind) {
    case VerdictScope::Kind::kBucket:
      return absl::OkStatus();
    case VerdictScope::Kind::kShape:
      if (BucketOf(Problem{f.dtype, f.scope.m, f.scope.n, f.scope.k}) == f.bucket) {
        return absl::OkStatus();
      }
      return absl::InvalidArgumentError(
          absl::StrCat("verdict store: put force: shape ", f.scope.ToString(), " is not in bucket ",
                       f.bucket.ToString()));
    case VerdictScope::Kind::kHalf:
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "verdict store: put force: expected the whole bucket or one exact shape, got scope ",
      f.scope.ToString()));
}

absl::Status CheckPutVerdict(const Verdict& v) {
  if (v.fingerprint.empty()) {
    return absl::InvalidArgumentError("verdict store: put verdict: empty device fingerprint");
  }
  return absl::OkStatus();
}

absl::Status CheckPutForce(const Force& f) {
  if (f.fingerprint.empty() || f.candidate.empty()) {
    return absl::InvalidArgumentError(
        "verdict store: put force: fingerprint and candidate must be set");
  }
  return CheckForceScope(f);
}

absl::Status CheckPutQuarantine(const QuarantineEntry& q) {
  if (q.fingerprint.empty() || q.candidate.empty() || q.scope.empty()) {
    return absl::InvalidArgumentError(
        "verdict store: put quarantine: fingerprint, candidate and scope must be set");
  }
  return absl::OkStatus();
}

absl::Status CheckInvalidateScope(const InvalidateScope& scope) {
  // Set fields narrow the scope; with none set, `all` must say so explicitly.
  const bool narrowed = scope.candidate || scope.dtype || scope.bucket;
  if (!narrowed && !scope.all) {
    return absl::InvalidArgumentError(
        "verdict store: invalidate: empty scope; name a candidate, dtype or bucket, or set all");
  }
  return absl::OkStatus();
}

bool IsPostgresUri(const std::string& location) {
  return absl::StartsWith(location, "postgresql://") || absl::StartsWith(location, "postgres://");
}

std::string RedactStoreLocation(const std::string& location) {
  if (!IsPostgresUri(location)) return location;
  std::string out = location;
  // user:password@ in the authority (before the first '/' or '?' after the scheme); the
  // last '@' there ends the user info, as libpq reads it.
  const size_t authority = out.find("://") + 3;
  const size_t authority_end = std::min(out.find('/', authority), out.find('?', authority));
  const size_t at =
      out.rfind('@', authority_end == std::string::npos ? std::string::npos : authority_end);
  if (at != std::string::npos && at >= authority) {
    const size_t colon = out.find(':', authority);
    if (colon != std::string::npos && colon < at) out.replace(colon + 1, at - colon - 1, "***");
  }
  // password=... among the query parameters.
  const size_t query = out.find('?');
  if (query != std::string::npos) {
    size_t pos = query + 1;
    while (pos < out.size()) {
      size_t end = out.find('&', pos);
      if (end == std::string::npos) end = out.size();
      if (out.compare(pos, std::string_view("password=").size(), "password=") == 0) {
        const size_t value = pos + std::string_view("password=").size();
        out.replace(value, end - value, "***");
        end = value + 3;
      }
      pos = end + 1;
    }
  }
  return out;
}

const char* ReachName(Reach reach) {
  switch (reach) {
    case Reach::kFleet: return "fleet";
    case Reach::kNode: return "node";
  }
  return "unknown";
}

const char* StoreChangeWhatName(StoreChange::What what) {
  switch (what) {
    case StoreChange::What::kVerdicts: return "verdicts";
    case StoreChange::What::kForces: return "forces";
    case StoreChange::What::kQuarantine: return "quarantine";
    case StoreChange::What::kEverything: return "everything";
  }
  return "unknown";
}

bool StoreChange::Covers(const std::string& fp, DType d, const Bucket& b) const {
  if (what == What::kEverything) return true;
  if (fp != fingerprint) return false;
  if (dtype && *dtype != d) return false;
  return !bucket || *bucket == b;
}

}  // namespace arbiter
