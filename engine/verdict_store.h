// Persistent verdicts, forces and quarantine entries in SQLite (WAL mode).
// Keys: device fingerprint, op ("matmul"), dtype, bucket. A verdict also records
// the name@version of every candidate raced; the arbiter serves it only while
// that set still matches the registry. The schema is versioned: a new file gets
// the current schema; a store written under any other schema version is refused
// (FAILED_PRECONDITION naming both versions) - no migration exists yet, since
// version 1 is the first.
//
// Thread-safe: provides internal synchronization (one connection, one mutex).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "engine/bucket.h"
#include "engine/status.h"
#include "engine/verdict.h"

struct sqlite3;

namespace arbiter {

struct Force {
  std::string fingerprint;
  DType dtype = DType::kF32;
  Bucket bucket;
  std::string candidate;
  std::string reason;
  int64_t created_unix = 0;
};

struct QuarantineEntry {
  std::string candidate;
  int version = 0;
  std::string scope;   // text of a QuarantineScope (quarantine.h): "*", a dtype or "dtype/bucket"
  std::string fingerprint;
  std::string reason;  // the evidence
  int64_t created_unix = 0;
};

// What an invalidation removes. Empty fields match everything; all empty
// (with `all` set) removes every verdict of the fingerprint.
struct InvalidateScope {
  std::optional<std::string> candidate;  // verdicts that raced this candidate
  std::optional<DType> dtype;
  std::optional<Bucket> bucket;
  bool all = false;
};

struct VerdictFilter {
  std::optional<DType> dtype;
  std::optional<Bucket> bucket;
  std::optional<std::string> candidate;  // verdicts that raced it
};

class VerdictStore {
 public:
  static constexpr int kSchemaVersion = 1;

  // Opens or creates the store at `path` (":memory:" for a private in-memory one).
  static absl::StatusOr<std::unique_ptr<VerdictStore>> Open(const std::string& path);
  ~VerdictStore();
  VerdictStore(const VerdictStore&) = delete;
  VerdictStore& operator=(const VerdictStore&) = delete;

  int schema_version() const;

  // Inserts or replaces the verdict for (fingerprint, dtype, bucket), results included.
  absl::Status PutVerdict(const Verdict& v);
  // NOT_FOUND when absent.
  absl::StatusOr<Verdict> GetVerdict(const std::string& fingerprint, DType dtype,
                                     const Bucket& bucket);
  absl::StatusOr<std::vector<Verdict>> ListVerdicts(const std::string& fingerprint,
                                                    const VerdictFilter& filter);
  // The number of verdicts stored for `fingerprint`, counted without loading them.
  absl::StatusOr<int64_t> CountVerdicts(const std::string& fingerprint);
  // Returns the number of verdicts removed.
  absl::StatusOr<int> Invalidate(const std::string& fingerprint, const InvalidateScope& scope);

  absl::Status PutForce(const Force& f);
  absl::StatusOr<std::optional<Force>> GetForce(const std::string& fingerprint, DType dtype,
                                                const Bucket& bucket);
  // Returns whether a force was removed.
  absl::StatusOr<bool> RemoveForce(const std::string& fingerprint, DType dtype,
                                   const Bucket& bucket);
  absl::StatusOr<std::vector<Force>> ListForces(const std::string& fingerprint);

  absl::Status PutQuarantine(const QuarantineEntry& q);
  absl::StatusOr<std::vector<QuarantineEntry>> ListQuarantine(const std::string& fingerprint);
  // Empty candidate clears every entry of the fingerprint. Returns the number removed.
  absl::StatusOr<int> ClearQuarantine(const std::string& fingerprint,
                                      const std::string& candidate);

 private:
  explicit VerdictStore(sqlite3* db);
  absl::Status Migrate();

  mutable std::mutex mu_;
  sqlite3* db_ ABSL_GUARDED_BY(mu_);  // owned
};

}  // namespace arbiter
