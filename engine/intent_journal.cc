#include "engine/intent_journal.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "spdlog/spdlog.h"

namespace arbiter {
namespace {

constexpr char kHeader[] = "arbiter tuning intent v1\n";
constexpr char kEnd[] = "end\n";

absl::Status Errno(const std::string& what, const std::string& path) {
  return absl::FailedPreconditionError(
      absl::StrCat("tuning intent file ", path, ": ", what, ": ", std::strerror(errno)));
}

}  // namespace

std::string FormatIntentRecord(const std::optional<Intent>& intent) {
  std::string text = kHeader;
  if (!intent) {
    absl::StrAppend(&text, "state=idle\n");
  } else {
    const Intent& i = *intent;
    absl::StrAppend(&text, "state=measuring\n", "candidate=", absl::CEscape(i.candidate), "\n",
                    "version=", i.version, "\n", "dtype=", DTypeName(i.problem.dtype), "\n",
                    "m=", i.problem.m, "\n", "n=", i.problem.n, "\n", "k=", i.problem.k, "\n",
                    "phase=", absl::CEscape(i.phase), "\n", "pid=", i.pid, "\n",
                    "since_unix=", i.since_unix, "\n");
    // The cause is the one free-form field: cut to fit the page, before escaping
    // (an escape takes at most 4 characters), so no escape is ever cut in two.
    const size_t room = (IntentJournal::kRecordBytes - text.size() - 64) / 4;
    absl::StrAppend(&text, "cause=", absl::CEscape(i.cause.substr(0, room)), "\n");
  }
  absl::StrAppend(&text, kEnd);
  return text;
}

absl::StatusOr<std::optional<Intent>> ParseIntentRecord(const std::string& text) {
  auto damaged = [&](std::string_view why) {
    return absl::DataLossError(absl::StrCat("tuning intent record: ", std::string(why)));
  };
  if (text.rfind(kHeader, 0) != 0) return damaged("no header");
  const size_t end = text.find(absl::StrCat("\n", kEnd));
  if (end == std::string::npos) return damaged("no end line");
  std::map<std::string, std::string> fields;
  const size_t body = sizeof(kHeader) - 1;
  const std::vector<std::string> lines =
      absl::StrSplit(text.substr(body, end + 1 - body), '\n', absl::SkipEmpty());
  for (const std::string& line : lines) {
    const size_t eq = line.find('=');
    if (eq == std::string::npos) return damaged(absl::StrCat("line without '=': ", line));
    fields[line.substr(0, eq)] = line.substr(eq + 1);
  }
  if (fields["state"] == "idle") return std::optional<Intent>();
  if (fields["state"] != "measuring") return damaged(absl::StrCat("state \"", fields["state"], "\""));
  Intent i;
  std::optional<DType> dtype = ParseDType(fields["dtype"]);
  if (!absl::CUnescape(fields["candidate"], &i.candidate) ||
      !absl::CUnescape(fields["phase"], &i.phase) || !absl::CUnescape(fields["cause"], &i.cause) ||
      !absl::SimpleAtoi(fields["version"], &i.version) || !dtype ||
      !absl::SimpleAtoi(fields["m"], &i.problem.m) || !absl::SimpleAtoi(fields["n"], &i.problem.n) ||
      !absl::SimpleAtoi(fields["k"], &i.problem.k) || !absl::SimpleAtoi(fields["pid"], &i.pid) ||
      !absl::SimpleAtoi(fields["since_unix"], &i.since_unix) || i.candidate.empty()) {
    return damaged("a field is missing or unreadable");
  }
  i.problem.dtype = *dtype;
  return std::optional<Intent>(std::move(i));
}

absl::StatusOr<std::unique_ptr<IntentJournal>> IntentJournal::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("cannot open", path);
  std::unique_ptr<IntentJournal> journal(new IntentJournal(path, fd));
  std::string text(kRecordBytes, '\0');
  const ssize_t got = ::pread(fd, text.data(), text.size(), 0);
  if (got < 0) return Errno("cannot read", path);
  text.resize(static_cast<size_t>(got));
  if (!text.empty()) {
    absl::StatusOr<std::optional<Intent>> leftover = ParseIntentRecord(text);
    if (leftover.ok()) {
      journal->leftover_ = *std::move(leftover);
    } else {
      // Not a record this build wrote: nothing can be learned from it; start afresh.
      spdlog::warn("tuning intent file {} ignored: {}", path, leftover.status().ToString());
    }
  }
  absl::MutexLock lock(&journal->mu_);
  RETURN_IF_ERROR(journal->Write(journal->leftover_));  // a whole page from the start
  journal->current_ = journal->leftover_;
  return journal;
}

IntentJournal::~IntentJournal() { ::close(fd_); }

absl::Status IntentJournal::Write(const std::optional<Intent>& intent) {
  std::string page = FormatIntentRecord(intent);
  page.resize(kRecordBytes, '\n');
  const ssize_t put = ::pwrite(fd_, page.data(), page.size(), 0);
  if (put != static_cast<ssize_t>(page.size())) return Errno("cannot write", path_);
  current_ = intent;
  return absl::OkStatus();
}

absl::Status IntentJournal::Record(const Intent& intent) {
  absl::MutexLock lock(&mu_);
  return Write(intent);
}

absl::Status IntentJournal::SetCause(const std::string& cause) {
  absl::MutexLock lock(&mu_);
  if (!current_) return absl::OkStatus();
  Intent i = *current_;
  i.cause = cause;
  return Write(i);
}

absl::Status IntentJournal::Clear() {
  absl::MutexLock lock(&mu_);
  if (!current_) return absl::OkStatus();
  return Write(std::nullopt);
}

}  // namespace arbiter
