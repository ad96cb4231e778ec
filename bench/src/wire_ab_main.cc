// Same-run A/B of the bytes path's wire: Matmuls whose kernel is next to
// nothing, timed end to end against several daemons (or client settings) in
// turn, round-robin, so that the machine's load falls on every configuration
// alike.
//
//   wire-ab ROUNDS CALLS LABEL=SERVER[=into|=copy] ...
//
// Shapes, all f32 on the bytes path: "request N MiB" is 1 x 1 x K (A and B
// each half the request, C one element); "reply N MiB" is M x M x 1 (A and B a
// few KiB, C N MiB), checked element for element on the first and last calls.
// `=into` reads C into caller memory (ArbiterClient::MatmulInto) instead of a
// response kept from call to call; `=copy` gets C in a new response each call
// and copies it into caller memory (what a caller of Matmul does to have C in
// its own buffer). Prints, per shape and configuration, the median, quartiles and
// minimum over ROUNDS x CALLS calls (one untimed warm-up call per round).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "client/arbiter_client.h"

namespace {

using Clock = std::chrono::steady_clock;
using arbiter::client::ArbiterClient;
using arbiter::client::ClientOptions;
namespace v1 = arbiter::v1;

struct Shape {
  std::string name;
  int64_t m, n, k;
};

struct Config {
  std::string label;
  std::string server;
  bool into = false;  // MatmulInto
  bool copy = false;  // Matmul with a fresh response, C then copied to caller memory
  std::unique_ptr<ArbiterClient> client;
  std::vector<uint8_t> c;  // caller memory for MatmulInto
};

v1::MatmulRequest RequestOf(const Shape& s) {
  v1::MatmulRequest req;
  v1::Problem* p = req.mutable_problem();
  p->set_m(s.m);
  p->set_n(s.n);
  p->set_k(s.k);
  p->set_dtype(v1::DTYPE_F32);
  std::vector<float> a(static_cast<size_t>(s.m * s.k)), b(static_cast<size_t>(s.k * s.n));
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>((i * 7) % 13) - 6.0f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>((i * 5) % 11) - 5.0f;
  req.set_a(a.data(), a.size() * sizeof(float));
  req.set_b(b.data(), b.size() * sizeof(float));
  return req;
}

bool Call(Config& c, const v1::MatmulRequest& req, v1::MatmulResponse* resp, const char** data) {
  grpc::Status s;
  if (c.copy) {
    c.c.resize(static_cast<size_t>(req.problem().m() * req.problem().n()) * sizeof(float));
    v1::MatmulResponse fresh;
    s = c.client->Matmul(req, &fresh);
    if (s.ok()) std::memcpy(c.c.data(), fresh.c().data(), std::min(c.c.size(), fresh.c().size()));
    *data = reinterpret_cast<const char*>(c.c.data());
  } else if (c.into) {
    c.c.resize(static_cast<size_t>(req.problem().m() * req.problem().n()) * sizeof(float));
    s = c.client->MatmulInto(req, c.c.data(), c.c.size(), resp);
    *data = reinterpret_cast<const char*>(c.c.data());
  } else {
    s = c.client->Matmul(req, resp);
    *data = resp->c().data();
  }
  if (!s.ok()) {
    std::fprintf(stderr, "%s: %s\n", c.label.c_str(), s.error_message().c_str());
    std::exit(1);
  }
  return true;
}

// K = 1: C[i][j] = A[i] * B[j] exactly.
void CheckOuter(const Config& c, const v1::MatmulRequest& req, const char* data) {
  if (req.problem().k() != 1) return;
  const auto* a = reinterpret_cast<const float*>(req.a().data());
  const auto* b = reinterpret_cast<const float*>(req.b().data());
  const auto* got = reinterpret_cast<const float*>(data);
  const int64_t m = req.problem().m(), n = req.problem().n();
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      if (got[i * n + j] != a[i] * b[j]) {
        std::fprintf(stderr, "%s: C[%ld][%ld] = %g, expected %g\n", c.label.c_str(), i, j,
                     got[i * n + j], a[i] * b[j]);
        std::exit(1);
      }
    }
  }
}

double Quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double at = q * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(at));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (at - static_cast<double>(lo));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: wire-ab ROUNDS CALLS LABEL=SERVER[=into|=copy] ...\n");
    return 2;
  }
  const int rounds = std::atoi(argv[1]);
  const int calls = std::atoi(argv[2]);
  std::vector<Config> configs;
  for (int i = 3; i < argc; ++i) {
    const std::string arg = argv[i];
    Config c;
    const size_t eq = arg.find('=');
    c.label = arg.substr(0, eq);
    c.server = arg.substr(eq + 1);
    if (c.server.ends_with("=into")) {
      c.into = true;
      c.server.resize(c.server.size() - 5);
    } else if (c.server.ends_with("=copy")) {
      c.copy = true;
      c.server.resize(c.server.size() - 5);
    }
    ClientOptions options;
    options.server = c.server;
    options.own_connection = true;
    c.client = std::make_unique<ArbiterClient>(options);
    configs.push_back(std::move(c));
  }
  const std::vector<Shape> shapes = {
      {"request 4 MiB", 1, 1, (4 << 20) / 8},
      {"request 16 MiB", 1, 1, (16 << 20) / 8},
      {"reply 2 MiB", 724, 724, 1},
      {"reply 8 MiB", 1448, 1448, 1},
  };
  std::printf("| shape | config | calls | median ms | p25 ms | p75 ms | min ms |\n|---|---|---|---|---|---|---|\n");
  for (const Shape& shape : shapes) {
    const v1::MatmulRequest req = RequestOf(shape);
    std::vector<std::vector<double>> samples(configs.size());
    for (Config& c : configs) {  // the first call measures the bucket
      v1::MatmulResponse resp;
      const char* data = nullptr;
      Call(c, req, &resp, &data);
      CheckOuter(c, req, data);
    }
    for (int r = 0; r < rounds; ++r) {
      for (size_t i = 0; i < configs.size(); ++i) {
        Config& c = configs[(i + static_cast<size_t>(r)) % configs.size()];  // rotate who goes first
        std::vector<double>& out = samples[(i + static_cast<size_t>(r)) % configs.size()];
        v1::MatmulResponse resp;
        const char* data = nullptr;
        Call(c, req, &resp, &data);  // warm-up
        for (int j = 0; j < calls; ++j) {
          const Clock::time_point t0 = Clock::now();
          Call(c, req, &resp, &data);
          out.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
        }
        if (r == rounds - 1) CheckOuter(c, req, data);
      }
    }
    for (size_t i = 0; i < configs.size(); ++i) {
      const std::vector<double>& v = samples[i];
      std::printf("| %s | %s | %zu | %.3f | %.3f | %.3f | %.3f |\n", shape.name.c_str(),
                  configs[i].label.c_str(), v.size(), Quantile(v, 0.5) * 1e3, Quantile(v, 0.25) * 1e3,
                  Quantile(v, 0.75) * 1e3, *std::min_element(v.begin(), v.end()) * 1e3);
    }
    std::fflush(stdout);
  }
  return 0;
}
