#include "server/convert.h"

#include "absl/strings/str_cat.h"

namespace arbiter::server {
namespace {

// "f32 (DTYPE_F32), f64 (DTYPE_F64), ..." for error messages.
std::string AcceptedDTypes() {
  std::string out;
  for (DType d : kAllDTypes) {
    if (!out.empty()) out += ", ";
    absl::StrAppend(&out, std::string(DTypeName(d)), " (", v1::DType_Name(DTypeToProto(d)), ")");
  }
  return out;
}

}  // namespace

absl::StatusOr<DType> DTypeFromProto(v1::DType dtype, std::string_view field) {
  switch (dtype) {
    case v1::DTYPE_F32:
      return DType::kF32;
    case v1::DTYPE_F64:
      return DType::kF64;
    case v1::DTYPE_F16:
      return DType::kF16;
    case v1::DTYPE_BF16:
      return DType::kBF16;
    case v1::DTYPE_UNSPECIFIED:
      return absl::InvalidArgumentError(
          absl::StrCat(std::string(field), ": unspecified; expected one of ", AcceptedDTypes()));
    default:
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat(std::string(field), ": unknown value ", static_cast<int>(dtype),
                                                 "; expected one of ", AcceptedDTypes()));
}

absl::StatusOr<Problem> ProblemFromProto(const v1::Problem& p, const ProblemLimits& limits) {
  Problem problem;
  ASSIGN_OR_RETURN(problem.dtype, DTypeFromProto(p.dtype(), "problem.dtype"));
  problem.m = p.m();
  problem.n = p.n();
  problem.k = p.k();
  absl::Status valid = ValidateProblem(problem, limits);
  if (!valid.ok()) {
    return absl::Status(valid.code(), absl::StrCat("problem.", valid.message()));
  }
  return problem;
}

absl::StatusOr<Determinism> DeterminismFromProto(v1::Determinism d) {
  switch (d) {
    case v1::DETERMINISM_UNSPECIFIED:
    case v1::DETERMINISM_NONDETERMINISTIC:
      return Determinism::kNondeterministic;
    case v1::DETERMINISM_RUN_TO_RUN:
      return Determinism::kRunToRun;
    case v1::DETERMINISM_BATCH_INVARIANT:
      return Determinism::kBatchInvariant;
    default:
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "required_determinism: unknown value ", static_cast<int>(d),
      "; expected one of DETERMINISM_NONDETERMINISTIC, DETERMINISM_RUN_TO_RUN, "
      "DETERMINISM_BATCH_INVARIANT"));
}

absl::StatusOr<std::optional<TuningPolicy>> TuningFromProto(v1::TuningPolicy t) {
  switch (t) {
    case v1::TUNING_POLICY_UNSPECIFIED:
      return std::optional<TuningPolicy>();
    case v1::TUNING_POLICY_SYNC:
      return TuningPolicy::kSync;
    case v1::TUNING_POLICY_ASYNC:
      return TuningPolicy::kAsync;
    case v1::TUNING_POLICY_OFF:
      return TuningPolicy::kOff;
    default:
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "tuning: unknown value ", static_cast<int>(t),
      "; expected one of TUNING_POLICY_SYNC, TUNING_POLICY_ASYNC, TUNING_POLICY_OFF"));
}

absl::StatusOr<bool> CompletionFromProto(v1::Completion c) {
  switch (c) {
    case v1::COMPLETION_UNSPECIFIED:
    case v1::COMPLETION_SYNC:
      return false;
    case v1::COMPLETION_EVENT:
      return true;
    default:
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "completion: unknown value ", static_cast<int>(c),
      "; expected COMPLETION_SYNC or COMPLETION_EVENT"));
}

absl::StatusOr<RegionKind> RegionKindFromProto(v1::RegionKind kind) {
  switch (kind) {
    case v1::REGION_KIND_HOST_MEMFD:
      return RegionKind::kHostMemfd;
    case v1::REGION_KIND_CUDA_VMM_FD:
      return RegionKind::kCudaVmmFd;
    case v1::REGION_KIND_CUDA_IPC:
      return RegionKind::kCudaIpc;
    default:
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "kind: ", kind == v1::REGION_KIND_UNSPECIFIED ? "unspecified" : absl::StrCat("unknown value ", static_cast<int>(kind)),
      "; expected REGION_KIND_HOST_MEMFD, REGION_KIND_CUDA_VMM_FD or REGION_KIND_CUDA_IPC"));
}

absl::StatusOr<OperandRef> OperandRefFromProto(const v1::OperandRef& ref, std::string_view field) {
  OperandRef out;
  out.offset = ref.offset();
  switch (ref.target_case()) {
    case v1::OperandRef::kRegion:
      out.target = OperandRef::Target::kRegion;
      out.id = ref.region();
      break;
    case v1::OperandRef::kTensor:
      out.target = OperandRef::Target::kTensor;
      out.id = ref.tensor();
      break;
    case v1::OperandRef::TARGET_NOT_SET:
      return absl::InvalidArgumentError(
          absl::StrCat(std::string(field), ": expected a region id or a tensor handle, got neither"));
  }
  if (out.id.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(field), ": empty region id or tensor handle"));
  }
  return out;
}

v1::DType DTypeToProto(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return v1::DTYPE_F32;
    case DType::kF64:
      return v1::DTYPE_F64;
    case DType::kF16:
      return v1::DTYPE_F16;
    case DType::kBF16:
      return v1::DTYPE_BF16;
  }
  return v1::DTYPE_UNSPECIFIED;
}

v1::Determinism DeterminismToProto(Determinism d) {
  switch (d) {
    case Determinism::kNondeterministic:
      return v1::DETERMINISM_NONDETERMINISTIC;
    case Determinism::kRunToRun:
      return v1::DETERMINISM_RUN_TO_RUN;
    case Determinism::kBatchInvariant:
      return v1::DETERMINISM_BATCH_INVARIANT;
  }
  return v1::DETERMINISM_UNSPECIFIED;
}

v1::VerdictSource VerdictSourceToProto(VerdictSource s) {
  switch (s) {
    case VerdictSource::kMeasured:
      return v1::VERDICT_SOURCE_MEASURED;
    case VerdictSource::kForced:
      return v1::VERDICT_SOURCE_FORCED;
    case VerdictSource::kTierDefault:
      return v1::VERDICT_SOURCE_TIER_DEFAULT;
    case VerdictSource::kProvisional:
      return v1::VERDICT_SOURCE_PROVISIONAL;
  }
  return v1::VERDICT_SOURCE_UNSPECIFIED;
}

v1::Problem ProblemToProto(const Problem& p) {
  v1::Problem out;
  out.set_dtype(DTypeToProto(p.dtype));
  out.set_m(p.m);
  out.set_n(p.n);
  out.set_k(p.k);
  return out;
}

void ToProto(const CandidateResult& r, v1::CandidateResult* out) {
  out->set_name(r.name);
  out->set_version(r.version);
  out->set_tier(r.tier);
  out->set_determinism(DeterminismToProto(r.determinism));
  out->set_state(std::string(ResultStateName(r.state)));
  out->set_reason(r.reason);
  out->set_median_seconds(r.median_seconds);
  out->set_spread(r.spread);
  out->set_samples(r.samples);
  out->set_max_abs_error(r.max_abs_error);
  out->set_max_rel_error(r.max_rel_error);
}

void ToProto(const Verdict& v, v1::Verdict* out) {
  out->set_fingerprint(v.fingerprint);
  out->set_dtype(DTypeToProto(v.dtype));
  out->set_bucket(v.bucket.ToString());
  out->set_winner(v.winner);
  out->set_winner_version(v.winner_version);
  out->set_source(VerdictSourceToProto(v.source));
  out->set_reason(v.reason);
  *out->mutable_measured() = ProblemToProto(v.measured);
  for (const CandidateResult& r : v.results) ToProto(r, out->add_results());
  out->set_created_unix(v.created_unix);
  out->set_candidates(v.candidates);
  out->set_scope(v.scope.ToString());
  if (v.transfer) {
    v1::Transfer* t = out->mutable_transfer();
    t->set_bucket_winner(v.transfer->bucket_winner);
    t->set_bucket_winner_seconds(v.transfer->bucket_winner_seconds);
    t->set_best(v.transfer->best);
    t->set_best_seconds(v.transfer->best_seconds);
    t->set_regret(v.transfer->regret());
  }
  out->set_sm_clock_min_mhz(v.sm_clock_min_mhz);
  out->set_sm_clock_max_mhz(v.sm_clock_max_mhz);
  if (v.cost.Total() > 0) {
    for (const auto& [phase, seconds] : v.cost.Phases()) (*out->mutable_phase_seconds())[phase] = seconds;
  }
}

absl::StatusOr<Reach> ReachFromProto(v1::Reach r) {
  switch (r) {
    case v1::REACH_UNSPECIFIED:
    case v1::REACH_FLEET: return Reach::kFleet;
    case v1::REACH_NODE: return Reach::kNode;
    default: break;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("reach: expected REACH_FLEET or REACH_NODE, got ", static_cast<int>(r)));
}

v1::Reach ReachToProto(Reach r) {
  return r == Reach::kNode ? v1::REACH_NODE : v1::REACH_FLEET;
}

void ToProto(const Force& f, Reach reach, v1::Force* out) {
  out->set_reach(ReachToProto(reach));
  out->set_dtype(DTypeToProto(f.dtype));
  out->set_bucket(f.bucket.ToString());
  out->set_candidate(f.candidate);
  out->set_reason(f.reason);
  out->set_created_unix(f.created_unix);
  out->set_scope(f.scope.ToString());
}

void ToProto(const QuarantineEntry& q, v1::QuarantineEntry* out) {
  out->set_candidate(q.candidate);
  out->set_version(q.version);
  out->set_scope(q.scope);
  out->set_reason(q.reason);
  out->set_created_unix(q.created_unix);
}

void ToProto(const MemberContract& c, v1::MemberContract* out) {
  out->set_dtype(DTypeToProto(c.dtype));
  out->set_entry(c.entry);
  out->mutable_accuracy()->set_abs(c.accuracy.abs);
  out->mutable_accuracy()->set_rel_per_sqrt_k(c.accuracy.rel);
  out->set_determinism(DeterminismToProto(c.determinism));
  out->set_arch(c.arch);
  v1::ShapeCoverage* shape = out->mutable_shape();
  shape->set_min_m(c.shape.min_m);
  shape->set_max_m(c.shape.max_m);
  shape->set_min_n(c.shape.min_n);
  shape->set_max_n(c.shape.max_n);
  shape->set_min_k(c.shape.min_k);
  shape->set_max_k(c.shape.max_k);
  shape->set_align_m(c.shape.align_m);
  shape->set_align_n(c.shape.align_n);
  shape->set_align_k(c.shape.align_k);
}

void ToProto(const CandidateStatus& c, v1::CandidateInfo* out) {
  const CandidateSpec& spec = c.candidate->spec;
  out->set_name(spec.name);
  out->set_version(spec.version);
  out->set_tier(spec.tier);
  out->set_description(spec.description);
  for (const CandidateMember& m : spec.members) ToProto(m.contract, out->add_members());
  out->set_eligible(c.eligible);
  out->set_ineligible_reason(c.reason);
  for (const QuarantineEntry& q : c.quarantine) ToProto(q, out->add_quarantine());
}

v1::RegionKind RegionKindToProto(RegionKind kind) {
  switch (kind) {
    case RegionKind::kHostMemfd:
      return v1::REGION_KIND_HOST_MEMFD;
    case RegionKind::kCudaVmmFd:
      return v1::REGION_KIND_CUDA_VMM_FD;
    case RegionKind::kCudaIpc:
      return v1::REGION_KIND_CUDA_IPC;
  }
  return v1::REGION_KIND_UNSPECIFIED;
}

void ToProto(const Peer& p, v1::Peer* out) {
  out->set_session(static_cast<int64_t>(p.session));
  if (p.session != 0) {
    out->set_pid(p.pid);
    out->set_uid(p.uid);
    out->set_gid(p.gid);
  }
  out->set_address(p.ToString());
}

void ToProto(const RegionInfo& r, v1::Region* out) {
  out->set_id(r.id);
  out->set_kind(RegionKindToProto(r.kind));
  out->set_bytes(r.bytes);
  out->set_label(r.label);
  ToProto(r.owner, out->mutable_owner());
  out->set_created_unix(r.created_unix);
}

void ToProto(const TensorInfo& t, v1::Tensor* out) {
  out->set_handle(t.handle);
  out->set_bytes(t.bytes);
  out->set_label(t.label);
  ToProto(t.owner, out->mutable_owner());
  out->set_created_unix(t.created_unix);
}

void ToProto(const Selection& s, v1::SelectResponse* out) {
  out->set_candidate(s.candidate);
  out->set_candidate_version(s.version);
  out->set_source(VerdictSourceToProto(s.source));
  out->set_bucket(s.bucket.ToString());
  out->set_reason(s.reason);
  if (s.verdict.has_value()) ToProto(*s.verdict, out->mutable_verdict());
}

}  // namespace arbiter::server
