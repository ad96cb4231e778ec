// Where verdicts, forces and quarantine entries persist: the store interface
// the engine sees, with two implementations chosen by the --store value -
// a SQLite file (sqlite_verdict_store.h, the embedded default: one daemon) or a
// PostgreSQL URI (postgres_verdict_store.h: a fleet of daemons sharing one
// database).
//
// Keys: device fingerprint, op ("matmul"), dtype, bucket. The fingerprint is the
// whole of what decides which daemons share a verdict (DeviceInfo::Fingerprint:
// device, capability, SM count, driver, runtime and library versions; never a
// GPU's UUID), so two identical GPUs share and two that differ in anything
// never do. A verdict also records the name@version of every candidate raced;
// the engine serves it only while that set still matches the registry.
//
// For a fleet the interface adds what one daemon alone never needed:
// - leases (TryLease): single flight per (fingerprint, dtype, bucket, scope) across
//   every daemon on the store, released when the lease object is destroyed or
//   its holder dies;
// - change notifications (Subscribe): another daemon changed verdicts, forces
//   or quarantine, so cached copies must go;
// - availability (Health): the store can be unreachable while the daemon runs;
//   calls then fail with UNAVAILABLE and the engine serves what it holds.
//
// Thread-safe: every implementation provides internal synchronization.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/bucket.h"
#include "engine/status.h"
#include "engine/verdict.h"

namespace arbiter {

// Where an operator's change applies: every daemon sharing the store (the store
// holds it, and a shared store pushes it to the others), or this daemon alone
// (held in its memory until it restarts; the store is untouched).
enum class Reach { kFleet = 1, kNode = 2 };
const char* ReachName(Reach reach);  // "fleet", "node"

// An operator's pin: the bucket's shapes, or one exact shape of it (scope kShape:
// stored keyed like a refinement, StoreKeyOf, and served before the bucket's force
// and verdicts).
struct Force {
  std::string fingerprint;
  DType dtype = DType::kF32;
  Bucket bucket;
  std::string candidate;
  std::string reason;
  int64_t created_unix = 0;
  VerdictScope scope;  // kBucket (the whole bucket) or kShape
};

struct QuarantineEntry {
  std::string candidate;
  int version = 0;
  std::string scope;  // text of a QuarantineScope (quarantine.h): "*", a dtype or "dtype/bucket"
  std::string fingerprint;
  std::string reason;  // the evidence
  int64_t created_unix = 0;
};

// What an invalidation removes. Empty fields match everything; all empty
// (with `all` set) removes every verdict of the fingerprint.
struct InvalidateScope {
  std::optional<std::string> candidate;  // verdicts that raced this candidate
  std::optional<DType> dtype;
  std::optional<Bucket> bucket;  // the bucket's verdict with its refinements and split halves
  bool all = false;
};

struct VerdictFilter {
  std::optional<DType> dtype;
  std::optional<Bucket> bucket;  // the bucket's verdict with its refinements and split halves
  std::optional<std::string> candidate;  // verdicts that raced it
};

// A change another store user made (or this one: notifications carry their
// origin). Delivered so caches drop what changed; it never carries the new
// value itself - readers go back to the store for that.
struct StoreChange {
  enum class What {
    kVerdicts = 1,    // verdicts in scope were put or invalidated
    kForces = 2,      // a force in scope was put or removed
    kQuarantine = 3,  // quarantine entries of the fingerprint changed
    kEverything = 4,  // changes may have been missed (the store connection was lost and
                      // is back): drop everything cached, for every fingerprint
  };
  What what = What::kEverything;
  std::string fingerprint;       // empty with kEverything
  std::optional<DType> dtype;    // unset: every dtype
  std::optional<Bucket> bucket;  // unset: every bucket (of the dtype, when set)
  std::string origin;            // StoreOptions::origin of the store user that made it

  // Whether a cached entry for (fingerprint, dtype, bucket) may be stale after this change.
  bool Covers(const std::string& fp, DType d, const Bucket& b) const;
};
const char* StoreChangeWhatName(StoreChange::What what);  // "verdicts", "forces", ...

// Held while measuring a bucket; destroying it releases the lease. May outlive
// the store that granted it (release is then a no-op).
class StoreLease {
 public:
  virtual ~StoreLease() = default;
};

// Delivers changes to its callback until destroyed. Destruction waits for a
// callback in progress, so it must not happen inside the callback itself.
class StoreSubscription {
 public:
  virtual ~StoreSubscription() = default;
};

struct StoreOptions {
  // PostgreSQL: a file holding the password (first line). Unset: libpq's own sources,
  // PGPASSWORD or the passfile (PGPASSFILE, ~/.pgpass). Never taken from a flag value.
  std::string password_file;
  // Names this daemon in change notifications (and so in other daemons' logs); empty:
  // "<hostname>:<pid>".
  std::string origin;
  // PostgreSQL: connections for reads and writes (leases and notifications have one
  // each besides), so a daemon holds connections + 2 of the server's max_connections.
  int connections = 2;
  // PostgreSQL: after a failed connection attempt, calls fail UNAVAILABLE at once for
  // this long instead of each waiting on a server that is down.
  double reconnect_interval_seconds = 1.0;
  // PostgreSQL: a connection attempt gives up after this long (unless the URI sets
  // connect_timeout).
  int connect_timeout_seconds = 5;
};

class VerdictStore {
 public:
  // Opens the store `location` names: a postgresql:// or postgres:// URI opens a
  // PostgreSQL store, anything else is a SQLite file path (":memory:" for a private
  // in-memory one). The schema is created or migrated before this returns; a store
  // written by a newer schema is refused (FAILED_PRECONDITION).
  static absl::StatusOr<std::unique_ptr<VerdictStore>> Open(const std::string& location,
                                                            const StoreOptions& options = {});

  virtual ~VerdictStore() = default;
  VerdictStore(const VerdictStore&) = delete;
  VerdictStore& operator=(const VerdictStore&) = delete;

  // What to call this store in logs: the path, or the URI with any password redacted.
  virtual std::string Describe() const = 0;
  // Whether other daemons may share this store (and so leases and notifications mean
  // something beyond this process).
  virtual bool shared() const = 0;
  // The schema version the store holds (0 when it cannot be read).
  virtual int schema_version() const = 0;
  // OK while the store answers; UNAVAILABLE (saying why) while it cannot be reached.
  virtual absl::Status Health() = 0;

  // Inserts or replaces the verdict for (fingerprint, dtype, bucket, scope), results
  // included: a bucket's own verdict, a refinement of one shape or a split half are
  // each their own row, keyed by StoreKeyOf(bucket, scope) (verdict.h). Fields that
  // are not persisted: cost, SM clock (kept in the reason), scoped, transfer.
  virtual absl::Status PutVerdict(const Verdict& v) = 0;
  // The bucket's own verdict (whole scope). NOT_FOUND when absent.
  virtual absl::StatusOr<Verdict> GetVerdict(const std::string& fingerprint, DType dtype,
                                             const Bucket& bucket) = 0;
  virtual absl::StatusOr<std::vector<Verdict>> ListVerdicts(const std::string& fingerprint,
                                                            const VerdictFilter& filter) = 0;
  // The number of verdicts stored for `fingerprint`, counted without loading them.
  virtual absl::StatusOr<int64_t> CountVerdicts(const std::string& fingerprint) = 0;
  // Returns the number of verdicts removed.
  virtual absl::StatusOr<int> Invalidate(const std::string& fingerprint,
                                         const InvalidateScope& scope) = 0;

  // Inserts or replaces the force of (fingerprint, dtype, bucket, scope); INVALID_ARGUMENT
  // for a scope other than the whole bucket or one exact shape of it.
  virtual absl::Status PutForce(const Force& f) = 0;
  // The bucket's own force (whole scope), if any.
  virtual absl::StatusOr<std::optional<Force>> GetForce(const std::string& fingerprint, DType dtype,
                                                        const Bucket& bucket) = 0;
  // Removes the force of exactly that scope (the whole bucket's leaves its shapes'
  // forces). Returns whether one was removed.
  virtual absl::StatusOr<bool> RemoveForce(const std::string& fingerprint, DType dtype,
                                           const Bucket& bucket, const VerdictScope& scope) = 0;
  // Every force of the fingerprint, exact-shape ones included.
  virtual absl::StatusOr<std::vector<Force>> ListForces(const std::string& fingerprint) = 0;

  virtual absl::Status PutQuarantine(const QuarantineEntry& q) = 0;
  virtual absl::StatusOr<std::vector<QuarantineEntry>> ListQuarantine(
      const std::string& fingerprint) = 0;
  // Empty candidate clears every entry of the fingerprint. Returns the number removed.
  virtual absl::StatusOr<int> ClearQuarantine(const std::string& fingerprint,
                                              const std::string& candidate) = 0;

  // The lease on measuring (fingerprint, dtype, bucket, scope): granted (non-null) when
  // no other holder - in this process or, on a shared store, any daemon - has it;
  // nullptr while another holds it. A scope's lease (a refinement of one shape) is
  // apart from its bucket's, and a whole bucket's key is the bucket's alone, as
  // before scopes existed. UNAVAILABLE when the store cannot be reached (the caller
  // decides whether to measure anyway). A holder that dies loses its lease.
  virtual absl::StatusOr<std::unique_ptr<StoreLease>> TryLease(
      const std::string& fingerprint, DType dtype, const Bucket& bucket,
      const VerdictScope& scope = VerdictScope()) = 0;

  // Calls `on_change` (on a store thread; it must be quick and must not block on the
  // store) for each change made through any user of a shared store, this one's
  // included. A store that is not shared never calls it.
  virtual std::unique_ptr<StoreSubscription> Subscribe(
      std::function<void(const StoreChange&)> on_change) = 0;

 protected:
  VerdictStore() = default;
};

// The verdict of `key`'s bucket as the engine serves it: the bucket's own verdict
// with, in `scoped`, its refinements and split halves that raced the same
// candidates (others are stale and left out). nullopt when the bucket has no
// verdict of its own.
absl::StatusOr<std::optional<Verdict>> LoadBucketVerdicts(VerdictStore& store,
                                                          const std::string& fingerprint,
                                                          const BucketKey& key);

// OK when `f`'s scope is its whole bucket or one exact shape inside it;
// INVALID_ARGUMENT saying why otherwise.
absl::Status CheckForceScope(const Force& f);

// What both stores check before they write, so that they refuse the same requests in the
// same words (INVALID_ARGUMENT): a verdict needs its fingerprint; a force its fingerprint,
// candidate and a scope CheckForceScope accepts; a quarantine entry its fingerprint,
// candidate and scope; an invalidation a field that narrows it, or `all`.
absl::Status CheckPutVerdict(const Verdict& v);
absl::Status CheckPutForce(const Force& f);
absl::Status CheckPutQuarantine(const QuarantineEntry& q);
absl::Status CheckInvalidateScope(const InvalidateScope& scope);

// Whether `location` names a PostgreSQL store (postgresql:// or postgres://).
bool IsPostgresUri(const std::string& location);
// `location` with any password it carries (user:PASSWORD@ or password=PASSWORD)
// replaced by "***"; other text unchanged. For logs and error messages.
std::string RedactStoreLocation(const std::string& location);

}  // namespace arbiter
