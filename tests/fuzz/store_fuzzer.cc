// libFuzzer target: arbitrary bytes as the verdict store's file, then opened
// the way arbiterd opens it at start and read the way it serves. A file that is
// not a store, or a store that is broken, must be refused with a status or
// read without fault - never crash the daemon or be served from as if whole.
//
// The committed corpus (tests/fuzz/corpus/store_fuzzer) starts from a store written by
// this tree's VerdictStore holding a verdict, a force and a quarantine entry
// under kFingerprint (ARBITER_STORE_FUZZ_WRITE_SEED=path writes it: see
// tests/fuzz/make_corpus.py), so mutations reach the schema and the rows, not
// only SQLite's header checks.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "engine/bucket.h"
#include "engine/verdict_store.h"

namespace {

constexpr char kFingerprint[] = "fuzz-device";

// Writes `data` to a file of this process's own and returns its path.
std::string WriteStoreFile(const uint8_t* data, size_t size) {
  static const std::string path =
      (getenv("TMPDIR") ? std::string(getenv("TMPDIR")) : std::string("/tmp")) +
      "/arbiter-store-fuzz-" + std::to_string(getpid()) + ".sqlite";
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) std::remove((path + suffix).c_str());
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return path;
  if (size > 0) std::fwrite(data, 1, size, f);
  std::fclose(f);
  return path;
}

// A store holding one of each row under kFingerprint, written at `path`.
void WriteSeed(const std::string& path) {
  using namespace arbiter;
  auto store = VerdictStore::Open(path);
  if (!store.ok()) std::abort();
  const Bucket bucket = BucketOf(Problem{DType::kF32, 64, 64, 64});
  Verdict v;
  v.fingerprint = kFingerprint;
  v.bucket = bucket;
  v.candidates = "cpu_blocked@1,openblas@1";
  v.winner = "openblas";
  v.winner_version = 1;
  v.reason = "seed";
  v.measured = Problem{DType::kF32, 64, 64, 64};
  v.results.push_back(CandidateResult{.name = "openblas", .version = 1, .tier = 3,
                                      .state = ResultState::kTimed, .reason = "", .median_seconds = 1e-5,
                                      .spread = 0.01, .samples = 5});
  v.results.push_back(CandidateResult{.name = "cpu_blocked", .version = 1, .tier = 2,
                                      .state = ResultState::kFailedOracle, .reason = "seed"});
  v.created_unix = 1;
  const Force force{kFingerprint, DType::kBF16, bucket, "cpu_blocked", "seed", 1, VerdictScope()};
  const QuarantineEntry q{"cpu_reference", 1, "f32", kFingerprint, "seed", 1};
  if (!(*store)->PutVerdict(v).ok() || !(*store)->PutForce(force).ok() ||
      !(*store)->PutQuarantine(q).ok()) {
    std::abort();
  }
}

}  // namespace

// ARBITER_STORE_FUZZ_WRITE_SEED=path: write the seed store there and exit.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* seed = std::getenv("ARBITER_STORE_FUZZ_WRITE_SEED")) {
    WriteSeed(seed);
    std::exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace arbiter;
  const std::string path = WriteStoreFile(data, size);
  absl::StatusOr<std::unique_ptr<VerdictStore>> store = VerdictStore::Open(path);
  if (!store.ok()) return 0;
  VerdictStore& s = **store;
  const Bucket bucket = BucketOf(Problem{DType::kF32, 64, 64, 64});
  // What a starting daemon and its first requests read.
  (void)s.CountVerdicts(kFingerprint);
  (void)s.ListVerdicts(kFingerprint, VerdictFilter{});
  (void)s.ListForces(kFingerprint);
  (void)s.ListQuarantine(kFingerprint);
  (void)s.GetVerdict(kFingerprint, DType::kF32, bucket);
  (void)s.GetForce(kFingerprint, DType::kF32, bucket);
  // And what it writes: a force, then an invalidation.
  (void)s.PutForce(
      Force{kFingerprint, DType::kF32, bucket, "cpu_blocked", "fuzz", 1, VerdictScope()});
  (void)s.Invalidate(kFingerprint, InvalidateScope{.candidate = {}, .dtype = {}, .bucket = {}, .all = true});
  return 0;
}
