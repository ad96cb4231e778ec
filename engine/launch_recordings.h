// Which launches a stream replays from a recording of them instead of launching
// them again (Stream::Launch). On a GPU a candidate's launch costs the host
// 10-40 us (cuBLAS's heuristics and argument checks, a woken thread's cold
// caches: bench/results/launch-cost-h200.md) and a recording of the same work
// (a CUDA graph) a few; a dispatch that names the same operands again (a
// same-node client's regions, the pool's recycled buffers) enqueues the same
// work again, so it replays it.
//
// The policy, per key (candidate and version, problem, operand addresses):
// its first launch runs as it is (a key seen once may never come again, and a
// recording costs more than a launch); its second is recorded and the
// recording replayed; later ones replay. A recording is kept while the
// stream's shared resources are the ones it was made with (`generation`: a
// candidate's scratch grown since points elsewhere); all are dropped when the
// generation moves. A candidate whose work cannot be recorded (the recorder
// refuses it) runs as it is from then on. At most `capacity` recordings are
// kept, the least recently used dropped first.
//
// Not thread-safe: owned by one stream, which one worker uses at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "engine/backend.h"
#include "engine/status.h"

namespace arbiter {

// What a backend records and replays: an opaque recording (on CUDA an
// instantiated graph) of the device work a launch enqueues.
class LaunchRecorder {
 public:
  virtual ~LaunchRecorder() = default;
  // Records what `launch` enqueues without running it. An error when the work
  // cannot be recorded (or `launch` failed while recording): nothing was enqueued.
  virtual absl::StatusOr<void*> Record(absl::FunctionRef<absl::Status()> launch) = 0;
  // Enqueues a recording's work.
  virtual absl::Status Replay(void* recording) = 0;
  virtual void Destroy(void* recording) = 0;
};

class LaunchRecordings {
 public:
  // How each launch went, since construction.
  struct Counts {
    int64_t direct = 0;      // launched as it is
    int64_t recorded = 0;    // recorded (and the recording replayed)
    int64_t replayed = 0;    // a kept recording replayed
    int64_t refused = 0;     // recordings the recorder refused
  };

  explicit LaunchRecordings(LaunchRecorder& recorder, size_t capacity = 64);
  ~LaunchRecordings();
  LaunchRecordings(const LaunchRecordings&) = delete;
  LaunchRecordings& operator=(const LaunchRecordings&) = delete;

  // Enqueues `key`'s work: `launch` itself, or a recording of it (the policy above).
  absl::Status Launch(const LaunchKey& key, uint64_t generation,
                      absl::FunctionRef<absl::Status()> launch);

  // Whether Launch(key, generation, ...) would replay a recording.
  bool Has(const LaunchKey& key, uint64_t generation) const;

  size_t size() const { return kept_.size(); }
  const Counts& counts() const { return counts_; }

 private:
  struct Owned {  // a LaunchKey that owns its candidate's name
    std::string candidate;
    LaunchKey key;  // its candidate left empty: a view of a name kept elsewhere could dangle
    static Owned Of(const LaunchKey& k) {
      Owned o{std::string(k.candidate), k};
      o.key.candidate = {};
      return o;
    }
    bool Is(const LaunchKey& k) const {  // the addresses first: they differ most, and cheaply
      return key.c == k.c && key.a == k.a && key.b == k.b && key.problem == k.problem &&
             key.timed == k.timed && key.version == k.version && candidate == k.candidate;
    }
  };
  struct Kept {
    Owned key;
    void* recording = nullptr;
  };

  void DropAll();
  // Whether `key` was launched once before (and remembers it if not).
  bool SeenBefore(const LaunchKey& key);

  LaunchRecorder& recorder_;
  const size_t capacity_;
  uint64_t generation_ = 0;
  std::list<Kept> kept_;        // most recently used first
  std::list<Owned> seen_once_;  // keys launched once, most recent first; at most capacity_ * 4
  absl::flat_hash_set<std::string> refused_;  // "candidate@version" never recorded again
  Counts counts_;
};

}  // namespace arbiter
