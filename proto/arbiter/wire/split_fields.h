// Reads a protobuf message from the slices gRPC received it in, setting aside
// chosen length-delimited fields - a Matmul's operands, its reply's C - as
// pieces of those slices instead of copying them. Parsing such a message with
// protobuf copies each bytes field into a std::string (grown in steps past
// 50 MB, on fresh pages every time) before the caller copies it once more to
// where it is needed; here the caller gathers the pieces straight there.
//
// The other fields are re-encoded, as they came, into `rest`, for protobuf to
// parse (fields in any order, unknown fields and groups kept). A set-aside
// field means what protobuf would read: its last occurrence wins. Bytes protobuf
// would refuse as a message are refused here, saying what and at which byte;
// whatever `rest` holds is protobuf's to judge.
//
// Shared by the daemon (requests) and the client library (replies), which
// depends on the wire contract alone. Thread-safe: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <grpcpp/support/slice.h>

namespace arbiter::wire {

// Bytes in one piece of a slice; the slice owns them.
struct Piece {
  const uint8_t* data = nullptr;
  size_t bytes = 0;
};

struct SplitMessage {
  std::string rest;                         // every field not set aside, for protobuf
  std::vector<std::vector<Piece>> fields;   // per field asked for: its bytes, in order
};

// Splits the message in `slices` (which must outlive the pieces), setting aside
// the length-delimited fields numbered `set_aside` (out->fields[i] for
// set_aside[i]; empty when absent). False with `error` saying why for bytes that
// are no protobuf message.
bool SplitFields(const std::vector<grpc::Slice>& slices, const std::vector<uint32_t>& set_aside,
                 SplitMessage* out, std::string* error);

size_t TotalBytes(const std::vector<Piece>& pieces);

}  // namespace arbiter::wire
