// The wire bytes of Select's replies, each built once per Selection: a Select
// answered from the engine's remembered selections (Arbiter::Remembered) gets
// the same shared Selection every time, so its SelectResponse - the candidate,
// the bucket's text, the verdict with every candidate's figures and reasons -
// is serialized on its first use and then only shared (a gRPC slice's
// reference count), instead of being built and serialized on every call.
//
// Keyed by the Selection's identity: an entry holds a weak reference and
// answers only for the very object it was built from, so a new Selection (a
// new verdict, a force, an invalidation) is never answered with another's
// bytes. Bounded: past `capacity` entries those whose Selection is gone are
// dropped, and if that is not enough, all.
//
// Thread-safe: provides internal synchronization (a reader-writer mutex that
// only Select calls take; a lookup takes it shared).
#pragma once

#include <cstddef>
#include <memory>

#include <grpcpp/support/slice.h>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "engine/selection.h"

namespace arbiter::server {

class SelectReplies {
 public:
  explicit SelectReplies(size_t capacity = 4096) : capacity_(capacity) {}
  SelectReplies(const SelectReplies&) = delete;
  SelectReplies& operator=(const SelectReplies&) = delete;

  // `selection`'s SelectResponse, serialized (server/convert.h's ToProto).
  grpc::Slice Of(const std::shared_ptr<const Selection>& selection);
  size_t size() const;

 private:
  struct Entry {
    std::weak_ptr<const Selection> selection;
    grpc::Slice bytes;
  };

  const size_t capacity_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<const Selection*, Entry> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace arbiter::server
