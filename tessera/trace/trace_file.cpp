#include "tessera/trace/trace_file.hpp"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <stdexcept>
#include <unordered_map>

#include "tessera/core/error.hpp"
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

void need(const std::vector<std::string_view>& f, size_t n) {
  if (f.size() < n) {
    throw BadRecord{error_message("a '", f[0], "' record needs ", n - 1, " fields, this one has ", f.size() - 1)};
  }
}

struct RunFile {
  bool present = false;
  std::string run;
  int localities = 0;
};

RunFile read_run_file(const fs::path& dir) {
  RunFile r;
  std::ifstream in(dir / kRunFileName);
  if (!in) return r;
  r.present = true;
  std::string line;
  while (std::getline(in, line)) {
    auto f = split_fields(line);
    if (f.size() >= 2 && f[0] == "run") r.run = unescape_field(f[1]);
    if (f.size() >= 2 && f[0] == "localities") {
      try {
        r.localities = static_cast<int>(number(f[1]));
      } catch (const BadRecord&) {
      }
    }
  }
  return r;
}

// Reads one locality's file; problems go into `problems`. Returns false when
// the file is not a trace at all.
bool read_locality(const fs::path& path, LocalityTrace& out, std::vector<std::string>& problems) {
  std::ifstream in(path, std::ios::binary);
  std::string name = path.filename().string();
  out.file = name;
  if (!in) {
    problems.push_back(error_message(name, " cannot be read"));
    return false;
  }
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
        auto th = thread_of.find(number(f[1]));
        if (th == thread_of.end()) throw BadRecord{error_message("thread ", f[1], " has no thread record")};
        e.thread = th->second;
        e.t0 = number(f[2]);
        e.t1 = number(f[3]);
        e.program = static_cast<int>(number(f[4]));
        e.node = static_cast<int>(number(f[5]));
        if (kind == "t") e.tile = number(f[6]) != 0;
        if (e.program >= static_cast<int>(out.programs.size()) ||
            (e.program >= 0 && e.node >= static_cast<int>(out.programs[e.program].nodes.size()))) {
          e.program = e.node = -1;
        }
        out.events.push_back(e);
        ++events;
      } else if (kind == "c") {
        need(f, 7);
        TraceEvent e;
        e.kind = 'c';
        e.t0 = number(f[1]);
        e.t1 = number(f[2]);
        e.amount = static_cast<uint64_t>(number(f[3]));
        e.peer = static_cast<int>(number(f[4]));
        e.op = static_cast<int>(number(f[5]));
        e.site = static_cast<int>(number(f[6]));
        if (e.op >= static_cast<int>(out.strings.size()) || e.site >= static_cast<int>(out.strings.size())) {
          throw BadRecord{"a communication names a string not defined before it"};
        }
        out.events.push_back(e);
        ++events;
      } else if (kind == "s") {
        need(f, 4);
        TraceEvent e;
        e.kind = 's';
        e.t0 = number(f[1]);
        e.t1 = number(f[2]);
        e.amount = static_cast<uint64_t>(number(f[3]));
        out.events.push_back(e);
        ++events;
      } else if (kind == "node") {
        need(f, 11);
        int64_t p = number(f[1]);
        if (p < 0 || p >= static_cast<int64_t>(out.programs.size())) throw BadRecord{"a node of an unknown program"};
        TraceProgram& prog = out.programs[p];
        TraceNode n;
        n.id = static_cast<int>(number(f[2]));
        n.parent = static_cast<int>(number(f[3]));
        if (n.id != static_cast<int>(prog.nodes.size()) || n.parent >= n.id) {
          throw BadRecord{"nodes out of order"};
        }
        n.primitive = number(f[4]) != 0;
        n.family = unescape_field(f[5]);
        n.label = unescape_field(f[6]);
        n.position = unescape_field(f[7]);
        n.evaluations = static_cast<uint64_t>(number(f[8]));
        n.exclusive_ns = static_cast<uint64_t>(number(f[9]));
        n.spawned = static_cast<uint64_t>(number(f[10]));
        if (n.parent >= 0) prog.nodes[n.parent].children.push_back(n.id);
        prog.nodes.push_back(std::move(n));
      } else if (kind == "thread") {
        need(f, 3);
        thread_of[number(f[1])] = static_cast<int>(out.threads.size());
        out.threads.push_back({static_cast<int>(number(f[1])), unescape_field(f[2])});
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
        out.locality = static_cast<int>(number(f[1]));
        out.num_localities = static_cast<int>(number(f[2]));
      } else if (kind == "host") {
        need(f, 3);
        out.host = unescape_field(f[1]);
        out.pid = number(f[2]);
      } else if (kind == "clock") {
        need(f, 2);
        out.realtime_ns = number(f[1]);
      } else if (kind == "span") {
        need(f, 2);
        out.end = number(f[1]);
      } else if (kind == "dropped") {
        need(f, 2);
        out.dropped = static_cast<uint64_t>(number(f[1]));
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
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    std::smatch m;
    std::string name = entry.path().filename().string();
    if (entry.is_regular_file() && std::regex_match(name, m, file_name)) files[std::stoi(m[1])] = entry.path();
  }
  RunFile run_file = read_run_file(root);
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
  std::vector<std::string> problems;
  for (auto& [r, path] : files) {
    LocalityTrace loc;
    if (!read_locality(path, loc, problems)) continue;
    read.push_back(std::move(loc));
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
  for (auto& l : read) {
    if (l.run != run) {
      problems.push_back(error_message(l.file, " is from another run (", l.run, ") and is left out"));
      continue;
    }
    int r = std::stoi(l.file.substr(9));  // locality-R.trace
    if (l.locality != r) {
      problems.push_back(error_message(l.file, " says it is locality ", l.locality, "; it is read as locality ", r));
      l.locality = r;
    }
    set.expected = std::max({set.expected, l.num_localities, l.locality + 1});
    set.localities.push_back(std::move(l));
  }
  if (run_file.present && run_file.run == run) set.expected = std::max(set.expected, run_file.localities);
  std::vector<bool> present(set.expected, false);
  for (const auto& l : set.localities) present[l.locality] = true;
  std::vector<std::string> missing;
  for (int r = 0; r < set.expected; ++r) {
    if (!present[r]) {
      missing.push_back(error_message("locality ", r, " of ", set.expected, " wrote no trace (", locality_file_name(r),
                                      " is missing): it failed or was stopped before the end of its run"));
    }
  }
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
