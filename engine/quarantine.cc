#include "engine/quarantine.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
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
                             const QuarantineScope& scope, const std::string& reason,
                             Reach reach) {
  const QuarantineEntry q{candidate, version, scope.ToString(), fingerprint_, reason,
                          absl::ToUnixSeconds(absl::Now())};
  if (reach == Reach::kNode) {
    absl::MutexLock lock(&mu_);
    node_entries_.push_back(Entry{q, scope});
  } else {
    RETURN_IF_ERROR(store_.PutQuarantine(q));
    absl::MutexLock lock(&mu_);
    entries_.push_back(Entry{q, scope});  // applied now; the store's notification re-reads
  }
  if (observer_) observer_->OnQuarantine(q);
  return absl::OkStatus();
}

absl::StatusOr<int> Quarantine::Clear(const std::string& candidate, Reach reach) {
  const auto named = [&](const Entry& e) {
    return candidate.empty() || e.record.candidate == candidate;
  };
  if (reach == Reach::kNode) {
    absl::MutexLock lock(&mu_);
    return static_cast<int>(std::erase_if(node_entries_, named));
  }
  ASSIGN_OR_RETURN(int removed, store_.ClearQuarantine(fingerprint_, candidate));
  absl::MutexLock lock(&mu_);
  std::erase_if(entries_, named);
  return removed;
}

absl::StatusOr<std::vector<QuarantineEntry>> Quarantine::List() const {
  ASSIGN_OR_RETURN(std::vector<QuarantineEntry> stored, store_.ListQuarantine(fingerprint_));
  std::vector<QuarantineEntry> out;
  {
    absl::MutexLock lock(&mu_);
    for (const Entry& e : node_entries_) out.push_back(e.record);
  }
  out.insert(out.end(), stored.begin(), stored.end());
  return out;
}

bool Quarantine::Covers(const CandidateSpec& c, DType dtype, const Bucket& bucket) const {
  absl::MutexLock lock(&mu_);
  for (const std::vector<Entry>* entries : {&node_entries_, &entries_}) {
    for (const Entry& e : *entries) {
      if (Names(e.record, c) && e.scope.Covers(dtype, bucket)) return true;
    }
  }
  return false;
}

std::vector<Quarantine::Entry> Quarantine::EntriesFor(const CandidateSpec& c) const {
  std::vector<Entry> out;
  absl::MutexLock lock(&mu_);
  for (const std::vector<Entry>* entries : {&node_entries_, &entries_}) {
    for (const Entry& e : *entries) {
      if (Names(e.record, c)) out.push_back(e);
    }
  }
  return out;
}

void Quarantine::Refresh() {
  if (!stale_) return;
  if (absl::Status reloaded = Reload(); !reloaded.ok()) {
    spdlog::debug("quarantine: keeping the last entries read ({})", reloaded.ToString());
  }
}

absl::Status Quarantine::Reload() {
  // Cleared first: a change reported while this read runs makes the next Refresh read again.
  stale_ = false;
  absl::StatusOr<std::vector<QuarantineEntry>> read = store_.ListQuarantine(fingerprint_);
  if (!read.ok()) {
    stale_ = true;
    return read.status();
  }
  std::vector<QuarantineEntry> records = *std::move(read);
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
