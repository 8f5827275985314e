// What a trace directory becomes: a Chrome trace (Perfetto, chrome://tracing),
// the execution trees as Graphviz DOT, the counters as CSV, and the data and
// page of `tessera report` (report.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/trace/trace_file.hpp"

namespace tessera::trace {

// Chrome trace-event JSON: one process per locality, one track per thread
// that ran tasks, communication on tracks of its own (overlapping operations
// on separate lanes), training steps and their phases on one track; complete
// ("X") events on the merged clock, in microseconds. Problems of the trace
// are in "otherData".
std::string chrome_trace_json(const TraceSet& set);

// Every program's execution tree (one cluster each) with per-node
// evaluations, exclusive and inclusive times summed over the localities; the
// node `pPnN` is row (program P, node N) of counters_csv.
std::string tree_dot(const TraceSet& set);

// Per-node counters, one row per locality and evaluated primitive node:
// locality,program,node,name,family,position,evaluations,exclusive_ns,
// inclusive_ns,mean_ns,spawned,execution.
std::string counters_csv(const TraceSet& set);

// Time accounting of one locality, in thread-nanoseconds over its threads.
struct LocalityStats {
  int locality = 0;
  int threads = 0;
  int64_t wall_ns = 0;       // from the start of its recording to its last event
  int64_t compute_ns = 0;    // threads busy with tasks and primitive work
  int64_t comm_wait_ns = 0;  // threads idle while communication was in flight
  int64_t idle_ns = 0;       // threads idle otherwise
  int64_t comm_ns = 0;       // wall time with any communication in flight
  uint64_t comm_bytes = 0;
  uint64_t comm_ops = 0, tasks = 0, node_events = 0, steps = 0;
};
std::vector<LocalityStats> locality_stats(const TraceSet& set);

// A training step split in phases, from its events: forward (until the
// gradient seed), backward (until the last computation before the first
// optimizer update; all-reduces of gradient buckets may overlap it),
// communication wait (the rest until the first optimizer update), optimizer
// (until the last update) and the rest (losses and metrics). A step without
// an optimizer update: backward until its first communication.
struct StepPhases {
  int locality = 0;
  uint64_t iteration = 0;
  int64_t t0 = 0, t1 = 0;
  int64_t forward = 0, backward = 0, comm_wait = 0, optimizer = 0, other = 0;
  bool split = false;  // false: the step's events did not show its phases
};
std::vector<StepPhases> step_phases(const TraceSet& set);

// The fast loops' runs and the native compiles of a trace, per loop (named
// file:line), summed over the localities: what a first call cost.
struct NativeLoopStats {
  std::string name;
  uint64_t runs = 0, native_runs = 0, general_runs = 0, rolled_back = 0;
  uint64_t turns = 0;  // run on the interpreter
  int64_t run_ns = 0;
  uint64_t compiled = 0, disk_loads = 0, process_loads = 0, refused = 0;
  int64_t compile_ns = 0;  // every compile event of the loop, loads included, but
  uint64_t optimised = 0;  // the -O3 tier's compiles on the background thread
  int64_t optimised_ns = 0;
  struct Compile {
    int mode = 0, source = 0;  // format.hpp's x record
    int64_t ns = 0;
  };
  std::vector<Compile> compiles;  // in the order recorded (by locality)
};
struct NativeStats {
  std::vector<NativeLoopStats> loops;  // most compile time first, then most run time
  uint64_t compiled = 0, disk_loads = 0, process_loads = 0, refused = 0;
  int64_t compile_ns = 0, load_ns = 0;  // compiling (and refusals), and loading from a cache
  int64_t generate_ns = 0, optimise_ns = 0, codegen_ns = 0;  // the compiles' steps
  uint64_t optimised = 0;  // background -O3 compiles (not in the counts and times above)
  int64_t optimised_ns = 0;
  uint64_t translated = 0;  // jit programs translated from Python (x records of mode 4)
  int64_t translate_ns = 0;
};
NativeStats native_stats(const TraceSet& set);

// The report's lines on native code (`tessera report`, Trace.text()): the
// compile total with cache hits and misses, then each loop's compiles and
// runs. Empty when the trace holds neither.
std::string native_report_text(const NativeStats& stats);

// Everything the report draws, as JSON (also what tessera.trace reads).
std::string summary_json(const TraceSet& set);

// The self-contained HTML report (no network needed to view it).
std::string report_html(const TraceSet& set);

}  // namespace tessera::trace
