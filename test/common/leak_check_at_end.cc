// Under AddressSanitizer, LeakSanitizer's check runs once, when the last test has finished,
// instead of at exit (docs/SANITIZERS.md).
//
// Why: LeakSanitizer's stop-the-world tracer sometimes crashes ("Tracer caught signal 11")
// when it runs at exit, while static destructors tear down thread pools and JIT modules.
// CI saw it three times, twice in a row in one child of shipped_schedules_test. Here every
// thread is still alive and parked and every JIT module still mapped. The check itself is
// the same: any leak is a finding and fails the binary (__lsan_do_leak_check dies with
// LeakSanitizer's exit code); the at-exit check is then skipped, as LeakSanitizer documents
// for a program that called it.
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>

#include "gtest/gtest.h"

namespace {

class LeakCheckAtEnd : public ::testing::Environment {
 public:
  void TearDown() override { __lsan_do_leak_check(); }
};

// A static initializer: this file is compiled into every test binary (test/CMakeLists.txt),
// so no test main needs to know about it.
[[maybe_unused]] ::testing::Environment* const kLeakCheckAtEnd =
    ::testing::AddGlobalTestEnvironment(new LeakCheckAtEnd);

}  // namespace
#endif  // __SANITIZE_ADDRESS__
