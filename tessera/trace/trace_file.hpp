// Reading a trace directory: every locality's file (format.hpp), merged onto
// one clock, with what is missing or damaged said in `problems`.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tessera::trace {

// The reader's bounds on what a file may claim (larger values mark the
// file as damaged): localities of a run, and threads of one locality.
inline constexpr int kMaxLocalities = 1 << 20;
inline constexpr int kMaxThreads = 1 << 16;

struct TraceNode {
  int id = 0, parent = -1;
  bool primitive = false;
  std::string family, label, position;
  uint64_t evaluations = 0, exclusive_ns = 0, spawned = 0;
  uint64_t inclusive_ns = 0;  // exclusive time of the node and everything under it
  std::vector<int> children;
};

struct TraceProgram {
  std::string name, text;
  std::vector<TraceNode> nodes;
};

// An interval on the merged clock: nanoseconds since the earliest locality
// started recording.
struct TraceEvent {
  char kind = 'n';  // n node, t task, c communication, s step, l loop run, x native compile
  int thread = -1;  // index into LocalityTrace::threads (n, t)
  int64_t t0 = 0, t1 = 0;
  int program = -1, node = -1;  // n, t (-1: unknown)
  int64_t cpu0 = -1, cpu1 = -1;  // n: the thread's CPU clock at the start and end (-1: unknown)
  bool tile = false;            // t
  uint64_t amount = 0;          // c: bytes, s: iteration
  int peer = -1;                // c
  int op = -1, site = -1;       // c: into LocalityTrace::strings
  // l: the loop's name (into strings), kLoop* flags, turns on the interpreter
  // (amount), native calls (calls).
  // x: the loop's name and signature (into strings), mode and source (format.hpp),
  // IR bytes (amount), the steps' times (-1: not run).
  int name = -1, signature = -1;
  int flags = 0, mode = 0, source = 0;
  int64_t calls = 0;
  int64_t generate_ns = -1, optimise_ns = -1, codegen_ns = -1;
};

struct TraceThread {
  int index = 0;
  std::string name;
};

struct LocalityTrace {
  int locality = 0, num_localities = 1;
  std::string file, run, host;
  int64_t pid = 0;
  int64_t realtime_ns = 0;  // wall clock at the start of the recording
  int64_t begin = 0, end = 0;  // on the merged clock
  std::vector<TraceThread> threads;
  std::vector<TraceProgram> programs;
  std::vector<std::string> strings;
  std::map<std::string, std::string> sources;  // file name -> text
  std::vector<TraceEvent> events;  // node and task events per thread, in recorded order
  uint64_t dropped = 0;
  bool complete = false;  // the file ends with its `end` record
};

struct TraceSet {
  std::string dir;
  int expected = 0;  // localities the run had
  std::vector<LocalityTrace> localities;  // by locality
  // What is missing or damaged, one sentence each (also shown by the report).
  std::vector<std::string> problems;
  int64_t span_ns = 0;  // the end of the last event on the merged clock
};

// Reads every locality-*.trace of `dir` that belongs to the newest run.
// Missing localities, truncated files and files of other runs are listed in
// `problems`; a directory without any trace file raises ValueError.
TraceSet load_trace(const std::string& dir);

// The name of the node an event ran, or `fallback`.
std::string event_label(const LocalityTrace& loc, const TraceEvent& e, const std::string& fallback);

}  // namespace tessera::trace
