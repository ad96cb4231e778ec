// Robust statistics of device-time samples: one candidate's alone (Summarize),
// and two candidates' compared round by round (RaceSamples::Compare).
//
// The measurer times a race's candidates interleaved, one sample of each per
// round, so much of what scatters one sample - the SM clock, the cache flush
// before it, the driver - scatters the other samples of its round alike. A
// candidate's own spread (IQR/median of its samples) says how much one sample
// scatters; the spread of the per-round ratios t_a / t_b says how sure the race
// is of which of the two is faster, with what a round's samples share cancelled
// out. How sure is measured without assuming a distribution (a vendor kernel's
// samples can be bimodal, so its spread says little about its median): by the
// sign test, the k-th smallest of n ratios is below their true median with
// probability at most 2.5%, for the largest such k. Selection decides on that
// bound where there are enough rounds (selection.h).
//
// Thread-compatible: a RaceSamples is filled by one measurer, then only read.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace arbiter {

// Robust statistics of device-time samples.
struct SampleStats {
  double median = 0;
  double spread = 0;  // (q3 - q1) / median
  double q1 = 0, q3 = 0;
  int count = 0;
};
SampleStats Summarize(std::vector<double> samples);

// Candidate a against candidate b over the rounds in which both were sampled.
struct PairedRatio {
  int pairs = 0;      // rounds in which both were sampled (with a positive time)
  double median = 0;  // median over those rounds of t_a / t_b: over 1 where b is faster
  // The lower 97.5% confidence bound of that median: the low_rank-th smallest
  // ratio (1-based), so t_a / t_b exceeded it in all but low_rank - 1 rounds.
  double low = 0;
  int low_rank = 0;
  // The upper 97.5% bound, the low_rank-th largest ratio: [low, high] holds the
  // median with 95% confidence.
  double high = 0;
};

// The rank k (1-based, at least 1) of the lower 97.5% bound of a median from n
// paired rounds: the largest k with P(Binomial(n, 1/2) <= k - 1) <= 2.5%, or 1
// where even k = 1 exceeds it (n <= 5: then every round must agree). 0 for n = 0.
int SignTestLowRank(int n);

// The timed samples of a race's candidates, each with the round it was taken in.
class RaceSamples {
 public:
  // `min_pairs`: how many rounds two candidates must share before their
  // comparison may decide anything (the measurer's min_samples).
  explicit RaceSamples(int min_pairs = 5) : min_pairs_(min_pairs) {}

  // Records a sample of `candidate` taken in `round`; a candidate's rounds must
  // be added in increasing order.
  void Add(const std::string& candidate, int round, double seconds);
  // `a` against `b` (t_a / t_b) over the rounds in which both were sampled;
  // pairs is 0 where either has no samples.
  PairedRatio Compare(std::string_view a, std::string_view b) const;

  int min_pairs() const { return min_pairs_; }
  bool empty() const { return samples_.empty(); }

 private:
  struct Sample {
    int round;
    double seconds;
  };
  int min_pairs_;
  std::map<std::string, std::vector<Sample>, std::less<>> samples_;
};

}  // namespace arbiter
