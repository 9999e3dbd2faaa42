// While a Function runs its body eagerly (RunFunctionsEagerly(true)), JitScope must not
// be opened: TF's jit_scope "raises RuntimeError if called when eager execution is
// enabled". A JitScope cannot return a Status, so it records its name here, on the
// tracing thread, and the Function fails the call with FailedPrecondition naming it.
#ifndef BRAZE_FRONTEND_EAGER_BODY_H_
#define BRAZE_FRONTEND_EAGER_BODY_H_

#include <string>

namespace braze {
namespace frontend {

struct EagerBody {
  std::string first_jit_scope;  // empty: no JitScope was opened
};

// The eager body running on this thread, or null. Set by Function (src/api/) around its
// body; read by JitScope.
EagerBody*& CurrentEagerBody();

// Around a JitScope that Braze itself opens inside a body (loss scaling's HostCall, kept
// out of compiled code): that scope is not one the body opened, so it must not fail an
// eager call. While one lives, no eager body is current on this thread.
class LibraryJitScopeGuard {
 public:
  LibraryJitScopeGuard() : saved_(CurrentEagerBody()) { CurrentEagerBody() = nullptr; }
  ~LibraryJitScopeGuard() { CurrentEagerBody() = saved_; }
  LibraryJitScopeGuard(const LibraryJitScopeGuard&) = delete;
  LibraryJitScopeGuard& operator=(const LibraryJitScopeGuard&) = delete;

 private:
  EagerBody* saved_;
};

}  // namespace frontend
}  // namespace braze

#endif  // BRAZE_FRONTEND_EAGER_BODY_H_
