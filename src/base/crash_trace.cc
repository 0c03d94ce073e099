#include "base/crash_trace.h"

#include <execinfo.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <cstdlib>
#include <mutex>

namespace jaxmlx::crash_trace {
namespace {

constexpr int kSignals[] = {SIGSEGV, SIGFPE, SIGBUS, SIGILL, SIGABRT};
struct sigaction previous[sizeof(kSignals) / sizeof(kSignals[0])];

void write_str(const char* s) {
  ssize_t ignored = write(STDERR_FILENO, s, strlen(s));
  (void)ignored;
}

void on_fatal(int sig, siginfo_t* info, void* context) {
  write_str("\njax-mlx: fatal signal ");
  write_str(strsignal(sig));
  write_str("; native stack of the faulting thread:\n");
  void* frames[64];
  int n = backtrace(frames, 64);
  backtrace_symbols_fd(frames, n, STDERR_FILENO);
  // Hand over to the handler that was installed before ours (or the default action).
  for (size_t i = 0; i < sizeof(kSignals) / sizeof(kSignals[0]); ++i) {
    if (kSignals[i] != sig) continue;
    const struct sigaction& old = previous[i];
    if (old.sa_flags & SA_SIGINFO) {
      if (old.sa_sigaction != nullptr) return old.sa_sigaction(sig, info, context);
    } else if (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN) {
      return old.sa_handler(sig);
    }
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

}  // namespace

void install_if_requested() {
  static std::once_flag once;
  std::call_once(once, [] {
    const char* v = std::getenv("JAXMLX_CRASH_TRACE");
    if (v == nullptr || *v == '\0' || *v == '0') return;
    void* warm[1];
    backtrace(warm, 1);  // loads the unwinder now: the first call may allocate
    for (size_t i = 0; i < sizeof(kSignals) / sizeof(kSignals[0]); ++i) {
      struct sigaction sa {};
      sa.sa_sigaction = on_fatal;
      sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
      sigemptyset(&sa.sa_mask);
      sigaction(kSignals[i], &sa, &previous[i]);
    }
  });
}

}  // namespace jaxmlx::crash_trace
