#include "tessera/trace/trace_file.hpp"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <optional>
#include <sstream>
#include <map>
#include <regex>
#include <stdexcept>
#include <unordered_map>

#include "tessera/core/error.hpp"
#include "tessera/kernels/io.hpp"
#include "tessera/trace/format.hpp"
#include "tessera/trace/session.hpp"

namespace tessera::trace {

namespace {

namespace fs = std::filesystem;

// A record that does not parse: the file is damaged from there on.
struct BadRecord {
  std::string why;
};

int64_t number(std::string_view s) {
  int64_t v = 0;
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (r.ec != std::errc() || r.ptr != s.data() + s.size()) {
    throw BadRecord{error_message("'", s, "' is not a number")};
  }
  return v;
}

// Times of a recording (nanoseconds) lie within +-2^52 (52 days) of its
// start, and wall clocks within [0, 2^62): sums and differences of them
// cannot overflow.
constexpr int64_t kMaxTime = int64_t{1} << 52;
constexpr int64_t kMaxRealtime = int64_t{1} << 62;

// A number in [lo, hi], or a BadRecord naming the field and the range.
int64_t number_in(std::string_view s, int64_t lo, int64_t hi, const char* what) {
  int64_t v = number(s);
  if (v < lo || v > hi) {
    throw BadRecord{error_message(what, " ", v, " is out of range (", lo, " to ", hi, ")")};
  }
  return v;
}

// An index into a table of `size` entries read so far; -1 too when `none`.
int index_into(std::string_view s, size_t size, bool none, const char* what) {
  int64_t v = number(s);
  if ((none && v == -1) || (v >= 0 && static_cast<uint64_t>(v) < size)) return static_cast<int>(v);
  throw BadRecord{error_message(what, " ", v, " is not defined before this record (", size,
                                size == 1 ? " is" : " are", " defined", none ? ", or -1 for none" : "",
                                ")")};
}

void need(const std::vector<std::string_view>& f, size_t n) {
  if (f.size() < n) {
    throw BadRecord{error_message("a '", f[0], "' record needs ", n - 1, " fields, this one has ", f.size() - 1)};
  }
}

// T0 and T1 of an event: within the recording, T0 <= T1.
void times(std::string_view t0, std::string_view t1, TraceEvent& e) {
  e.t0 = number_in(t0, -kMaxTime, kMaxTime, "time");
  e.t1 = number_in(t1, e.t0, kMaxTime, "end time");
}

struct RunFile {
  bool present = false;
  std::string run;
  int localities = 0;
};

// The bytes of a file in a trace folder, which others may write to: no link
// is followed and only a regular file is read (a FIFO would block, a device
// never end). Problems are reported as the file's, by the caller.
std::optional<std::string> read_trace_bytes(const fs::path& path, std::string* why) {
  try {
    return kernels::read_whole_file(path.string(), "report", /*follow_links=*/false);
  } catch (const std::exception& e) {
    if (why) *why = e.what();
    return std::nullopt;
  }
}

RunFile read_run_file(const fs::path& dir, std::vector<std::string>& problems) {
  RunFile r;
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(dir / kRunFileName, ec))) return r;
  std::string why;
  auto bytes = read_trace_bytes(dir / kRunFileName, &why);
  if (!bytes) {
    problems.push_back(error_message(kRunFileName, " is left out: ", why));
    return r;
  }
  std::istringstream in(std::move(*bytes));
  r.present = true;
  std::string line;
  while (std::getline(in, line)) {
    auto f = split_fields(line);
    if (f.size() >= 2 && f[0] == "run") r.run = unescape_field(f[1]);
    if (f.size() >= 2 && f[0] == "localities") {
      try {
        r.localities = static_cast<int>(number_in(f[1], 0, kMaxLocalities, "locality count"));
      } catch (const BadRecord&) {
      }
    }
  }
  return r;
}

// Reads one locality's file; problems go into `problems`. Returns false when
// the file is not a trace at all.
bool read_locality(const fs::path& path, LocalityTrace& out, std::vector<std::string>& problems) {
  std::string name = path.filename().string();
  out.file = name;
  std::string why;
  auto bytes = read_trace_bytes(path, &why);
  if (!bytes) {
    problems.push_back(error_message(name, " cannot be read (", why, "); it is left out"));
    return false;
  }
  std::istringstream in(std::move(*bytes));
  std::string line;
  if (!std::getline(in, line) || line.rfind(kFileMagic, 0) != 0) {
    problems.push_back(error_message(name, " is not a tessera trace file (it does not start with '", kFileMagic,
                                     "'); it is left out"));
    return false;
  }
  auto head = split_fields(line);
  if (head.size() < 2 || head[1] != std::to_string(kFileVersion)) {
    problems.push_back(error_message(name, " has trace format version ", head.size() > 1 ? head[1] : "?",
                                     ", this tessera reads version ", kFileVersion, "; it is left out"));
    return false;
  }
  std::unordered_map<int64_t, int> thread_of;
  // An event's thread: one a thread record named before it.
  auto thread_at = [&](std::string_view field) {
    auto th = thread_of.find(number(field));
    if (th == thread_of.end()) throw BadRecord{error_message("thread ", field, " has no thread record")};
    return th->second;
  };
  size_t line_no = 1, events = 0;
  try {
    while (std::getline(in, line)) {
      ++line_no;
      if (line.empty()) continue;
      auto f = split_fields(line);
      std::string_view kind = f[0];
      if (kind == "n" || kind == "t") {
        need(f, kind == "n" ? 6 : 7);
        TraceEvent e;
        e.kind = kind[0];
        e.thread = thread_at(f[1]);
        times(f[2], f[3], e);
        // -1/-1: a node of no program run during the recording.
        e.program = index_into(f[4], out.programs.size(), true, "program");
        e.node = e.program < 0 ? static_cast<int>(number_in(f[5], -1, -1, "the node of no program"))
                               : index_into(f[5], out.programs[e.program].nodes.size(), false, "node");
        if (kind == "t") e.tile = number_in(f[6], 0, 1, "tile flag") != 0;
        // The thread's CPU clock: files of earlier builds end before it.
        if (kind == "n" && f.size() > 7) {
          e.cpu0 = number_in(f[6], -1, kMaxTime, "CPU clock");
          e.cpu1 = e.cpu0 < 0 ? -1 : number_in(f[7], e.cpu0, kMaxTime, "CPU clock at the end");
        }
        out.events.push_back(e);
        ++events;
      } else if (kind == "l" || kind == "x") {
        need(f, kind == "l" ? 10 : 12);
        TraceEvent e;
        e.kind = kind[0];
        e.thread = thread_at(f[1]);
        times(f[2], f[3], e);
        if (kind == "l") {
          e.program = index_into(f[4], out.programs.size(), true, "program");
          e.node = e.program < 0 ? static_cast<int>(number_in(f[5], -1, -1, "the node of no program"))
                                 : index_into(f[5], out.programs[e.program].nodes.size(), false, "node");
          e.name = index_into(f[6], out.strings.size(), false, "string");
          e.flags = static_cast<int>(number_in(f[7], 0, 15, "loop flags"));
          e.amount = static_cast<uint64_t>(number_in(f[8], 0, INT64_MAX, "turn count"));
          e.calls = number_in(f[9], 0, INT32_MAX, "native call count");
        } else {
          e.name = index_into(f[4], out.strings.size(), false, "string");
          e.signature = index_into(f[5], out.strings.size(), false, "string");
          e.mode = static_cast<int>(number_in(f[6], 0, 5, "compile mode"));
          e.source = static_cast<int>(number_in(f[7], 0, 2, "compile source"));
          e.amount = static_cast<uint64_t>(number_in(f[8], 0, INT64_MAX, "IR size"));
          e.generate_ns = number_in(f[9], -1, kMaxTime, "generation time");
          e.optimise_ns = number_in(f[10], -1, kMaxTime, "optimisation time");
          e.codegen_ns = number_in(f[11], -1, kMaxTime, "codegen time");
        }
        out.events.push_back(e);
        ++events;
      } else if (kind == "c") {
        need(f, 7);
        TraceEvent e;
        e.kind = 'c';
        times(f[1], f[2], e);
        e.amount = static_cast<uint64_t>(number_in(f[3], 0, INT64_MAX, "byte count"));
        e.peer = static_cast<int>(number_in(f[4], -1, kMaxLocalities - 1, "peer"));
        e.op = index_into(f[5], out.strings.size(), false, "string");
        e.site = index_into(f[6], out.strings.size(), false, "string");
        out.events.push_back(e);
        ++events;
      } else if (kind == "s") {
        need(f, 4);
        TraceEvent e;
        e.kind = 's';
        times(f[1], f[2], e);
        e.amount = static_cast<uint64_t>(number_in(f[3], 0, INT64_MAX, "iteration"));
        out.events.push_back(e);
        ++events;
      } else if (kind == "node") {
        need(f, 11);
        TraceProgram& prog = out.programs[index_into(f[1], out.programs.size(), false, "program")];
        TraceNode n;
        if (number(f[2]) != static_cast<int64_t>(prog.nodes.size())) {
          throw BadRecord{error_message("nodes out of order: node ", f[2], " where node ", prog.nodes.size(),
                                        " comes next")};
        }
        n.id = static_cast<int>(prog.nodes.size());
        // Depth first: the parent is a node before this one (-1 for the root).
        n.parent = index_into(f[3], prog.nodes.size(), true, "parent node");
        n.primitive = number_in(f[4], 0, 1, "primitive flag") != 0;
        n.family = unescape_field(f[5]);
        n.label = unescape_field(f[6]);
        n.position = unescape_field(f[7]);
        n.evaluations = static_cast<uint64_t>(number_in(f[8], 0, INT64_MAX, "evaluation count"));
        n.exclusive_ns = static_cast<uint64_t>(number_in(f[9], 0, kMaxTime, "time"));
        n.spawned = static_cast<uint64_t>(number_in(f[10], 0, INT64_MAX, "spawn count"));
        if (n.parent >= 0) prog.nodes[n.parent].children.push_back(n.id);
        prog.nodes.push_back(std::move(n));
      } else if (kind == "thread") {
        need(f, 3);
        int index = static_cast<int>(number_in(f[1], 0, kMaxThreads - 1, "thread"));
        thread_of[index] = static_cast<int>(out.threads.size());
        out.threads.push_back({index, unescape_field(f[2])});
      } else if (kind == "string") {
        need(f, 3);
        if (number(f[1]) != static_cast<int64_t>(out.strings.size())) throw BadRecord{"strings out of order"};
        out.strings.push_back(unescape_field(f[2]));
      } else if (kind == "program") {
        need(f, 3);
        if (number(f[1]) != static_cast<int64_t>(out.programs.size())) throw BadRecord{"programs out of order"};
        out.programs.push_back({unescape_field(f[2]), "", {}});
      } else if (kind == "text") {
        need(f, 3);
        int64_t p = number(f[1]);
        if (p < 0 || p >= static_cast<int64_t>(out.programs.size())) throw BadRecord{"text of an unknown program"};
        out.programs[p].text = unescape_field(f[2]);
      } else if (kind == "source") {
        need(f, 3);
        out.sources[unescape_field(f[1])] = unescape_field(f[2]);
      } else if (kind == "run") {
        need(f, 2);
        out.run = unescape_field(f[1]);
      } else if (kind == "locality") {
        need(f, 3);
        out.num_localities = static_cast<int>(number_in(f[2], 1, kMaxLocalities, "locality count"));
        out.locality = static_cast<int>(number_in(f[1], 0, out.num_localities - 1, "locality"));
      } else if (kind == "host") {
        need(f, 3);
        out.host = unescape_field(f[1]);
        out.pid = number(f[2]);
      } else if (kind == "clock") {
        need(f, 2);
        out.realtime_ns = number_in(f[1], 0, kMaxRealtime, "wall clock");
      } else if (kind == "span") {
        need(f, 2);
        out.end = number_in(f[1], 0, kMaxTime, "span");
      } else if (kind == "dropped") {
        need(f, 2);
        out.dropped = static_cast<uint64_t>(number_in(f[1], 0, INT64_MAX, "dropped count"));
      } else if (kind == "end") {
        out.complete = true;
        break;
      }
      // Other records (from a newer writer) are skipped.
    }
  } catch (const BadRecord& bad) {
    problems.push_back(error_message(name, " is damaged at line ", line_no, " (", bad.why,
                                     "): what follows is left out"));
    return true;
  }
  if (!out.complete) {
    problems.push_back(error_message(name, " is truncated: it ends after ", events,
                                     " events without its end record (the run was interrupted while it was written)"));
  }
  return true;
}

void compute_inclusive(TraceProgram& p) {
  // Ids are in depth-first order: children come after their parent.
  for (auto& n : p.nodes) n.inclusive_ns = n.exclusive_ns;
  for (size_t i = p.nodes.size(); i-- > 0;) {
    const TraceNode& n = p.nodes[i];
    if (n.parent >= 0) p.nodes[n.parent].inclusive_ns += n.inclusive_ns;
  }
}

}  // namespace

std::string event_label(const LocalityTrace& loc, const TraceEvent& e, const std::string& fallback) {
  if (e.program < 0 || e.node < 0) return fallback;
  return loc.programs[e.program].nodes[e.node].label;
}

TraceSet load_trace(const std::string& dir) {
  fs::path root(dir);
  std::error_code ec;
  if (!fs::exists(root, ec)) {
    throw std::invalid_argument(error_message("[report] the trace directory '", dir, "' does not exist"));
  }
  if (!fs::is_directory(root, ec)) {
    throw std::invalid_argument(error_message("[report] '", dir,
                                              "' is not a trace directory: it is a file (give the directory "
                                              "that `--trace DIR` wrote)"));
  }
  static const std::regex file_name(R"(locality-(\d+)\.trace)");
  std::map<int, fs::path> files;
  std::vector<std::string> problems;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    std::smatch m;
    std::string name = entry.path().filename().string();
    // symlink_status: a link planted in the folder is not a trace file
    // (read through, it could name any file of the user's, or a device).
    if (!std::regex_match(name, m, file_name)) continue;
    if (!fs::is_regular_file(entry.symlink_status(ec))) {
      problems.push_back(error_message(name, " is left out: it is not a regular file (a symbolic "
                                       "link, pipe or device)"));
      continue;
    }
    std::string digits = m[1];
    int64_t r = -1;
    auto res = std::from_chars(digits.data(), digits.data() + digits.size(), r);
    if (res.ec != std::errc() || r >= kMaxLocalities) {
      problems.push_back(error_message(name, " is left out: locality ", digits, " is past the largest one tessera runs (",
                                       kMaxLocalities - 1, ")"));
      continue;
    }
    files[static_cast<int>(r)] = entry.path();
  }
  RunFile run_file = read_run_file(root, problems);
  if (files.empty()) {
    if (run_file.present) {
      throw std::invalid_argument(error_message(
          "[report] no locality of the run wrote its trace into '", dir, "' (expected ", run_file.localities,
          " files, locality-0.trace to locality-", std::max(0, run_file.localities - 1),
          ".trace): the run stopped before any locality finished"));
    }
    throw std::invalid_argument(error_message(
        "[report] '", dir, "' is not a trace directory: it has no locality-N.trace files (record a trace with "
        "`tessera run --trace DIR`, `tessera eval --trace DIR` or `with tessera.trace(DIR):`)"));
  }

  TraceSet set;
  set.dir = dir;
  std::vector<LocalityTrace> read;
  std::vector<int> read_as;  // the locality each file's name gives
  for (auto& [r, path] : files) {
    LocalityTrace loc;
    if (!read_locality(path, loc, problems)) continue;
    read.push_back(std::move(loc));
    read_as.push_back(r);
  }
  if (read.empty()) {
    throw std::invalid_argument(error_message("[report] '", dir, "' holds no readable trace: ", problems.front()));
  }
  // The run: the one named by tessera run's file if any locality has it,
  // else the newest.
  std::string run;
  for (const auto& l : read) {
    if (run_file.present && l.run == run_file.run) run = l.run;
  }
  if (run.empty()) {
    run = std::max_element(read.begin(), read.end(), [](const auto& a, const auto& b) {
            return a.realtime_ns < b.realtime_ns;
          })->run;
  }
  for (size_t i = 0; i < read.size(); ++i) {
    LocalityTrace& l = read[i];
    if (l.run != run) {
      problems.push_back(error_message(l.file, " is from another run (", l.run, ") and is left out"));
      continue;
    }
    int r = read_as[i];
    if (l.locality != r) {
      problems.push_back(error_message(l.file, " says it is locality ", l.locality, "; it is read as locality ", r));
      l.locality = r;
    }
    set.expected = std::max({set.expected, l.num_localities, l.locality + 1});
    set.localities.push_back(std::move(l));
  }
  if (run_file.present && run_file.run == run) set.expected = std::max(set.expected, run_file.localities);
  // The localities without a file, one sentence per run of them (a count
  // read from a file is not trusted with an allocation of its size).
  std::vector<std::string> missing;
  int next = 0;  // the localities are in increasing order
  auto note_missing = [&](int from, int to) {  // [from, to)
    if (to - from <= 4) {
      for (int r = from; r < to; ++r) {
        missing.push_back(error_message("locality ", r, " of ", set.expected, " wrote no trace (",
                                        locality_file_name(r),
                                        " is missing): it failed or was stopped before the end of its run"));
      }
    } else {
      missing.push_back(error_message("localities ", from, " to ", to - 1, " of ", set.expected,
                                      " wrote no trace (", locality_file_name(from), " to ",
                                      locality_file_name(to - 1),
                                      " are missing): they failed or were stopped before the end of their run"));
    }
  };
  for (const auto& l : set.localities) {
    note_missing(next, l.locality);
    next = std::max(next, l.locality + 1);
  }
  note_missing(next, set.expected);
  problems.insert(problems.begin(), missing.begin(), missing.end());
  set.problems = std::move(problems);

  int64_t origin = set.localities.front().realtime_ns;
  for (const auto& l : set.localities) origin = std::min(origin, l.realtime_ns);
  for (auto& l : set.localities) {
    int64_t shift = l.realtime_ns - origin;
    l.begin = shift;
    l.end += shift;
    for (auto& e : l.events) {
      e.t0 += shift;
      e.t1 += shift;
      l.end = std::max(l.end, e.t1);
    }
    for (auto& p : l.programs) compute_inclusive(p);
    if (l.dropped) {
      set.problems.push_back(error_message("locality ", l.locality, " dropped ", l.dropped,
                                           " events (its buffers were full): its timeline is incomplete"));
    }
    set.span_ns = std::max(set.span_ns, l.end);
  }
  return set;
}

}  // namespace tessera::trace
