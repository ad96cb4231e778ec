// Who owns a region or a resident tensor. The server fills it in: a session
// (the fd socket connection of one process, with its SO_PEERCRED credentials)
// or, over TCP, the connection's address.
//
// Ownership is by `owner()`: a region or tensor is usable and releasable only
// by the peer whose owner() registered it. Quotas count by `quota_key()`: every
// session of one process shares its quota, so opening more sessions does not
// buy more.
#pragma once

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"

namespace arbiter {

struct Peer {
  uint64_t session = 0;  // the daemon's number for the session; 0: a TCP connection
  int pid = 0;           // SO_PEERCRED of the session's connection
  int uid = -1;
  int gid = -1;
  std::string address;   // the TCP peer ("ipv4:10.0.0.7:53122") when there is no session

  std::string owner() const { return session != 0 ? absl::StrCat("session:", session) : address; }
  // owner() == other.owner(), without building either: this runs on every
  // zero-copy Matmul, once per operand named by ref.
  bool SameOwner(const Peer& other) const {
    return session != 0 ? session == other.session : other.session == 0 && address == other.address;
  }
  std::string quota_key() const { return session != 0 ? absl::StrCat("pid:", pid) : address; }
  // "session 3 (pid 1234, uid 1000)" or the TCP address, for listings and errors.
  std::string ToString() const {
    return session != 0 ? absl::StrCat("session ", session, " (pid ", pid, ", uid ", uid, ")")
                        : address;
  }
};

}  // namespace arbiter
