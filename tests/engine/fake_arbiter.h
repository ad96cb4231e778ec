// An Arbiter for tests of what sits on it (dispatch, regions, the gRPC
// services): the given candidates registered on a FakeBackend, an empty
// in-memory verdict store.
#pragma once

#include <memory>
#include <vector>

#include "engine/arbiter.h"
#include "engine/registry.h"
#include "engine/status.h"
#include "engine/verdict_store.h"
#include "tests/engine/fake_backend.h"

namespace arbiter::testing {

// `backend` may be one the test keeps a view of (FakeBackend::ShareEvents).
inline absl::StatusOr<std::unique_ptr<Arbiter>> FakeArbiter(
    const ArbiterOptions& options, std::vector<CandidateSpec> candidates,
    std::unique_ptr<FakeBackend> backend = std::make_unique<FakeBackend>()) {
  ASSIGN_OR_RETURN(std::unique_ptr<Registry> registry,
                   Registry::Create(std::move(candidates), *backend));
  ASSIGN_OR_RETURN(std::unique_ptr<VerdictStore> store, VerdictStore::Open(":memory:"));
  return Arbiter::Create(options, std::move(backend), std::move(registry), std::move(store));
}

// One candidate ("naive", tier 1, kernel `run`), one worker, tuning off: every
// dispatch runs `run` on `backend` without measuring first.
inline absl::StatusOr<std::unique_ptr<Arbiter>> OneKernelArbiter(std::unique_ptr<FakeBackend> backend,
                                                                 KernelFn run) {
  std::vector<CandidateSpec> candidates;
  candidates.push_back(FakeCandidate("naive", 1, std::move(run)));
  ArbiterOptions options;
  options.workers = 1;
  options.tuning = TuningPolicy::kOff;
  return FakeArbiter(options, std::move(candidates), std::move(backend));
}

}  // namespace arbiter::testing
