// Native stacks for fatal signals, for reports from machines we cannot debug on.
//
// JAXMLX_CRASH_TRACE=1 installs handlers for SIGSEGV, SIGFPE, SIGBUS, SIGILL and SIGABRT that
// print the faulting thread's native stack (our frames and libmlx's, by exported symbol) to
// stderr, then hand the signal to whatever handler was there before (Python's faulthandler
// prints the Python stack next). Off by default: a process's signal handlers belong to its owner.
#pragma once

namespace jaxmlx::crash_trace {

// Installs the handlers once if JAXMLX_CRASH_TRACE is set and not "0"; later calls do nothing.
void install_if_requested();

}  // namespace jaxmlx::crash_trace
