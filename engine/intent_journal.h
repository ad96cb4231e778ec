// What is being measured right now, kept in a small file beside the store, so
// that an arbiterd that dies in the middle of a measurement - a candidate that
// crashed the process, faulted the device or hung until the watchdog ended it -
// learns on restart which candidate was running and quarantines it (see
// Arbiter::Create). The record belongs to this daemon process, not to the
// verdicts it shares with others, which is why it is a file of its own and not
// a table of the (possibly shared) store.
//
// One fixed-size record of one page, rewritten in place by a single pwrite: a
// process that dies is never left with half a record (a write of one page to
// the page cache completes or does not happen), and no fsync - it must survive
// the process, not the machine. Writing costs a system call, so the measurer
// may record before every launch.
//
// Thread-safe: provides internal synchronization (one mutex over the file).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "engine/bucket.h"
#include "engine/problem.h"
#include "engine/status.h"

namespace arbiter {

// A candidate whose kernels may be running, and where.
struct Intent {
  std::string candidate;
  int version = 0;
  Problem problem;          // the shape being measured (its bucket is the scope)
  std::string phase;        // "oracle", "determinism" or "timing"
  std::string cause;        // set when the daemon itself saw what went wrong (a hang, a device
                            // error) before exiting; empty when it simply died
  int64_t pid = 0;          // the process that wrote it
  int64_t since_unix = 0;   // when the phase began

  bool operator==(const Intent&) const = default;
};

class IntentJournal {
 public:
  // The journal at `path`, created when absent. What it held (an intent left by a
  // process that died measuring) is kept for leftover() and stays recorded until
  // Clear; a file this build cannot read is logged and started afresh.
  static absl::StatusOr<std::unique_ptr<IntentJournal>> Open(const std::string& path);
  ~IntentJournal();
  IntentJournal(const IntentJournal&) = delete;
  IntentJournal& operator=(const IntentJournal&) = delete;

  // The intent found at Open: nullopt when the last process ended its measurements.
  const std::optional<Intent>& leftover() const { return leftover_; }

  // `intent` is what runs from now on.
  absl::Status Record(const Intent& intent);
  // Adds what went wrong to the recorded intent (no-op when none is recorded).
  absl::Status SetCause(const std::string& cause);
  // Nothing runs.
  absl::Status Clear();

  // The file's size: one page.
  static constexpr size_t kRecordBytes = 4096;

 private:
  IntentJournal(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  absl::Status Write(const std::optional<Intent>& intent) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string path_;
  std::optional<Intent> leftover_;
  absl::Mutex mu_;
  const int fd_;
  std::optional<Intent> current_ ABSL_GUARDED_BY(mu_);
};

// The text of a record (tests; the journal writes and parses it).
std::string FormatIntentRecord(const std::optional<Intent>& intent);
// nullopt for an idle record; DATA_LOSS for a record this build cannot read.
absl::StatusOr<std::optional<Intent>> ParseIntentRecord(const std::string& text);

}  // namespace arbiter
