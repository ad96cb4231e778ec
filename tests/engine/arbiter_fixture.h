// The Arbiter test fixture: an engine on the fake backend (fake_backend.h) and a
// SQLite store in a fresh directory, the standard candidates, and a store that
// fails on demand (OutageStore). Shared by arbiter_test.cc and
// arbiter_refinement_test.cc.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/arbiter.h"
#include "gtest/gtest.h"
#include "tests/engine/fake_backend.h"

namespace arbiter::testing {

// A shared store as a daemon sees it through an outage: a SQLite store underneath,
// every call failing UNAVAILABLE while `down`, and Resync() delivering what a
// PostgreSQL store delivers when its notification connection is back (changes
// may have been missed).
class OutageStore final : public VerdictStore {
 public:
  explicit OutageStore(std::unique_ptr<VerdictStore> inner) : inner_(std::move(inner)) {}

  VerdictStore& inner() { return *inner_; }
  void set_down(bool down) { down_ = down; }
  // Writes of verdicts fail (a full disk) while reads still answer.
  void set_refuse_verdicts(bool refuse) { refuse_verdicts_ = refuse; }
  void Resync() {
    std::lock_guard lock(subscribers_->mu);
    if (subscribers_->on_change) subscribers_->on_change(StoreChange{});
  }

  std::string Describe() const override { return "outage store"; }
  bool shared() const override { return true; }
  int schema_version() const override { return inner_->schema_version(); }
  absl::Status Health() override { return Up(); }
  absl::Status PutVerdict(const Verdict& v) override {
    RETURN_IF_ERROR(Up());
    if (refuse_verdicts_) return absl::ResourceExhaustedError("outage store: disk full");
    return inner_->PutVerdict(v);
  }
  absl::StatusOr<Verdict> GetVerdict(const std::string& fp, DType d, const Bucket& b) override {
    RETURN_IF_ERROR(Up());
    return inner_->GetVerdict(fp, d, b);
  }
  absl::StatusOr<std::vector<Verdict>> ListVerdicts(const std::string& fp,
                                                    const VerdictFilter& f) override {
    RETURN_IF_ERROR(Up());
    return inner_->ListVerdicts(fp, f);
  }
  absl::StatusOr<int64_t> CountVerdicts(const std::string& fp) override {
    RETURN_IF_ERROR(Up());
    return inner_->CountVerdicts(fp);
  }
  absl::StatusOr<int> Invalidate(const std::string& fp, const InvalidateScope& scope) override {
    RETURN_IF_ERROR(Up());
    return inner_->Invalidate(fp, scope);
  }
  absl::Status PutForce(const Force& f) override {
    RETURN_IF_ERROR(Up());
    return inner_->PutForce(f);
  }
  absl::StatusOr<std::optional<Force>> GetForce(const std::string& fp, DType d,
                                                const Bucket& b) override {
    RETURN_IF_ERROR(Up());
    return inner_->GetForce(fp, d, b);
  }
  absl::StatusOr<bool> RemoveForce(const std::string& fp, DType d, const Bucket& b,
                                   const VerdictScope& scope) override {
    RETURN_IF_ERROR(Up());
    return inner_->RemoveForce(fp, d, b, scope);
  }
  absl::StatusOr<std::vector<Force>> ListForces(const std::string& fp) override {
    RETURN_IF_ERROR(Up());
    return inner_->ListForces(fp);
  }
  absl::Status PutQuarantine(const QuarantineEntry& q) override {
    RETURN_IF_ERROR(Up());
    return inner_->PutQuarantine(q);
  }
  absl::StatusOr<std::vector<QuarantineEntry>> ListQuarantine(const std::string& fp) override {
    RETURN_IF_ERROR(Up());
    return inner_->ListQuarantine(fp);
  }
  absl::StatusOr<int> ClearQuarantine(const std::string& fp, const std::string& c) override {
    RETURN_IF_ERROR(Up());
    return inner_->ClearQuarantine(fp, c);
  }
  absl::StatusOr<std::unique_ptr<StoreLease>> TryLease(const std::string& fp, DType d,
                                                       const Bucket& b,
                                                       const VerdictScope& s) override {
    RETURN_IF_ERROR(Up());
    return inner_->TryLease(fp, d, b, s);
  }
  std::unique_ptr<StoreSubscription> Subscribe(
      std::function<void(const StoreChange&)> on_change) override {
    std::lock_guard lock(subscribers_->mu);
    subscribers_->on_change = std::move(on_change);
    return std::make_unique<Subscription>(subscribers_);
  }

 private:
  struct Subscribers {
    std::mutex mu;
    std::function<void(const StoreChange&)> on_change;  // GUARDED_BY(mu)
  };
  class Subscription final : public StoreSubscription {
   public:
    explicit Subscription(std::shared_ptr<Subscribers> s) : s_(std::move(s)) {}
    ~Subscription() override {
      std::lock_guard lock(s_->mu);
      s_->on_change = nullptr;
    }

   private:
    std::shared_ptr<Subscribers> s_;
  };

  absl::Status Up() const {
    return down_ ? absl::UnavailableError("outage store: down") : absl::OkStatus();
  }

  std::unique_ptr<VerdictStore> inner_;
  std::atomic<bool> down_{false};
  std::atomic<bool> refuse_verdicts_{false};
  std::shared_ptr<Subscribers> subscribers_ = std::make_shared<Subscribers>();
};

class ArbiterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("arbiter_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    options_.measure.min_samples = 5;
    options_.measure.max_samples = 9;
    options_.measure.warmup_runs = 1;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // An engine on a SQLite store in dir_, or on `store` when given.
  std::unique_ptr<Arbiter> Start(std::vector<CandidateSpec> candidates,
                                 std::unique_ptr<VerdictStore> store = nullptr) {
    auto backend = std::make_unique<FakeBackend>();
    auto registry = Registry::Create(std::move(candidates), *backend);
    EXPECT_TRUE(registry.ok()) << registry.status();
    if (store == nullptr) {
      auto opened = VerdictStore::Open((dir_ / "verdicts.db").string());
      EXPECT_TRUE(opened.ok()) << opened.status();
      store = std::move(*opened);
    }
    auto arbiter = Arbiter::Create(options_, std::move(backend), std::move(*registry), std::move(store));
    EXPECT_TRUE(arbiter.ok()) << arbiter.status();
    return std::move(*arbiter);
  }

  // fast (tier 1, 10us), vendor (tier 3, 100us), broken (tier 3, skips K: fails the oracle),
  // gpu_only (ineligible here).
  std::vector<CandidateSpec> Standard(int fast_version = 1) {
    std::vector<CandidateSpec> c;
    c.push_back(FakeCandidate("fast", 1, TimedKernel(10e-6, 0.01), Determinism::kRunToRun, fast_version));
    c.push_back(FakeCandidate("vendor", 3, TimedKernel(100e-6, 0.01)));
    c.push_back(FakeCandidate("broken", 3, [](const GemmArgs& a) {
      NaiveGemm(a, a.problem.k - 1, a.problem.m);
      static_cast<FakeStream*>(a.stream)->Advance(1e-6);
      return absl::OkStatus();
    }));
    CandidateSpec gpu = FakeCandidate("gpu_only", 3, TimedKernel(1e-6));
    for (auto& m : gpu.members) m.contract.arch = "sm_90a";
    c.push_back(std::move(gpu));
    return c;
  }

  std::filesystem::path dir_;
  ArbiterOptions options_;
  const Problem p_{DType::kF32, 24, 40, 64};
};

// The verdict agrees with its own figures: the winner passed and was timed, and any
// faster timed candidate was within noise of it.
inline void ExpectConsistent(const Verdict& v, const NoisePolicy& noise) {
  const CandidateResult* w = v.Result(v.winner);
  ASSERT_NE(w, nullptr) << v;
  EXPECT_TRUE(w->timed()) << v;
  for (const CandidateResult& r : v.results) {
    if (!r.timed() || r.median_seconds >= w->median_seconds) continue;
    const double margin = w->median_seconds / r.median_seconds - 1.0;
    EXPECT_LE(margin, noise.noise_multiple * std::max({r.spread, w->spread, noise.noise_floor}))
        << r.name << " is clearly faster than the winner " << v.winner;
  }
}

}  // namespace arbiter::testing
