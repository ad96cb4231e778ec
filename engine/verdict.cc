#include "engine/verdict.h"

#include <cstdio>
#include <iomanip>

#include "absl/strings/str_cat.h"

namespace arbiter {

const char* VerdictSourceName(VerdictSource s) {
  switch (s) {
    case VerdictSource::kMeasured: return "measured";
    case VerdictSource::kForced: return "forced";
    case VerdictSource::kTierDefault: return "tier_default";
    case VerdictSource::kProvisional: return "provisional";
  }
  return "unknown";
}

std::optional<VerdictSource> ParseVerdictSource(std::string_view s) {
  for (VerdictSource v : {VerdictSource::kMeasured, VerdictSource::kForced,
                          VerdictSource::kTierDefault, VerdictSource::kProvisional}) {
    if (VerdictSourceName(v) == s) return v;
  }
  return std::nullopt;
}

const char* ResultStateName(ResultState s) {
  switch (s) {
    case ResultState::kTimed: return "timed";
    case ResultState::kFailedOracle: return "failed_oracle";
    case ResultState::kError: return "error";
    case ResultState::kUnmeasured: return "unmeasured";
    case ResultState::kQuarantined: return "quarantined";
  }
  return "unknown";
}

std::optional<ResultState> ParseResultState(std::string_view s) {
  for (ResultState r : {ResultState::kTimed, ResultState::kFailedOracle, ResultState::kError,
                        ResultState::kUnmeasured, ResultState::kQuarantined}) {
    if (ResultStateName(r) == s) return r;
  }
  return std::nullopt;
}

const CandidateResult* Verdict::Result(std::string_view name) const {
  for (const CandidateResult& r : results) {
    if (r.name == name) return &r;
  }
  return nullptr;
}

VerdictScope VerdictScope::Shape(const Problem& p) {
  VerdictScope s;
  s.kind = Kind::kShape;
  s.m = p.m;
  s.n = p.n;
  s.k = p.k;
  return s;
}

VerdictScope VerdictScope::Half(char dim, int64_t lo, int64_t hi) {
  VerdictScope s;
  s.kind = Kind::kHalf;
  s.dim = dim;
  s.lo = lo;
  s.hi = hi;
  return s;
}

bool VerdictScope::Contains(const Problem& p) const {
  switch (kind) {
    case Kind::kBucket:
      return true;
    case Kind::kShape:
      return p.m == m && p.n == n && p.k == k;
    case Kind::kHalf: {
      const int64_t d = dim == 'm' ? p.m : dim == 'n' ? p.n : p.k;
      return d > lo && d <= hi;
    }
  }
  return false;
}

std::string VerdictScope::ToString() const {
  switch (kind) {
    case Kind::kBucket:
      return "";
    case Kind::kShape:
      return absl::StrCat(m, "x", n, "x", k);
    case Kind::kHalf:
      return absl::StrCat(std::string(1, dim), "(", lo, ",", hi, "]");
  }
  return "";
}

std::optional<VerdictScope> VerdictScope::Parse(std::string_view text) {
  if (text.empty()) return VerdictScope{};
  const std::string s(text);
  long long a = 0, b = 0, c = 0;
  char tail = 0;
  if (std::sscanf(s.c_str(), "%lldx%lldx%lld%c", &a, &b, &c, &tail) == 3 && a > 0 && b > 0 &&
      c > 0) {
    VerdictScope out = Shape(Problem{DType::kF32, a, b, c});
    if (out.ToString() == s) return out;
    return std::nullopt;
  }
  char dim = 0, open = 0, close = 0;
  if (std::sscanf(s.c_str(), "%c%c%lld,%lld%c%c", &dim, &open, &a, &b, &close, &tail) == 5 &&
      (dim == 'm' || dim == 'n' || dim == 'k') && open == '(' && close == ']' && 0 <= a && a < b) {
    VerdictScope out = Half(dim, a, b);
    if (out.ToString() == s) return out;
  }
  return std::nullopt;
}

std::string StoreKeyOf(const Bucket& bucket, const VerdictScope& scope) {
  if (scope.whole()) return bucket.ToString();
  return absl::StrCat(bucket.ToString(), "/", scope.ToString());
}

std::optional<std::pair<Bucket, VerdictScope>> ParseStoreKey(const std::string& text) {
  const size_t slash = text.find('/');
  std::optional<Bucket> bucket = ParseBucket(text.substr(0, slash));
  if (!bucket) return std::nullopt;
  if (slash == std::string::npos) return std::make_pair(*bucket, VerdictScope{});
  std::optional<VerdictScope> scope = VerdictScope::Parse(std::string_view(text).substr(slash + 1));
  if (!scope || scope->whole()) return std::nullopt;
  return std::make_pair(*bucket, *scope);
}

std::vector<std::pair<const char*, double>> TuningCost::Phases() const {
  return {{"setup", setup},     {"reference", reference}, {"oracle", oracle},
          {"determinism", determinism}, {"warmup", warmup}, {"flush", flush},
          {"timing", timing}};
}

double TuningCost::Total() const {
  double total = 0;
  for (const auto& [name, seconds] : Phases()) total += seconds;
  return total;
}

std::ostream& operator<<(std::ostream& os, const TuningCost& c) {
  const double total = c.Total();
  os << std::fixed << std::setprecision(2) << total * 1e3 << "ms:";
  for (const auto& [name, seconds] : c.Phases()) {
    os << " " << name << " " << seconds * 1e3 << "ms";
    if (total > 0) os << " " << std::setprecision(0) << 100 * seconds / total << "%"
                      << std::setprecision(2);
  }
  os << "; device " << c.device * 1e3 << "ms in " << c.rounds << " rounds; " << c.rows_checked
     << " rows checked";
  os.unsetf(std::ios_base::floatfield);
  return os;
}

std::ostream& operator<<(std::ostream& os, const CandidateResult& r) {
  os << r.name << "@v" << r.version << " " << ResultStateName(r.state);
  if (r.timed()) {
    os << " median " << std::setprecision(4) << r.median_seconds * 1e6 << "us spread "
       << std::setprecision(3) << r.spread * 100 << "% n=" << r.samples;
  }
  if (r.max_abs_error > 0 || r.max_rel_error > 0) {
    os << " err abs " << std::setprecision(3) << r.max_abs_error << " rel " << r.max_rel_error;
  }
  if (!r.reason.empty()) os << " (" << r.reason << ")";
  return os;
}

std::ostream& operator<<(std::ostream& os, const Verdict& v) {
  os << v.dtype << " " << v.bucket;
  if (!v.scope.whole()) os << " " << v.scope.ToString();
  os << " -> " << v.winner << "@v" << v.winner_version << " ["
     << VerdictSourceName(v.source) << "] " << v.reason;
  return os;
}

}  // namespace arbiter
