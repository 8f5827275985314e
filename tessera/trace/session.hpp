// A trace session of this process: starts the recorder (runtime/trace.hpp),
// and when it stops writes what was recorded, with the trees of the programs
// that ran, into DIR/locality-R.trace (R = this locality). `tessera run
// --trace DIR` gives every rank the same DIR (TESSERA_TRACE), so a run of N
// localities leaves N files, which `tessera report` merges (trace_file.hpp).
#pragma once

#include <cstdint>
#include <string>

namespace tessera::trace {

// The environment variables of a traced run: the directory, and an id shared
// by the localities of one run (set by `tessera run --trace`).
inline constexpr const char* kTraceDirEnv = "TESSERA_TRACE";
inline constexpr const char* kTraceRunEnv = "TESSERA_TRACE_RUN";
// "1": node events also carry the thread's CPU clock (a system call at the
// start and end of every primitive evaluation; the pipeline bubble's replay,
// bench/pipeline_replay.py, needs it).
inline constexpr const char* kTraceCpuEnv = "TESSERA_TRACE_CPU";

// Starts recording; the trace goes into `dir` (created if missing). Raises
// RuntimeError if a session is running or `dir` cannot be created.
void start_session(const std::string& dir);

// Starts a session if TESSERA_TRACE names a directory and none is running.
// Returns true if one was started.
bool start_session_from_env();

bool session_active();
std::string session_dir();

// Stops recording and writes DIR/locality-R.trace (through a temporary file
// and a rename, so a reader never sees half a file). Returns its path.
std::string stop_session();

// A training step from `t0` to `t1` (now_ns() times), recorded when a
// session runs (Sequential.fit calls it for every step).
void record_step(int64_t iteration, int64_t t0, int64_t t1);

// Source text for the report (a Python file whose jit functions ran): kept
// for the running session and written with it.
void add_source(const std::string& name, const std::string& text);

// The name of locality r's file in a trace directory.
std::string locality_file_name(int locality);

}  // namespace tessera::trace
