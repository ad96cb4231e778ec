// arbiterd_faults' TestCandidates(): the planted candidates (planted.h) join the
// backend's own. On the CPU backend: a crash, an abort, a hang and a slow one;
// on CUDA, an out-of-bounds write (planted_cuda.cc and .cu, only in CUDA builds).
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <thread>

#include "kernels/cpu_reference/cpu_reference.h"
#include "server/test_candidates.h"
#include "tests/integration/faults/planted.h"

namespace arbiter {
#ifdef ARBITER_FAULTS_WITH_CUDA
std::vector<CandidateSpec> PlantedCudaCandidates();  // planted_cuda.cc
#endif
}  // namespace arbiter

namespace arbiter::server {
namespace {

using testing::kAbortM;
using testing::kCrashM;
using testing::kHangM;
using testing::kSlowM;
using testing::kSlowRunSeconds;

// cpu_reference under another name whose every run first passes `fault`.
CandidateSpec Planted(const std::string& name, const std::string& what,
                      std::function<void(const GemmArgs&)> fault) {
  CandidateSpec spec = MakeCpuReferenceCandidate();
  spec.name = name;
  spec.description = "planted fault (test daemon only): " + what;
  for (CandidateMember& m : spec.members) {
    m.contract.entry = name + "<" + std::string(DTypeName(m.contract.dtype)) + ">";
    m.run = [fault, run = m.run](const GemmArgs& args) {
      fault(args);
      return run(args);
    };
  }
  return spec;
}

std::vector<CandidateSpec> PlantedCpuCandidates() {
  std::vector<CandidateSpec> c;
  c.push_back(Planted("planted_crash", "SIGSEGV at M=37, abort() at M=41", [](const GemmArgs& a) {
    if (a.problem.m == kCrashM) std::raise(SIGSEGV);
    if (a.problem.m == kAbortM) std::abort();
  }));
  c.push_back(Planted("planted_hang", "never returns at M=67", [](const GemmArgs& a) {
    while (a.problem.m == kHangM) std::this_thread::sleep_for(std::chrono::hours(1));
  }));
  c.push_back(Planted("planted_slow", "3 s per run at M=131", [](const GemmArgs& a) {
    if (a.problem.m == kSlowM) {
      std::this_thread::sleep_for(std::chrono::duration<double>(kSlowRunSeconds));
    }
  }));
  return c;
}

}  // namespace

ExtraCandidates TestCandidates() {
  return [](std::string_view backend) -> std::vector<CandidateSpec> {
    if (backend == "cpu") return PlantedCpuCandidates();
#ifdef ARBITER_FAULTS_WITH_CUDA
    if (backend == "cuda") return PlantedCudaCandidates();
#endif
    return {};
  };
}

}  // namespace arbiter::server
