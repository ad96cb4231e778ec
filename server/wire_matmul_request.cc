#include "server/wire_matmul_request.h"

#include "absl/strings/str_cat.h"
#include "arbiter/wire/split_fields.h"

namespace arbiter::server {
namespace {

std::vector<HostPiece> HostPieces(const std::vector<wire::Piece>& pieces) {
  std::vector<HostPiece> out;
  out.reserve(pieces.size());
  for (const wire::Piece& p : pieces) out.push_back(HostPiece{p.data, p.bytes});
  return out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<WireMatmulRequest>> WireMatmulRequest::Parse(
    const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  if (grpc::Status s = buffer.Dump(&slices); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("the request could not be read: ", s.error_message()));
  }
  return Parse(std::move(slices));
}

absl::StatusOr<std::unique_ptr<WireMatmulRequest>> WireMatmulRequest::Parse(
    std::vector<grpc::Slice> slices) {
  std::unique_ptr<WireMatmulRequest> request(new WireMatmulRequest);
  request->slices_ = std::move(slices);
  wire::SplitMessage split;
  std::string error;
  if (!wire::SplitFields(request->slices_,
                         {v1::MatmulRequest::kAFieldNumber, v1::MatmulRequest::kBFieldNumber}, &split,
                         &error)) {
    return absl::InvalidArgumentError(absl::StrCat("the request is not a MatmulRequest: ", error));
  }
  if (!request->fields_.ParseFromString(split.rest)) {
    return absl::InvalidArgumentError(
        "the request is not a MatmulRequest: its fields other than a and b do not parse (a "
        "malformed nested message, or a string that is not UTF-8)");
  }
  request->a_ = HostPieces(split.fields[0]);
  request->b_ = HostPieces(split.fields[1]);
  return request;
}

}  // namespace arbiter::server
