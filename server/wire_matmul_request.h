// A MatmulRequest read from its wire bytes without copying A and B out of
// them. Parsing the message with protobuf would copy each operand into a
// std::string - grown in steps past 50 MB, on fresh pages every call - before
// the operand is copied again to the device. Here only the small fields (the
// problem, the refs, the policies) are parsed into a MatmulRequest whose a and
// b stay empty; A and B are left where gRPC received them, as pieces of the
// message's slices, which this object holds alive, to be gathered straight
// into their destination (pinned staging on a GPU, the operand buffer on the
// CPU).
//
// The message means what protobuf would read it as: fields in any order, the
// last of a repeated singular field winning, unknown fields kept aside. Bytes
// protobuf would refuse are refused (INVALID_ARGUMENT, saying what and where).
//
// Not copyable: the pieces point into the slices it holds, some of which keep
// their bytes inline. Not thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include "arbiter/v1/arbiter.pb.h"
#include "engine/backend.h"
#include "engine/status.h"

namespace arbiter::server {

class WireMatmulRequest {
 public:
  // INVALID_ARGUMENT "the request is not a MatmulRequest: <what> at byte <n>"
  // for bytes protobuf would not parse.
  static absl::StatusOr<std::unique_ptr<WireMatmulRequest>> Parse(const grpc::ByteBuffer& buffer);
  // The same over slices already taken out of a ByteBuffer (tests split them at will).
  static absl::StatusOr<std::unique_ptr<WireMatmulRequest>> Parse(std::vector<grpc::Slice> slices);

  WireMatmulRequest(const WireMatmulRequest&) = delete;
  WireMatmulRequest& operator=(const WireMatmulRequest&) = delete;

  // Every field but a and b (which are empty here).
  const v1::MatmulRequest& fields() const { return fields_; }
  // A's and B's bytes, in order; empty when the request carries none.
  const std::vector<HostPiece>& a() const { return a_; }
  const std::vector<HostPiece>& b() const { return b_; }
  size_t a_bytes() const { return TotalBytes(a_); }
  size_t b_bytes() const { return TotalBytes(b_); }

 private:
  WireMatmulRequest() = default;

  std::vector<grpc::Slice> slices_;  // the message; a_ and b_ point into it
  v1::MatmulRequest fields_;
  std::vector<HostPiece> a_, b_;
};

}  // namespace arbiter::server
