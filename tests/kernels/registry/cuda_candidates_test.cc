// Every CUDA candidate built into this binary (CudaCandidates: the cuBLAS
// delegates and the hand-written kernel families) against the device f64
// reference, on NaN-poisoned C, across square, skinny (M 1..64), large-K,
// ragged and non-square shapes; shapes a contract does not cover are skipped
// by its declared coverage, never by trying. Then the determinism claims are
// checked by running them. Skips (saying so) without a GPU.
//
// Each check prints one line "CHECK <candidate> <problem> ..." with its error
// numbers, for tests/device/RESULTS.md.
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_resources.h"
#include "backends/cuda/cuda_stream.h"
#include "engine/candidate.h"
#include "engine/contract.h"
#include "engine/launch_recordings.h"
#include "engine/measurer.h"
#include "engine/oracle.h"
#include "kernels/registry/cuda_candidates.h"

namespace arbiter::cuda {
namespace {

struct Env {
  std::unique_ptr<CudaBackend> backend;
  std::unique_ptr<Stream> stream;
  std::vector<CandidateSpec> candidates;
};

// One backend and stream for the whole binary (a context per test would cost seconds).
Env* Shared() {
  static Env* env = [] {
    auto* e = new Env;
    if (CudaBackend::VisibleDevices() == 0) return e;
    auto backend = CudaBackend::Create({});
    if (!backend.ok()) {
      std::fprintf(stderr, "CudaBackend::Create: %s\n", backend.status().ToString().c_str());
      return e;
    }
    e->backend = std::move(*backend);
    auto stream = e->backend->CreateStream();
    if (!stream.ok()) {
      std::fprintf(stderr, "CreateStream: %s\n", stream.status().ToString().c_str());
      e->backend.reset();
      return e;
    }
    e->stream = std::move(*stream);
    e->candidates = CudaCandidates(*e->backend);
    return e;
  }();
  return env;
}

#define SETUP_OR_SKIP(env)                                                            \
  Env* env = Shared();                                                                \
  if (CudaBackend::VisibleDevices() == 0) {                                           \
    GTEST_SKIP() << "no CUDA device visible: GPU test skipped, not passed";           \
  }                                                                                   \
  ASSERT_NE(env->backend, nullptr) << "a GPU is visible but the backend did not start"

// Why `member` of `spec` may not run `p` here ("" when it may).
std::string Gap(const Env& env, const CandidateSpec& spec, const CandidateMember& member,
                const Problem& p) {
  if (std::string g = env.backend->ArchitectureGap(member.contract.arch); !g.empty()) return g;
  return CoverageGap(member.contract.shape, p);
}

struct Operands {
  std::unique_ptr<Buffer> a, b, c;
  std::vector<double> ref;
};

absl::Status MakeOperands(Env& env, const Problem& p, uint64_t seed, Operands* out,
                          std::vector<unsigned char>* host_a = nullptr) {
  std::vector<unsigned char> a(p.a_bytes()), b(p.b_bytes());
  FillRandom(p.dtype, a.data(), p.m * p.k, seed);
  FillRandom(p.dtype, b.data(), p.k * p.n, seed * 31 + 1);
  ASSIGN_OR_RETURN(out->a, env.backend->Allocate(p.a_bytes()));
  ASSIGN_OR_RETURN(out->b, env.backend->Allocate(p.b_bytes()));
  ASSIGN_OR_RETURN(out->c, env.backend->Allocate(p.c_bytes()));
  RETURN_IF_ERROR(env.stream->CopyToDevice(*out->a, a.data(), a.size()));
  RETURN_IF_ERROR(env.stream->CopyToDevice(*out->b, b.data(), b.size()));
  RETURN_IF_ERROR(env.stream->Reference(p, *out->a, *out->b, &out->ref));
  if (host_a != nullptr) *host_a = std::move(a);
  return absl::OkStatus();
}

// Poisons C, runs the member, returns C on the host.
absl::Status RunPoisoned(Env& env, const CandidateMember& member, const Problem& p,
                         const void* a, const void* b, Buffer& c, std::vector<unsigned char>* out) {
  RETURN_IF_ERROR(env.stream->Poison(c, p.dtype, p.m * p.n));
  RETURN_IF_ERROR(member.run(GemmArgs{p, a, b, c.data(), env.stream.get()}));
  out->resize(p.c_bytes());
  return env.stream->CopyToHost(out->data(), c, p.c_bytes());
}

struct ShapeCase {
  const char* kind;
  int64_t m, n, k;
};

// Square; skinny (M 1..64); large K; ragged; non-square both ways (M != N pins
// each kernel's grid axes: a transposed launch leaves poisoned C unwritten);
// and the unaligned-leading-dim cliff shape.
const ShapeCase kShapes[] = {
    {"square", 128, 128, 128},     {"square", 1024, 1024, 1024}, {"skinny", 1, 4096, 4096},
    {"skinny", 1, 1000, 777},      {"skinny", 7, 2048, 2048},    {"skinny", 16, 2048, 2048},
    {"skinny", 33, 512, 1000},     {"skinny", 64, 2048, 2048},   {"large_k", 16, 16, 65536},
    {"ragged", 777, 333, 2049},    {"ragged", 1, 1, 1},          {"nonsquare", 256, 1024, 512},
    {"nonsquare", 1000, 96, 304},  {"nonsquare", 96, 1000, 304}, {"unaligned", 2047, 2047, 2047},
};

class CudaCandidatesTest : public ::testing::TestWithParam<std::tuple<DType, ShapeCase>> {};

TEST_P(CudaCandidatesTest, EveryCoveringCandidateMatchesTheReferenceOnPoisonedOutput) {
  SETUP_OR_SKIP(env);
  const auto [dtype, shape] = GetParam();
  const Problem p{dtype, shape.m, shape.n, shape.k};
  Operands ops;
  absl::Status made = MakeOperands(*env, p, 1234 + shape.m * 7 + shape.n, &ops);
  ASSERT_TRUE(made.ok()) << made;
  int checked = 0;
  for (const CandidateSpec& spec : env->candidates) {
    const CandidateMember* member = spec.Member(dtype);
    if (member == nullptr) continue;
    if (std::string gap = Gap(*env, spec, *member, p); !gap.empty()) {
      std::printf("CHECK %-16s %-26s SKIP (%s)\n", spec.name.c_str(), p.ToString().c_str(),
                  gap.c_str());
      continue;
    }
    std::vector<unsigned char> c;
    absl::Status run = RunPoisoned(*env, *member, p, ops.a->data(), ops.b->data(), *ops.c, &c);
    if (absl::IsUnimplemented(run)) {  // a declared decline, e.g. a heuristic rank not offered
      std::printf("CHECK %-16s %-26s DECLINED (%s)\n", spec.name.c_str(), p.ToString().c_str(),
                  std::string(run.message()).c_str());
      continue;
    }
    if (!run.ok()) {  // one failing candidate must not hide the others
      ADD_FAILURE() << spec.name << " on " << p << ": " << run;
      std::printf("CHECK %-16s %-26s ERROR %s\n", spec.name.c_str(), p.ToString().c_str(),
                  run.ToString().c_str());
      continue;
    }
    const OracleReport report = CheckOutput(p, member->contract.accuracy, c.data(), ops.ref);
    std::printf("CHECK %-16s %-26s %s max_abs=%.3g max_rel=%.3g rel_budget=%.3g nonfinite=%" PRId64
                "\n",
                spec.name.c_str(), p.ToString().c_str(), report.pass ? "PASS" : "FAIL",
                report.max_abs_error, report.max_rel_error,
                member->contract.accuracy.rel * std::sqrt(static_cast<double>(p.k)),
                report.nonfinite);
    EXPECT_TRUE(report.pass) << spec.name << " on " << p << ": " << report.detail
                             << " (nonfinite " << report.nonfinite << ", over budget "
                             << report.out_of_budget << ")";
    ++checked;
  }
  EXPECT_GT(checked, 0) << "no candidate covers " << p;
}

std::string ShapeName(const ::testing::TestParamInfo<std::tuple<DType, ShapeCase>>& info) {
  const auto& [dtype, s] = info.param;
  return absl::StrCat(s.kind, "_", s.m, "x", s.n, "x", s.k, "_", DTypeName(dtype));
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaCandidatesTest,
                         ::testing::Combine(::testing::Values(DType::kF16, DType::kBF16,
                                                              DType::kF32),
                                            ::testing::ValuesIn(kShapes)),
                         ShapeName);

size_t BitDifferences(const std::vector<unsigned char>& x, const std::vector<unsigned char>& y,
                      size_t es, size_t count) {
  size_t diff = 0;
  for (size_t i = 0; i < count; ++i) diff += std::memcmp(&x[i * es], &y[i * es], es) != 0;
  return diff;
}

class CudaDeterminismTest : public ::testing::TestWithParam<DType> {};

// run_to_run: two runs on identical inputs agree bitwise.
TEST_P(CudaDeterminismTest, RunToRunClaimsHoldBitwise) {
  SETUP_OR_SKIP(env);
  const DType dtype = GetParam();
  for (const ShapeCase& s : {ShapeCase{"ragged", 777, 333, 2049}, ShapeCase{"skinny", 4, 2048, 4096},
                             ShapeCase{"large_k", 16, 16, 65536}}) {
    const Problem p{dtype, s.m, s.n, s.k};
    Operands ops;
    ASSERT_TRUE(MakeOperands(*env, p, 99, &ops).ok());
    for (const CandidateSpec& spec : env->candidates) {
      const CandidateMember* member = spec.Member(dtype);
      if (member == nullptr || member->contract.determinism < Determinism::kRunToRun) continue;
      if (!Gap(*env, spec, *member, p).empty()) continue;
      std::vector<unsigned char> first, second;
      absl::Status r1 = RunPoisoned(*env, *member, p, ops.a->data(), ops.b->data(), *ops.c, &first);
      if (absl::IsUnimplemented(r1)) continue;
      absl::Status r2 = r1.ok() ? RunPoisoned(*env, *member, p, ops.a->data(), ops.b->data(),
                                              *ops.c, &second)
                                : r1;
      if (!r2.ok()) {  // the oracle test reports the error; keep checking the others
        ADD_FAILURE() << spec.name << " on " << p << ": " << r2;
        continue;
      }
      const size_t diff = BitDifferences(first, second, ElementSize(dtype), p.m * p.n);
      std::printf("DETERMINISM %-16s %-26s run_to_run %s (%zu differing)\n", spec.name.c_str(),
                  p.ToString().c_str(), diff == 0 ? "PASS" : "FAIL", diff);
      EXPECT_EQ(diff, 0u) << spec.name << " claims " << member->contract.determinism << " on "
                          << p;
    }
  }
}

// batch_invariant: the first rows of C computed at a small M equal the same
// rows computed inside a larger M, bitwise.
TEST_P(CudaDeterminismTest, BatchInvariantClaimsHoldAcrossM) {
  SETUP_OR_SKIP(env);
  const DType dtype = GetParam();
  const int64_t big_m = 256, n = 384, k = 1000;
  const Problem big{dtype, big_m, n, k};
  Operands ops;
  ASSERT_TRUE(MakeOperands(*env, big, 5, &ops).ok());
  int checked = 0;
  for (const CandidateSpec& spec : env->candidates) {
    const CandidateMember* member = spec.Member(dtype);
    if (member == nullptr || member->contract.determinism < Determinism::kBatchInvariant) continue;
    if (!Gap(*env, spec, *member, big).empty()) continue;
    std::vector<unsigned char> full;
    absl::Status r = RunPoisoned(*env, *member, big, ops.a->data(), ops.b->data(), *ops.c, &full);
    if (absl::IsUnimplemented(r)) continue;
    if (!r.ok()) {
      ADD_FAILURE() << spec.name << " on " << big << ": " << r;
      continue;
    }
    for (int64_t m : {1, 5, 16, 64, 200}) {
      const Problem small{dtype, m, n, k};
      if (!Gap(*env, spec, *member, small).empty()) continue;
      std::vector<unsigned char> rows;
      absl::Status rs = RunPoisoned(*env, *member, small, ops.a->data(), ops.b->data(), *ops.c, &rows);
      if (absl::IsUnimplemented(rs)) continue;
      if (!rs.ok()) {
        ADD_FAILURE() << spec.name << " at M=" << m << ": " << rs;
        continue;
      }
      const size_t diff = BitDifferences(full, rows, ElementSize(dtype), m * n);
      std::printf("DETERMINISM %-16s %-26s batch_invariant M=%" PRId64 " vs %" PRId64 " %s (%zu differing)\n",
                  spec.name.c_str(), small.ToString().c_str(), m, big_m,
                  diff == 0 ? "PASS" : "FAIL", diff);
      EXPECT_EQ(diff, 0u) << spec.name << " claims batch_invariant: rows at M=" << m
                          << " differ from M=" << big_m;
      ++checked;
    }
  }
  if (checked == 0) GTEST_SKIP() << "no candidate claims batch_invariant for " << DTypeName(dtype);
}

INSTANTIATE_TEST_SUITE_P(DTypes, CudaDeterminismTest,
                         ::testing::Values(DType::kF16, DType::kBF16, DType::kF32),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(DTypeName(info.param));
                         });

// Dispatches replay a CUDA graph of a launch from the second launch of the same
// candidate, problem and operands on (CudaStream::Launch): what a replay writes
// must be what the launch itself writes, for every candidate, and a replay must
// never stand in for a launch on other operands or on a scratch that moved.
class CudaLaunchGraphsTest : public ::testing::TestWithParam<DType> {};

// Poisons C, enqueues the member through the stream's Launch under its key,
// returns C on the host.
absl::Status LaunchPoisoned(Env& env, const CandidateSpec& spec, const CandidateMember& member,
                            const Problem& p, const void* a, const void* b, Buffer& c,
                            std::vector<unsigned char>* out) {
  RETURN_IF_ERROR(env.stream->Poison(c, p.dtype, p.m * p.n));
  const LaunchKey key{spec.name, spec.version, p, a, b, c.data()};
  RETURN_IF_ERROR(env.stream->Launch(
      key, [&] { return member.run(GemmArgs{p, a, b, c.data(), env.stream.get()}); }));
  out->resize(p.c_bytes());
  return env.stream->CopyToHost(out->data(), c, p.c_bytes());
}

const LaunchRecordings::Counts& CountsOf(Env& env) {
  auto* cs = dynamic_cast<CudaStream*>(env.stream.get());
  static const LaunchRecordings::Counts kNone;
  return cs == nullptr || cs->recordings() == nullptr ? kNone : cs->recordings()->counts();
}

TEST_P(CudaLaunchGraphsTest, ReplaysWriteWhatTheLaunchWrites) {
  SETUP_OR_SKIP(env);
  const DType dtype = GetParam();
  ASSERT_NE(dynamic_cast<CudaStream*>(env->stream.get())->recordings(), nullptr)
      << "the default CudaBackendOptions keep launch graphs";
  int replayed = 0;
  for (const ShapeCase& s : {ShapeCase{"ragged", 777, 333, 2049}, ShapeCase{"skinny", 1, 4096, 4096},
                             ShapeCase{"skinny", 16, 2048, 2048}, ShapeCase{"large_k", 16, 16, 65536},
                             ShapeCase{"nonsquare", 1000, 96, 304}, ShapeCase{"unaligned", 2047, 2047, 2047}}) {
    const Problem p{dtype, s.m, s.n, s.k};
    Operands ops;
    ASSERT_TRUE(MakeOperands(*env, p, 4242 + s.m, &ops).ok());
    for (const CandidateSpec& spec : env->candidates) {
      const CandidateMember* member = spec.Member(dtype);
      if (member == nullptr || !Gap(*env, spec, *member, p).empty()) continue;
      std::vector<unsigned char> direct;
      absl::Status r = RunPoisoned(*env, *member, p, ops.a->data(), ops.b->data(), *ops.c, &direct);
      if (absl::IsUnimplemented(r)) continue;
      ASSERT_TRUE(r.ok()) << spec.name << " on " << p << ": " << r;
      // Launched as it is, then recorded and replayed, then replayed.
      for (int i = 0; i < 3; ++i) {
        const LaunchRecordings::Counts before = CountsOf(*env);
        std::vector<unsigned char> c;
        absl::Status l = LaunchPoisoned(*env, spec, *member, p, ops.a->data(), ops.b->data(), *ops.c, &c);
        ASSERT_TRUE(l.ok()) << spec.name << " on " << p << ", launch " << i << ": " << l;
        const LaunchRecordings::Counts after = CountsOf(*env);
        const bool by_graph = after.replayed + after.recorded > before.replayed + before.recorded;
        replayed += by_graph;
        const OracleReport report = CheckOutput(p, member->contract.accuracy, c.data(), ops.ref);
        EXPECT_TRUE(report.pass) << spec.name << " on " << p << ", launch " << i << ": " << report.detail;
        if (member->contract.determinism >= Determinism::kRunToRun) {
          const size_t diff = BitDifferences(direct, c, ElementSize(dtype), p.m * p.n);
          EXPECT_EQ(diff, 0u) << spec.name << " on " << p << ", launch " << i
                              << (by_graph ? " (a graph)" : " (launched)") << " differs from its launch";
        }
        if (i == 2) {
          std::printf("GRAPH %-16s %-26s %s\n", spec.name.c_str(), p.ToString().c_str(),
                      by_graph ? "replayed" : "launched (not recordable)");
        }
      }
    }
  }
  EXPECT_GT(replayed, 0) << "no launch was replayed from a graph";
}

// A key names the operands' addresses: new contents at the same addresses are
// read by the replay, and other addresses are never served by it.
TEST_P(CudaLaunchGraphsTest, AReplayReadsTheOperandsAsTheyAreNow) {
  SETUP_OR_SKIP(env);
  const DType dtype = GetParam();
  const Problem p{dtype, 96, 1000, 304};
  Operands first, second;
  ASSERT_TRUE(MakeOperands(*env, p, 11, &first).ok());
  ASSERT_TRUE(MakeOperands(*env, p, 12, &second).ok());
  const CandidateSpec* spec = nullptr;
  for (const CandidateSpec& c : env->candidates) {
    if (c.name == "cublas") spec = &c;
  }
  ASSERT_NE(spec, nullptr);
  const CandidateMember& member = *spec->Member(dtype);
  std::vector<unsigned char> c;
  for (int i = 0; i < 3; ++i) {  // recorded on first's addresses
    ASSERT_TRUE(LaunchPoisoned(*env, *spec, member, p, first.a->data(), first.b->data(), *first.c, &c).ok());
  }
  ASSERT_TRUE(CheckOutput(p, member.contract.accuracy, c.data(), first.ref).pass);
  // Other addresses: second's own result, not first's.
  ASSERT_TRUE(LaunchPoisoned(*env, *spec, member, p, second.a->data(), second.b->data(), *first.c, &c).ok());
  EXPECT_TRUE(CheckOutput(p, member.contract.accuracy, c.data(), second.ref).pass)
      << "a launch on other operands was served by another key's graph";
  // The same addresses, new contents: the replay reads them.
  std::vector<unsigned char> a2(p.a_bytes()), b2(p.b_bytes());
  ASSERT_TRUE(env->stream->CopyToHost(a2.data(), *second.a, p.a_bytes()).ok());
  ASSERT_TRUE(env->stream->CopyToHost(b2.data(), *second.b, p.b_bytes()).ok());
  ASSERT_TRUE(env->stream->CopyToDevice(*first.a, a2.data(), a2.size()).ok());
  ASSERT_TRUE(env->stream->CopyToDevice(*first.b, b2.data(), b2.size()).ok());
  const LaunchRecordings::Counts before = CountsOf(*env);
  ASSERT_TRUE(LaunchPoisoned(*env, *spec, member, p, first.a->data(), first.b->data(), *first.c, &c).ok());
  EXPECT_GT(CountsOf(*env).replayed, before.replayed) << "cublas's launch was not replayed";
  EXPECT_TRUE(CheckOutput(p, member.contract.accuracy, c.data(), second.ref).pass)
      << "the replay did not read the operands' new contents";
}

// A candidate's scratch that grew (another candidate needed more) is somewhere
// else: graphs that name the old one are dropped, and the launch runs again.
TEST_P(CudaLaunchGraphsTest, AGrownScratchDropsTheGraphsThatNameTheOldOne) {
  SETUP_OR_SKIP(env);
  const DType dtype = GetParam();
  const Problem p{dtype, 1000, 333, 777};  // ragged N: cublas_padded pads B and C in scratch
  Operands ops;
  ASSERT_TRUE(MakeOperands(*env, p, 21, &ops).ok());
  const CandidateSpec* spec = nullptr;
  for (const CandidateSpec& c : env->candidates) {
    if (c.name == "cublas_padded") spec = &c;
  }
  ASSERT_NE(spec, nullptr);
  const CandidateMember* member = spec->Member(dtype);
  ASSERT_NE(member, nullptr);
  std::vector<unsigned char> c;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(LaunchPoisoned(*env, *spec, *member, p, ops.a->data(), ops.b->data(), *ops.c, &c).ok());
  }
  ASSERT_GT(CountsOf(*env).replayed + CountsOf(*env).recorded, 0);
  // Grow the stream's scratch past what it holds (its old block goes back to the pool).
  const size_t held = dynamic_cast<CudaStream*>(env->stream.get())->scratch_bytes();
  ASSERT_GT(held, 0u) << "cublas_padded padded nothing in scratch";
  absl::StatusOr<void*> grown = Scratch(env->stream.get(), held + 1);
  ASSERT_TRUE(grown.ok()) << grown.status();
  const LaunchRecordings::Counts before = CountsOf(*env);
  ASSERT_TRUE(LaunchPoisoned(*env, *spec, *member, p, ops.a->data(), ops.b->data(), *ops.c, &c).ok());
  EXPECT_EQ(CountsOf(*env).replayed, before.replayed) << "a graph naming the old scratch was replayed";
  EXPECT_EQ(CountsOf(*env).direct, before.direct + 1);
  EXPECT_TRUE(CheckOutput(p, member->contract.accuracy, c.data(), ops.ref).pass);
}

INSTANTIATE_TEST_SUITE_P(DTypes, CudaLaunchGraphsTest,
                         ::testing::Values(DType::kF16, DType::kBF16, DType::kF32),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(DTypeName(info.param));
                         });

// Every candidate is a valid contract family and its names are unique: what the
// registry will demand of them at daemon start.
TEST(CudaCandidateListTest, EveryCandidateValidatesAndNamesAreUnique) {
  SETUP_OR_SKIP(env);
  std::set<std::string> names;
  for (const CandidateSpec& spec : env->candidates) {
    EXPECT_TRUE(ValidateCandidate(spec).ok()) << ValidateCandidate(spec);
    EXPECT_TRUE(names.insert(spec.name).second) << "duplicate " << spec.name;
    std::printf("CANDIDATE %-16s v%d tier %d %s\n", spec.name.c_str(), spec.version, spec.tier,
                spec.description.c_str());
  }
  EXPECT_TRUE(names.count("cublas"));
  EXPECT_TRUE(names.count("cublaslt_h0"));
  EXPECT_TRUE(names.count("cublas_padded"));
}

}  // namespace
}  // namespace arbiter::cuda
