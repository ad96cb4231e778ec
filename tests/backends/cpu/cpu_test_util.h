// Helpers for the CPU tests: run one candidate member on a CpuBackend with
// random operands and NaN-poisoned C, and check it against the backend's
// reference with the engine's oracle.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "engine/candidate.h"
#include "engine/measurer.h"
#include "engine/oracle.h"

namespace arbiter::testing {

struct Operands {
  Problem problem;
  std::vector<uint8_t> a, b;
};

inline Operands RandomOperands(const Problem& p, uint64_t seed) {
  Operands ops{p, std::vector<uint8_t>(p.a_bytes()), std::vector<uint8_t>(p.b_bytes())};
  FillRandom(p.dtype, ops.a.data(), static_cast<size_t>(p.m * p.k), seed);
  FillRandom(p.dtype, ops.b.data(), static_cast<size_t>(p.k * p.n), seed * 31 + 7);
  return ops;
}

// A backend, one stream and device copies of a problem's operands.
class CpuHarness {
 public:
  explicit CpuHarness(int threads = 2) {
    CpuBackendOptions options;
    options.threads = threads;
    backend_ = CpuBackend::Create(options).value();
    stream_ = backend_->CreateStream().value();
  }
  CpuBackend& backend() { return *backend_; }
  Stream& stream() { return *stream_; }

  // Runs `member` on `ops` into a C of `c_elements` (>= M*N) elements, all
  // poisoned with NaN first; returns C's bytes, or the kernel's error.
  absl::StatusOr<std::vector<uint8_t>> Run(const CandidateMember& member, const Operands& ops,
                                           size_t c_elements = 0) {
    const Problem& p = ops.problem;
    if (c_elements == 0) c_elements = static_cast<size_t>(p.m * p.n);
    const size_t c_bytes = c_elements * ElementSize(p.dtype);
    ASSIGN_OR_RETURN(std::unique_ptr<Buffer> a, backend_->Allocate(p.a_bytes()));
    ASSIGN_OR_RETURN(std::unique_ptr<Buffer> b, backend_->Allocate(p.b_bytes()));
    ASSIGN_OR_RETURN(std::unique_ptr<Buffer> c, backend_->Allocate(c_bytes));
    RETURN_IF_ERROR(stream_->CopyToDevice(*a, ops.a.data(), p.a_bytes()));
    RETURN_IF_ERROR(stream_->CopyToDevice(*b, ops.b.data(), p.b_bytes()));
    RETURN_IF_ERROR(stream_->Poison(*c, p.dtype, c_elements));
    RETURN_IF_ERROR(member.run(GemmArgs{p, a->data(), b->data(), c->data(), stream_.get()}));
    RETURN_IF_ERROR(stream_->Synchronize());
    std::vector<uint8_t> out(c_bytes);
    RETURN_IF_ERROR(stream_->CopyToHost(out.data(), *c, c_bytes));
    return out;
  }

  absl::StatusOr<std::vector<double>> Reference(const Operands& ops) {
    const Problem& p = ops.problem;
    ASSIGN_OR_RETURN(std::unique_ptr<Buffer> a, backend_->Allocate(p.a_bytes()));
    ASSIGN_OR_RETURN(std::unique_ptr<Buffer> b, backend_->Allocate(p.b_bytes()));
    RETURN_IF_ERROR(stream_->CopyToDevice(*a, ops.a.data(), p.a_bytes()));
    RETURN_IF_ERROR(stream_->CopyToDevice(*b, ops.b.data(), p.b_bytes()));
    std::vector<double> ref;
    RETURN_IF_ERROR(stream_->Reference(p, *a, *b, &ref));
    return ref;
  }

 private:
  std::unique_ptr<CpuBackend> backend_;
  std::unique_ptr<Stream> stream_;
};

inline const CandidateSpec& FindCandidate(const std::vector<CandidateSpec>& all,
                                          const std::string& name) {
  for (const CandidateSpec& c : all) {
    if (c.name == name) return c;
  }
  static const CandidateSpec kNone;
  return kNone;
}

}  // namespace arbiter::testing
