// Conversions between the wire contract (arbiter.v1 messages) and engine types.
// Incoming values are checked here - an unspecified or unknown enum is
// INVALID_ARGUMENT naming the accepted values - so handlers reject a request
// before any compute or allocation. Outgoing conversions cannot fail.
//
// Thread-safe: pure functions.
#pragma once

#include <optional>

#include "arbiter/v1/arbiter.pb.h"
#include "engine/arbiter.h"
#include "engine/problem.h"
#include "engine/verdict.h"
#include "engine/verdict_store.h"

namespace arbiter::server {

// --- wire -> engine (validated) ---

// `field` names the request field in error messages ("problem.dtype").
absl::StatusOr<DType> DTypeFromProto(v1::DType dtype, std::string_view field);
// The dtype and every dimension, against `limits` (positive, operand bytes within the limits).
absl::StatusOr<Problem> ProblemFromProto(const v1::Problem& p, const ProblemLimits& limits);
// Unspecified means "any" (nondeterministic).
absl::StatusOr<Determinism> DeterminismFromProto(v1::Determinism d);
// Unspecified means the daemon's default (nullopt).
absl::StatusOr<std::optional<TuningPolicy>> TuningFromProto(v1::TuningPolicy t);
// Unspecified means fleet.
absl::StatusOr<Reach> ReachFromProto(v1::Reach r);
// Whether C completes by event (EVENT); unspecified means SYNC (false).
absl::StatusOr<bool> CompletionFromProto(v1::Completion c);

// Unspecified or unknown: INVALID_ARGUMENT naming the kinds.
absl::StatusOr<RegionKind> RegionKindFromProto(v1::RegionKind kind);
// A set OperandRef: region or tensor, and its offset. `field` names it in errors ("a_ref").
absl::StatusOr<OperandRef> OperandRefFromProto(const v1::OperandRef& ref, std::string_view field);

// --- engine -> wire ---

v1::DType DTypeToProto(DType dtype);
v1::Determinism DeterminismToProto(Determinism d);
v1::VerdictSource VerdictSourceToProto(VerdictSource s);
v1::Problem ProblemToProto(const Problem& p);
v1::Reach ReachToProto(Reach r);
void ToProto(const CandidateResult& r, v1::CandidateResult* out);
void ToProto(const Verdict& v, v1::Verdict* out);
void ToProto(const Force& f, Reach reach, v1::Force* out);
void ToProto(const QuarantineEntry& q, v1::QuarantineEntry* out);
void ToProto(const MemberContract& c, v1::MemberContract* out);
void ToProto(const CandidateStatus& c, v1::CandidateInfo* out);
void ToProto(const Selection& s, v1::SelectResponse* out);
v1::RegionKind RegionKindToProto(RegionKind kind);
void ToProto(const Peer& p, v1::Peer* out);
void ToProto(const RegionInfo& r, v1::Region* out);
void ToProto(const TensorInfo& t, v1::Tensor* out);

}  // namespace arbiter::server
