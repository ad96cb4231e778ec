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

}  // namespace arbiter::testing
