// What the engine's rooms borrow, for tests of one room at a time: a registry
// over a FakeBackend, an in-memory verdict store, the device's quarantine and a
// pool of fake streams. Start builds them; the FakeEngine owns them all.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/quarantine.h"
#include "engine/registry.h"
#include "engine/stream_pool.h"
#include "engine/verdict_store.h"
#include "tests/engine/fake_backend.h"

namespace arbiter::testing {

// `streams` fake streams; a bounded Acquire waits behind at most `max_waiters` callers.
inline std::unique_ptr<StreamPool> FakeStreamPool(int streams, size_t max_waiters) {
  std::vector<std::unique_ptr<Stream>> s;
  for (int i = 0; i < streams; ++i) s.push_back(std::make_unique<FakeStream>());
  return std::make_unique<StreamPool>(std::move(s), max_waiters);
}

struct FakeEngine {
  // Registers `candidates` on the fake device, opens an empty store and loads
  // its quarantine; one stream, up to four waiting for it.
  absl::Status Start(std::vector<CandidateSpec> candidates) {
    ASSIGN_OR_RETURN(registry, Registry::Create(std::move(candidates), backend));
    ASSIGN_OR_RETURN(store, VerdictStore::Open(":memory:"));
    ASSIGN_OR_RETURN(quarantine, Quarantine::Create(*store, fingerprint()));
    streams = FakeStreamPool(1, 4);
    return absl::OkStatus();
  }
  std::string fingerprint() const { return backend.info().Fingerprint(); }
  // The registered candidate `name` (which must exist).
  const CandidateSpec& Spec(const std::string& name) const { return registry->Find(name)->spec; }

  FakeBackend backend;
  std::unique_ptr<Registry> registry;
  std::unique_ptr<VerdictStore> store;
  std::unique_ptr<Quarantine> quarantine;
  std::unique_ptr<StreamPool> streams;
};

}  // namespace arbiter::testing
