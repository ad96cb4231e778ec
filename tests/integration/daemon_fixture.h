// Shared fixture for integration tests: a temporary store and a running
// arbiterd (--backend cpu) on an ephemeral port, with a client connected to it.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "client/arbiter_client.h"
#include "tests/integration/arbiterd_process.h"

namespace arbiter::testing {

class DaemonFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    store_dir_ = MakeTempDir("arbiter-store-");
    ASSERT_FALSE(store_dir_.empty());
    store_path_ = store_dir_ + "/verdicts.db";
    StartDaemon();
  }

  void TearDown() override {
    client_.reset();
    daemon_.reset();
    if (std::getenv("ARBITER_KEEP_TEST_DIRS") == nullptr) {
      std::error_code ec;
      std::filesystem::remove_all(store_dir_, ec);
    }
  }

  // (Re)starts arbiterd on the fixture's store and connects the client.
  void StartDaemon() {
    ArbiterdOptions options;
    options.binary = ARBITERD_PATH;
    options.store_path = store_path_;
    options.extra_args = extra_args_;
    std::string error;
    daemon_ = ArbiterdProcess::Start(options, &error);
    ASSERT_NE(daemon_, nullptr) << error;
    client::ClientOptions client_options;
    client_options.server = daemon_->address();
    client_options.deadline_seconds = 300;
    client_ = std::make_unique<client::ArbiterClient>(client_options);
  }

  // SIGTERM; asserts a clean exit.
  void StopDaemon() {
    client_.reset();
    ASSERT_EQ(daemon_->Terminate(), 0) << daemon_->ReadLog();
    daemon_.reset();
  }

  std::string store_dir_;
  std::string store_path_;
  std::vector<std::string> extra_args_;  // more arbiterd flags for the next StartDaemon
  std::unique_ptr<ArbiterdProcess> daemon_;
  std::unique_ptr<client::ArbiterClient> client_;
};

inline v1::Problem MakeProblem(v1::DType dtype, int64_t m, int64_t n, int64_t k) {
  v1::Problem p;
  p.set_dtype(dtype);
  p.set_m(m);
  p.set_n(n);
  p.set_k(k);
  return p;
}

}  // namespace arbiter::testing
