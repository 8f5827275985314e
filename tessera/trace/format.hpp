// The trace file of one locality (DIR/locality-R.trace): text, one record per
// line, fields separated by tabs (tab, newline and backslash inside a field
// are escaped as \t, \n and \\). Times are nanoseconds since the start of the
// recording; the `clock` record maps them onto the wall clock.
//
//   tessera-trace  1                              first line: format and version
//   run            RUN-ID                         shared by the localities of one run
//   locality       R  N                           this locality and the number of localities
//   host           HOSTNAME  PID
//   clock          REALTIME-NS-AT-START           CLOCK_REALTIME when the recording started
//   span           END                            the recording's length
//   thread         T  NAME                        a thread that recorded events
//   program        P  NAME                        a program run during the recording...
//   text           P  TEXT                        ...its text
//   node           P  ID  PARENT  PRIMITIVE  FAMILY  LABEL  POSITION  EVALUATIONS  TOTAL-NS  SPAWNED
//   source         NAME  TEXT                     a source file the positions refer to
//   string         S  TEXT                        names used by `c` records
//   n              T  T0  T1  P  ID  C0  C1       a primitive node's own work on thread T; C0, C1:
//                                                 thread T's CPU clock at its start and end (ns,
//                                                 -1 unknown; absent in files of earlier builds)
//   t              T  T0  T1  P  ID  TILE         a task (TILE 1: a parallel_for tile of node P/ID)
//   c              T0  T1  BYTES  PEER  OP  SITE  communication (PEER -1: a collective)
//   s              T0  T1  ITERATION              a training step
//   l              T  T0  T1  P  ID  NAME  FLAGS  TURNS  CALLS
//                                                 a run of a fast loop: NAME a `string` (file:line),
//                                                 FLAGS kLoop* of runtime/trace.hpp, TURNS run on the
//                                                 interpreter, CALLS of its native code
//   x              T  T0  T1  NAME  SIGNATURE  MODE  SOURCE  IR-BYTES  GENERATE-NS  OPTIMISE-NS  CODEGEN-NS
//                                                 a native compile on thread T: NAME, SIGNATURE
//                                                 `string`s; MODE 0 whole, 1 partial, 2 the whole
//                                                 code after a partial one, 3 refused, 4 a jit
//                                                 function's translation (NAME the function), 5 a
//                                                 loop's optimised tier on the background thread
//                                                 (GENERATE-NS: parsing its IR); SOURCE 0
//                                                 compiled, 1 the disk cache, 2 already in the
//                                                 process; step times -1 when not run
//   dropped        COUNT                          events lost to full buffers
//   end            EVENTS                         last line: the file is complete
//
// A reader skips records it does not know, so a new kind of record (l and x
// came after the first files) needs no new version: files of earlier builds
// simply hold none, and earlier readers read later files without them. The
// version changes when a record's meaning changes.
//
// Node records list each program's tree depth first (PARENT -1 for the
// root); the counters are those of the recorded runs. P/ID of an event is
// -1/-1 when the node belongs to no program run during the recording.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tessera::trace {

inline constexpr const char* kFileMagic = "tessera-trace";
inline constexpr int kFileVersion = 1;
// Written by `tessera run --trace` into the directory before the ranks start.
inline constexpr const char* kRunFileName = "tessera-run.txt";

inline std::string escape_field(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\\') {
      out += "\\\\";
    } else {
      out += c;
    }
  }
  return out;
}

inline std::string unescape_field(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size()) {
      char c = s[++i];
      out += c == 't' ? '\t' : c == 'n' ? '\n' : c;
    } else {
      out += s[i];
    }
  }
  return out;
}

// The tab-separated fields of a line (not unescaped).
inline std::vector<std::string_view> split_fields(std::string_view line) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (;;) {
    size_t tab = line.find('\t', start);
    if (tab == std::string_view::npos) {
      out.push_back(line.substr(start));
      return out;
    }
    out.push_back(line.substr(start, tab - start));
    start = tab + 1;
  }
}

}  // namespace tessera::trace
