// ThreadSanitizer builds only (ARBITER_SANITIZE=thread): makes Debian's
// abseil Mutex and CondVar visible to TSan.
//
// Why: libabsl_synchronization from Debian is not built with TSan, so its
// lock and unlock are atomics and futex calls TSan never sees. Every field our
// code (and gRPC, whose locks are absl::Mutex too) guards with an absl::Mutex
// would be reported as a race, and the reports that matter would drown. This
// file defines the Mutex and CondVar entry points in the executable - which the
// dynamic linker then binds in place of the library's, for our code and for
// libgrpc alike - each calling the library's own (found with dlsym(RTLD_NEXT))
// and telling TSan what it did: __tsan_acquire(mutex) after a lock,
// __tsan_release(mutex) before an unlock, both around a wait. A condition that
// absl evaluates inside a blocking call reads the guarded state while TSan
// believes the mutex released, and so does an unlock, which evaluates the
// Conditions of the threads waiting (reading their state and the Condition on
// their stacks); reads are ignored for the duration of those calls (conditions
// only read).
//
// Bound to Debian 12's abseil 20220623 (inline namespace debian3) by mangled
// name: a different abseil fails loudly at the first lock, never silently.
#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

// These definitions are the lock functions themselves: clang's lock analysis
// of their bodies has nothing to say.
#pragma clang diagnostic ignored "-Wthread-safety-analysis"

#include <cstdio>
#include <cstdlib>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

extern "C" {
// The TSan runtime's dynamic-annotation entry points.
void AnnotateIgnoreReadsBegin(const char* file, int line);
void AnnotateIgnoreReadsEnd(const char* file, int line);
}

namespace {

template <typename Fn>
Fn Next(const char* mangled) {
  void* fn = dlsym(RTLD_NEXT, mangled);
  if (fn == nullptr) {
    std::fprintf(stderr, "absl_tsan_annotations: %s not found (%s): another abseil?\n", mangled,
                 dlerror());
    std::abort();
  }
  return reinterpret_cast<Fn>(fn);
}

// Ignores this thread's reads while absl may evaluate a Condition.
struct IgnoreReads {
  IgnoreReads() { AnnotateIgnoreReadsBegin(__FILE__, __LINE__); }
  ~IgnoreReads() { AnnotateIgnoreReadsEnd(__FILE__, __LINE__); }
};

using absl::CondVar;
using absl::Condition;
using absl::Duration;
using absl::Mutex;
using absl::Time;

}  // namespace

#define ARBITER_NEXT(type, mangled)                  \
  static const auto next = Next<type>(mangled)

void Mutex::Lock() {
  ARBITER_NEXT(void (*)(Mutex*), "_ZN4absl7debian35Mutex4LockEv");
  next(this);
  __tsan_acquire(this);
}

void Mutex::ReaderLock() {
  ARBITER_NEXT(void (*)(Mutex*), "_ZN4absl7debian35Mutex10ReaderLockEv");
  next(this);
  __tsan_acquire(this);
}

bool Mutex::TryLock() {
  ARBITER_NEXT(bool (*)(Mutex*), "_ZN4absl7debian35Mutex7TryLockEv");
  const bool locked = next(this);
  if (locked) __tsan_acquire(this);
  return locked;
}

bool Mutex::ReaderTryLock() {
  ARBITER_NEXT(bool (*)(Mutex*), "_ZN4absl7debian35Mutex13ReaderTryLockEv");
  const bool locked = next(this);
  if (locked) __tsan_acquire(this);
  return locked;
}

void Mutex::Unlock() {
  ARBITER_NEXT(void (*)(Mutex*), "_ZN4absl7debian35Mutex6UnlockEv");
  __tsan_release(this);
  IgnoreReads ignore;  // the unlocking thread evaluates the waiters' Conditions
  next(this);
}

void Mutex::ReaderUnlock() {
  ARBITER_NEXT(void (*)(Mutex*), "_ZN4absl7debian35Mutex12ReaderUnlockEv");
  __tsan_release(this);
  IgnoreReads ignore;  // the unlocking thread evaluates the waiters' Conditions
  next(this);
}

void Mutex::LockWhen(const Condition& cond) {
  ARBITER_NEXT(void (*)(Mutex*, const Condition&), "_ZN4absl7debian35Mutex8LockWhenERKNS0_9ConditionE");
  {
    IgnoreReads ignore;
    next(this, cond);
  }
  __tsan_acquire(this);
}

void Mutex::ReaderLockWhen(const Condition& cond) {
  ARBITER_NEXT(void (*)(Mutex*, const Condition&),
               "_ZN4absl7debian35Mutex14ReaderLockWhenERKNS0_9ConditionE");
  {
    IgnoreReads ignore;
    next(this, cond);
  }
  __tsan_acquire(this);
}

bool Mutex::LockWhenWithTimeout(const Condition& cond, Duration timeout) {
  ARBITER_NEXT(bool (*)(Mutex*, const Condition&, Duration),
               "_ZN4absl7debian35Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  bool met;
  {
    IgnoreReads ignore;
    met = next(this, cond, timeout);
  }
  __tsan_acquire(this);  // held whether or not the condition came true
  return met;
}

bool Mutex::LockWhenWithDeadline(const Condition& cond, Time deadline) {
  ARBITER_NEXT(bool (*)(Mutex*, const Condition&, Time),
               "_ZN4absl7debian35Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  bool met;
  {
    IgnoreReads ignore;
    met = next(this, cond, deadline);
  }
  __tsan_acquire(this);
  return met;
}

bool Mutex::ReaderLockWhenWithTimeout(const Condition& cond, Duration timeout) {
  ARBITER_NEXT(bool (*)(Mutex*, const Condition&, Duration),
               "_ZN4absl7debian35Mutex25ReaderLockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  bool met;
  {
    IgnoreReads ignore;
    met = next(this, cond, timeout);
  }
  __tsan_acquire(this);
  return met;
}

bool Mutex::ReaderLockWhenWithDeadline(const Condition& cond, Time deadline) {
  ARBITER_NEXT(bool (*)(Mutex*, const Condition&, Time),
               "_ZN4absl7debian35Mutex26ReaderLockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  bool met;
  {
    IgnoreReads ignore;
    met = next(this, cond, deadline);
  }
  __tsan_acquire(this);
  return met;
}

void Mutex::Await(const Condition& cond) {
  ARBITER_NEXT(void (*)(Mutex*, const Condition&), "_ZN4absl7debian35Mutex5AwaitERKNS0_9ConditionE");
  __tsan_release(this);
  {
    IgnoreReads ignore;
    next(this, cond);
  }
  __tsan_acquire(this);
}

bool Mutex::AwaitWithTimeout(const Condition& cond, Duration timeout) {
  ARBITER_NEXT(bool (*)(Mutex*, const Condition&, Duration),
               "_ZN4absl7debian35Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  __tsan_release(this);
  bool met;
  {
    IgnoreReads ignore;
    met = next(this, cond, timeout);
  }
  __tsan_acquire(this);
  return met;
}

bool Mutex::AwaitWithDeadline(const Condition& cond, Time deadline) {
  ARBITER_NEXT(bool (*)(Mutex*, const Condition&, Time),
               "_ZN4absl7debian35Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  __tsan_release(this);
  bool met;
  {
    IgnoreReads ignore;
    met = next(this, cond, deadline);
  }
  __tsan_acquire(this);
  return met;
}

void CondVar::Wait(Mutex* mu) {
  ARBITER_NEXT(void (*)(CondVar*, Mutex*), "_ZN4absl7debian37CondVar4WaitEPNS0_5MutexE");
  __tsan_release(mu);
  next(this, mu);
  __tsan_acquire(mu);
}

bool CondVar::WaitWithTimeout(Mutex* mu, Duration timeout) {
  ARBITER_NEXT(bool (*)(CondVar*, Mutex*, Duration),
               "_ZN4absl7debian37CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE");
  __tsan_release(mu);
  const bool timed_out = next(this, mu, timeout);
  __tsan_acquire(mu);
  return timed_out;
}

bool CondVar::WaitWithDeadline(Mutex* mu, Time deadline) {
  ARBITER_NEXT(bool (*)(CondVar*, Mutex*, Time),
               "_ZN4absl7debian37CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  __tsan_release(mu);
  const bool timed_out = next(this, mu, deadline);
  __tsan_acquire(mu);
  return timed_out;
}
