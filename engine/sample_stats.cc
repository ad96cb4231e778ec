#include "engine/sample_stats.h"

#include <algorithm>
#include <cmath>

namespace arbiter {

namespace {

double Quantile(const std::vector<double>& sorted, double q) {
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - static_cast<double>(lo));
}

}  // namespace

SampleStats Summarize(std::vector<double> samples) {
  SampleStats s;
  s.count = static_cast<int>(samples.size());
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  s.median = Quantile(samples, 0.5);
  s.q1 = Quantile(samples, 0.25);
  s.q3 = Quantile(samples, 0.75);
  s.spread = s.median > 0 ? (s.q3 - s.q1) / s.median : 0;
  return s;
}

int SignTestLowRank(int n) {
  if (n <= 0) return 0;
  // P(X <= j) for X ~ Binomial(n, 1/2), summed term by term: C(n, j) / 2^n.
  double term = std::pow(0.5, n);  // P(X = 0)
  double cdf = 0;
  int k = 1;
  for (int j = 0; j < n; ++j) {
    cdf += term;  // P(X <= j)
    if (cdf > 0.025) break;
    k = j + 1;  // at most j of the n ratios fall below the median: rank j + 1 is a bound
    term *= static_cast<double>(n - j) / static_cast<double>(j + 1);
  }
  return std::min(k, n);
}

void RaceSamples::Add(const std::string& candidate, int round, double seconds) {
  samples_[candidate].push_back({round, seconds});
}

PairedRatio RaceSamples::Compare(std::string_view a, std::string_view b) const {
  PairedRatio out;
  const auto ia = samples_.find(a);
  const auto ib = samples_.find(b);
  if (ia == samples_.end() || ib == samples_.end()) return out;
  // Both in round order: walk them together.
  std::vector<double> ratios;
  auto x = ia->second.begin(), y = ib->second.begin();
  while (x != ia->second.end() && y != ib->second.end()) {
    if (x->round < y->round) {
      ++x;
    } else if (y->round < x->round) {
      ++y;
    } else {
      // A zero time (below the timer's resolution) gives no ratio.
      if (x->seconds > 0 && y->seconds > 0) ratios.push_back(x->seconds / y->seconds);
      ++x;
      ++y;
    }
  }
  std::sort(ratios.begin(), ratios.end());
  out.low_rank = SignTestLowRank(static_cast<int>(ratios.size()));
  if (out.low_rank > 0) {
    out.low = ratios[static_cast<size_t>(out.low_rank - 1)];
    out.high = ratios[ratios.size() - static_cast<size_t>(out.low_rank)];
  }
  const SampleStats st = Summarize(std::move(ratios));
  out.pairs = st.count;
  out.median = st.median;
  return out;
}

}  // namespace arbiter
