#include "engine/verdict.h"

#include <iomanip>

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
  os << v.dtype << " " << v.bucket << " -> " << v.winner << "@v" << v.winner_version << " ["
     << VerdictSourceName(v.source) << "] " << v.reason;
  return os;
}

}  // namespace arbiter
