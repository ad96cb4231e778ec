#include "engine/quarantine.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace arbiter {

namespace {

bool Names(const QuarantineEntry& q, const CandidateSpec& c) {
  return q.candidate == c.name && (q.version == 0 || q.version == c.version);
}

}  // namespace

absl::StatusOr<QuarantineScope> QuarantineScope::Parse(std::string_view text) {
  if (text == "*") return Everywhere();
  if (std::optional<DType> dtype = ParseDType(text)) return OfDType(*dtype);
  if (const size_t slash = text.find('/'); slash != std::string_view::npos) {
    std::optional<DType> dtype = ParseDType(text.substr(0, slash));
    std::optional<Bucket> bucket = ParseBucket(std::string(text.substr(slash + 1)));
    if (dtype && bucket) return OfBucket(BucketKey{*dtype, *bucket});
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "scope: expected \"*\", a dtype (f32, f64, f16, bf16) or \"dtype/bucket\" "
      "(e.g. f32/m(32,64]a8.n(32,64]a8.k(32,64]a8), got \"",
      std::string(text), "\""));
}

bool QuarantineScope::Covers(DType d, const Bucket& b) const {
  if (!dtype) return true;
  return *dtype == d && (!bucket || *bucket == b);
}

std::string QuarantineScope::ToString() const {
  if (!dtype) return "*";
  if (!bucket) return DTypeName(*dtype);
  return BucketKey{*dtype, *bucket}.ToString();
}

absl::StatusOr<std::unique_ptr<Quarantine>> Quarantine::Create(VerdictStore& store,
                                                               std::string fingerprint) {
  std::unique_ptr<Quarantine> q(new Quarantine(store, std::move(fingerprint)));
  RETURN_IF_ERROR(q->Reload());
  return q;
}

absl::Status Quarantine::Add(const std::string& candidate, int version,
                             const QuarantineScope& scope, const std::string& reason) {
  const QuarantineEntry q{candidate, version, scope.ToString(), fingerprint_, reason,
                          std::chrono::duration_cast<std::chrono::seconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count()};
  RETURN_IF_ERROR(store_.PutQuarantine(q));
  RETURN_IF_ERROR(Reload());
  if (observer_) observer_->OnQuarantine(q);
  return absl::OkStatus();
}

absl::StatusOr<int> Quarantine::Clear(const std::string& candidate) {
  ASSIGN_OR_RETURN(int removed, store_.ClearQuarantine(fingerprint_, candidate));
  RETURN_IF_ERROR(Reload());
  return removed;
}

absl::StatusOr<std::vector<QuarantineEntry>> Quarantine::List() const {
  return store_.ListQuarantine(fingerprint_);
}

bool Quarantine::Covers(const CandidateSpec& c, DType dtype, const Bucket& bucket) const {
  absl::MutexLock lock(&mu_);
  for (const Entry& e : entries_) {
    if (Names(e.record, c) && e.scope.Covers(dtype, bucket)) return true;
  }
  return false;
}

std::vector<Quarantine::Entry> Quarantine::EntriesFor(const CandidateSpec& c) const {
  std::vector<Entry> out;
  absl::MutexLock lock(&mu_);
  for (const Entry& e : entries_) {
    if (Names(e.record, c)) out.push_back(e);
  }
  return out;
}

absl::Status Quarantine::Reload() {
  ASSIGN_OR_RETURN(std::vector<QuarantineEntry> records, store_.ListQuarantine(fingerprint_));
  std::vector<Entry> entries;
  for (QuarantineEntry& record : records) {
    absl::StatusOr<QuarantineScope> scope = QuarantineScope::Parse(record.scope);
    if (!scope.ok()) {
      // Only a store edited by hand holds one: it applies nowhere, as it never could.
      spdlog::warn("quarantine of {} ignored: stored {}", record.candidate,
                   std::string(scope.status().message()));
      continue;
    }
    entries.push_back(Entry{std::move(record), *scope});
  }
  absl::MutexLock lock(&mu_);
  entries_ = std::move(entries);
  return absl::OkStatus();
}

}  // namespace arbiter
