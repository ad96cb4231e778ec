// The client a piece of engine work is for: how long it waits (its deadline),
// whether it has gone away (a probe the server wires to gRPC's
// ServerContext::IsCancelled), and who it is (per-peer limits). Every wait in
// the engine on behalf of a client - for a device stream, for a measurement -
// ends as soon as the client stops waiting. A default CallContext waits forever
// and never goes away (engine tests, background work).
//
// Thread-safe: a value; `cancelled` is called from whichever thread waits.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "absl/time/time.h"
#include "engine/status.h"

namespace arbiter {

using Deadline = std::optional<std::chrono::system_clock::time_point>;

// How often a wait polls `cancelled`: gRPC's synchronous API has no callback on
// cancellation, so a client that went away is noticed within this long.
inline constexpr absl::Duration kCancelPollInterval = absl::Milliseconds(20);

struct CallContext {
  Deadline deadline;                // unset: waits without limit
  std::function<bool()> cancelled;  // true once the client went away; unset: never
  std::string peer;                 // who asked (address without port); empty: the daemon itself

  // OK while the client still waits; else DEADLINE_EXCEEDED or CANCELLED, saying
  // where it stopped waiting (`where`, e.g. "while queued for a device stream").
  absl::Status StillWaiting(const char* where) const;
  // When a wait for this client should wake to look again: the deadline, or one
  // poll interval from now when `cancelled` is set, whichever is first.
  absl::Time WakeBy() const;
};

}  // namespace arbiter
