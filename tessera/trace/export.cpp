#include "tessera/trace/export.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>
#include <unordered_map>

#include "tessera/core/error.hpp"
#include "tessera/core/text.hpp"
#include "tessera/runtime/trace.hpp"

namespace tessera::trace {

namespace {

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else if (c == '<') {
          // Keeps "</script>" in a string from ending the report's script.
          out += "\\u003c";
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

// Nanoseconds as microseconds with three decimals (exact: no rounding moves
// an event out of the one that contains it).
std::string micros(int64_t ns) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%s%lld.%03lld", ns < 0 ? "-" : "", static_cast<long long>(std::llabs(ns) / 1000),
                static_cast<long long>(std::llabs(ns) % 1000));
  return buf;
}

using Interval = std::pair<int64_t, int64_t>;

// Sorted, disjoint union of intervals.
std::vector<Interval> merge(std::vector<Interval> v) {
  std::sort(v.begin(), v.end());
  std::vector<Interval> out;
  for (const auto& iv : v) {
    if (!out.empty() && iv.first <= out.back().second) {
      out.back().second = std::max(out.back().second, iv.second);
    } else {
      out.push_back(iv);
    }
  }
  return out;
}

int64_t length(const std::vector<Interval>& v) {
  int64_t n = 0;
  for (const auto& iv : v) n += iv.second - iv.first;
  return n;
}

// Length of the intersection of two sorted disjoint lists.
int64_t overlap(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  int64_t n = 0;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    int64_t lo = std::max(a[i].first, b[j].first), hi = std::min(a[i].second, b[j].second);
    if (hi > lo) n += hi - lo;
    if (a[i].second < b[j].second) {
      ++i;
    } else {
      ++j;
    }
  }
  return n;
}

// A locality's events sorted for drawing and accounting.
struct Tracks {
  std::vector<std::vector<const TraceEvent*>> threads;  // n and t events of each thread, by (t0, longest first)
  std::vector<std::vector<const TraceEvent*>> top;      // those not inside another (what keeps a thread busy)
  std::vector<const TraceEvent*> comm, steps, nodes;    // nodes: every n event, by t0
};

bool earlier(const TraceEvent* a, const TraceEvent* b) {
  if (a->t0 != b->t0) return a->t0 < b->t0;
  return a->t1 > b->t1;
}

Tracks tracks_of(const LocalityTrace& l) {
  Tracks t;
  t.threads.resize(l.threads.size());
  for (const TraceEvent& e : l.events) {
    if (e.kind == 'n' || e.kind == 't' || e.kind == 'l' || e.kind == 'x') {
      t.threads[e.thread].push_back(&e);
      if (e.kind == 'n') t.nodes.push_back(&e);
    } else if (e.kind == 'c') {
      t.comm.push_back(&e);
    } else if (e.kind == 's') {
      t.steps.push_back(&e);
    }
  }
  t.top.resize(t.threads.size());
  for (size_t k = 0; k < t.threads.size(); ++k) {
    auto& v = t.threads[k];
    std::sort(v.begin(), v.end(), earlier);
    int64_t end = INT64_MIN;
    for (const TraceEvent* e : v) {
      if (e->t0 >= end) {
        t.top[k].push_back(e);
        end = e->t1;
      } else {
        end = std::max(end, e->t1);
      }
    }
  }
  std::sort(t.comm.begin(), t.comm.end(), earlier);
  std::sort(t.steps.begin(), t.steps.end(), earlier);
  std::sort(t.nodes.begin(), t.nodes.end(), earlier);
  return t;
}

std::vector<Interval> intervals(const std::vector<const TraceEvent*>& events) {
  std::vector<Interval> v;
  v.reserve(events.size());
  for (const TraceEvent* e : events) v.push_back({e->t0, e->t1});
  return merge(std::move(v));
}

// Lanes for events that may overlap (communication): each goes on the first
// lane free at its start.
std::vector<int> lanes(const std::vector<const TraceEvent*>& events) {
  std::vector<int> lane(events.size());
  std::vector<int64_t> free_at;
  for (size_t i = 0; i < events.size(); ++i) {
    size_t k = 0;
    while (k < free_at.size() && free_at[k] > events[i]->t0) ++k;
    if (k == free_at.size()) free_at.push_back(0);
    free_at[k] = events[i]->t1;
    lane[i] = static_cast<int>(k);
  }
  return lane;
}

std::string thread_title(const LocalityTrace& l, size_t k, int worker_number) {
  if (l.threads[k].name == "worker") return error_message("worker ", worker_number);
  return l.threads[k].name == "caller" ? "caller (the thread that started the run)" : l.threads[k].name;
}

std::vector<std::string> thread_titles(const LocalityTrace& l) {
  std::vector<std::string> out;
  int workers = 0;
  for (size_t k = 0; k < l.threads.size(); ++k) {
    if (l.threads[k].name == "worker") ++workers;
    out.push_back(thread_title(l, k, workers));
  }
  return out;
}

// The string at index `i` of a locality's table (-1: none).
const std::string& string_at(const LocalityTrace& l, int i) {
  static const std::string none;
  return i < 0 ? none : l.strings[i];
}

const char* loop_kind(const TraceEvent& e) {
  return (e.flags & kLoopParallel) ? "native, parallel" : (e.flags & kLoopNative) ? "native" : "interpreter";
}

const char* compile_mode(int mode) {
  static const char* names[] = {"whole",   "partial",     "whole after partial",
                                "refused", "translation", "optimised tier (background)"};
  return names[mode];
}

const char* compile_source(int source) {
  static const char* names[] = {"miss: compiled", "hit: disk cache", "hit: loaded in this process"};
  return names[source];
}

std::string task_name(const LocalityTrace& l, const TraceEvent& e) {
  if (e.kind == 'l') return "loop " + string_at(l, e.name);
  if (e.kind == 'x') {
    return (e.mode == 4   ? "jit translation "
            : e.mode == 3 ? "native compile refused "
            : e.mode == 5 ? "native optimised compile "
            : e.source == 0 ? "native compile "
                            : "native code load ") +
           string_at(l, e.name);
  }
  std::string node = event_label(l, e, "");
  if (e.kind == 'n') return node.empty() ? "primitive" : node;
  if (e.tile) return node.empty() ? "tile" : "tile of " + node;
  return node.empty() ? "task" : "task: " + node;
}

std::string comm_name(const LocalityTrace& l, const TraceEvent& e) {
  std::string op = l.strings[e.op];
  if (e.peer >= 0 && op.find('(') == std::string::npos) op += error_message(" (peer ", e.peer, ")");
  return op;
}

// Programs of every locality, merged by name and text (SPMD: the same
// program on every locality), with counters summed.
struct MergedProgram {
  std::string name, text;
  std::vector<TraceNode> nodes;  // counters summed over localities
  std::vector<std::pair<int, int>> parts;  // (index into set.localities, program index there)
};

std::vector<MergedProgram> merged_programs(const TraceSet& set) {
  std::vector<MergedProgram> out;
  std::map<std::pair<std::string, std::string>, size_t> index;
  for (size_t li = 0; li < set.localities.size(); ++li) {
    const LocalityTrace& l = set.localities[li];
    for (size_t p = 0; p < l.programs.size(); ++p) {
      const TraceProgram& prog = l.programs[p];
      auto [it, added] = index.emplace(std::make_pair(prog.name, prog.text), out.size());
      if (added || out[it->second].nodes.size() != prog.nodes.size()) {
        if (!added) {
          // Same name and text but another tree: cannot happen for one
          // compiler; kept apart rather than summed wrongly.
          it->second = out.size();
        }
        out.push_back({prog.name, prog.text, prog.nodes, {}});
        for (auto& n : out.back().nodes) n.evaluations = n.exclusive_ns = n.inclusive_ns = n.spawned = 0;
      }
      MergedProgram& m = out[it->second];
      m.parts.push_back({static_cast<int>(li), static_cast<int>(p)});
      for (size_t i = 0; i < prog.nodes.size(); ++i) {
        m.nodes[i].evaluations += prog.nodes[i].evaluations;
        m.nodes[i].exclusive_ns += prog.nodes[i].exclusive_ns;
        m.nodes[i].inclusive_ns += prog.nodes[i].inclusive_ns;
        m.nodes[i].spawned += prog.nodes[i].spawned;
      }
    }
  }
  return out;
}

// The merged program index of (locality index, program index).
std::map<std::pair<int, int>, int> merged_index(const std::vector<MergedProgram>& merged) {
  std::map<std::pair<int, int>, int> out;
  for (size_t m = 0; m < merged.size(); ++m) {
    for (const auto& part : merged[m].parts) out[part] = static_cast<int>(m);
  }
  return out;
}

std::string execution(uint64_t evaluations, uint64_t spawned) {
  return spawned == 0 ? "inline" : spawned >= evaluations ? "async" : "mixed";
}

}  // namespace

std::string chrome_trace_json(const TraceSet& set) {
  std::ostringstream os;
  os << "{\"traceEvents\":[\n";
  bool first = true;
  auto emit = [&](const std::string& event) {
    if (!first) os << ",\n";
    first = false;
    os << event;
  };
  auto meta = [&](int pid, int64_t tid, const char* what, const std::string& arg_name, const std::string& value) {
    emit(error_message("{\"ph\":\"M\",\"ts\":0,\"pid\":", pid, ",\"tid\":", tid, ",\"name\":\"", what,
                       "\",\"args\":{\"", arg_name, "\":", value, "}}"));
  };
  auto complete = [&](int pid, int64_t tid, const std::string& name, const char* cat, int64_t t0, int64_t t1,
                      const std::string& args) {
    emit(error_message("{\"ph\":\"X\",\"pid\":", pid, ",\"tid\":", tid, ",\"ts\":", micros(t0),
                       ",\"dur\":", micros(std::max<int64_t>(0, t1 - t0)), ",\"name\":", json_string(name),
                       ",\"cat\":\"", cat, "\"", args.empty() ? "" : ",\"args\":{" + args + "}", "}"));
  };
  constexpr int64_t kCommTid = 1000000, kStepTid = 2000000;
  std::vector<StepPhases> phases = step_phases(set);
  for (const LocalityTrace& l : set.localities) {
    int pid = l.locality;
    meta(pid, 0, "process_name", "name",
         json_string(error_message("locality ", l.locality, " (", l.host, ", pid ", l.pid, ")")));
    meta(pid, 0, "process_sort_index", "sort_index", std::to_string(l.locality));
    Tracks t = tracks_of(l);
    std::vector<std::string> titles = thread_titles(l);
    for (size_t k = 0; k < t.threads.size(); ++k) {
      if (t.threads[k].empty()) continue;
      int64_t tid = l.threads[k].index + 1;
      meta(pid, tid, "thread_name", "name", json_string(titles[k]));
      meta(pid, tid, "thread_sort_index", "sort_index", std::to_string(tid));
      for (const TraceEvent* e : t.threads[k]) {
        std::string args;
        if (e->program >= 0) {
          const TraceProgram& p = l.programs[e->program];
          args = "\"position\":" + json_string(p.nodes[e->node].position) + ",\"program\":" + json_string(p.name);
        }
        if (e->kind == 'l') {
          args += (args.empty() ? "" : ",") +
                  error_message("\"loop\":", json_string(string_at(l, e->name)), ",\"kind\":\"", loop_kind(*e),
                                "\",\"interpreter_turns\":", e->amount, ",\"native_calls\":", e->calls,
                                ",\"rolled_back\":", (e->flags & kLoopRolledBack) ? "true" : "false",
                                ",\"finished\":", (e->flags & kLoopGeneral) ? "false" : "true");
        }
        if (e->kind == 'x' && e->mode == 4) {
          args = "\"function\":" + json_string(string_at(l, e->name));
        } else if (e->kind == 'x') {
          auto ms = [](int64_t ns) { return ns < 0 ? std::string("null") : micros(ns / 1000); };
          args = error_message("\"loop\":", json_string(string_at(l, e->name)), ",\"signature\":",
                               json_string(string_at(l, e->signature)), ",\"mode\":\"", compile_mode(e->mode),
                               "\",\"cache\":\"", compile_source(e->source), "\",\"ir_bytes\":", e->amount,
                               ",\"generate_ms\":", ms(e->generate_ns), ",\"optimise_ms\":", ms(e->optimise_ns),
                               ",\"codegen_ms\":", ms(e->codegen_ns));
        }
        if (e->kind == 'n' && e->cpu0 >= 0) {
          // The work's CPU time, and the thread's CPU clock at its start.
          args += (args.empty() ? "" : ",") + std::string("\"cpu_us\":") + micros(e->cpu1 - e->cpu0) +
                  ",\"cpu_at_us\":" + micros(e->cpu0);
        }
        const char* cat = e->kind == 'n' ? "primitive" : e->kind == 'l' ? "loop" : e->kind == 'x' ? "compile"
                          : e->tile ? "tile" : "task";
        complete(pid, tid, task_name(l, *e), cat, e->t0, e->t1, args);
      }
    }
    std::vector<int> lane = lanes(t.comm);
    int used = 0;
    for (int k : lane) used = std::max(used, k + 1);
    for (int k = 0; k < used; ++k) {
      meta(pid, kCommTid + k, "thread_name", "name",
           json_string(k == 0 ? std::string("communication") : error_message("communication (", k + 1, ")")));
      meta(pid, kCommTid + k, "thread_sort_index", "sort_index", std::to_string(kCommTid + k));
    }
    // Emitted lane by lane, so each track's events are in time order.
    for (int k = 0; k < used; ++k) {
      for (size_t i = 0; i < t.comm.size(); ++i) {
        if (lane[i] != k) continue;
        const TraceEvent* e = t.comm[i];
        complete(pid, kCommTid + k, comm_name(l, *e), "communication", e->t0, e->t1,
                 error_message("\"bytes\":", e->amount, ",\"site\":", json_string(l.strings[e->site]),
                               ",\"peer\":", e->peer));
      }
    }
    if (!t.steps.empty()) {
      meta(pid, kStepTid, "thread_name", "name", json_string("training steps"));
      meta(pid, kStepTid, "thread_sort_index", "sort_index", "-1");
      for (const StepPhases& s : phases) {
        if (s.locality != l.locality) continue;
        complete(pid, kStepTid, error_message("step ", s.iteration), "step", s.t0, s.t1, "");
        if (!s.split) continue;
        int64_t at = s.t0;
        const std::pair<const char*, int64_t> parts[] = {{"forward", s.forward},
                                                         {"backward", s.backward},
                                                         {"communication wait", s.comm_wait},
                                                         {"optimizer", s.optimizer},
                                                         {"losses and metrics", s.other}};
        for (const auto& [name, ns] : parts) {
          if (ns > 0) complete(pid, kStepTid, name, "phase", at, at + ns, "");
          at += ns;
        }
      }
    }
  }
  os << "\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":{\"trace_directory\":" << json_string(set.dir)
     << ",\"localities_expected\":" << set.expected << ",\"localities_found\":" << set.localities.size()
     << ",\"problems\":[";
  for (size_t i = 0; i < set.problems.size(); ++i) os << (i ? "," : "") << json_string(set.problems[i]);
  os << "]}}\n";
  return os.str();
}

std::string tree_dot(const TraceSet& set) {
  std::vector<MergedProgram> merged = merged_programs(set);
  std::ostringstream os;
  os << "digraph tessera_trace {\n  node [shape=box, fontname=\"monospace\"];\n";
  for (const auto& p : set.problems) os << "  // problem: " << dot_escape(p) << "\n";
  for (size_t m = 0; m < merged.size(); ++m) {
    const MergedProgram& p = merged[m];
    os << "  subgraph cluster_p" << m << " {\n    label=\"" << dot_escape(p.name) << " (" << p.parts.size()
       << (p.parts.size() == 1 ? " locality" : " localities") << ")\";\n";
    for (const TraceNode& n : p.nodes) {
      os << "    p" << m << "n" << n.id << " [label=\"" << dot_escape(n.label) << "\\n" << dot_escape(n.position);
      if (n.primitive) {
        os << "\\nevals=" << n.evaluations << " excl=" << micros(static_cast<int64_t>(n.exclusive_ns)) << "us";
      }
      if (n.inclusive_ns > 0) os << "\\nincl=" << micros(static_cast<int64_t>(n.inclusive_ns)) << "us";
      os << "\", evaluations=" << n.evaluations << ", exclusive_ns=" << n.exclusive_ns
         << ", inclusive_ns=" << n.inclusive_ns << "];\n";
      if (n.parent >= 0) os << "    p" << m << "n" << n.parent << " -> p" << m << "n" << n.id << ";\n";
    }
    os << "  }\n";
  }
  os << "}\n";
  return os.str();
}

std::string counters_csv(const TraceSet& set) {
  std::vector<MergedProgram> merged = merged_programs(set);
  std::map<std::pair<int, int>, int> index = merged_index(merged);
  std::ostringstream os;
  os << "locality,program,node,name,family,position,evaluations,exclusive_ns,inclusive_ns,mean_ns,spawned,execution\n";
  for (size_t li = 0; li < set.localities.size(); ++li) {
    const LocalityTrace& l = set.localities[li];
    for (size_t p = 0; p < l.programs.size(); ++p) {
      int m = index.at({static_cast<int>(li), static_cast<int>(p)});
      for (const TraceNode& n : l.programs[p].nodes) {
        if (!n.primitive || n.evaluations == 0) continue;
        os << l.locality << "," << m << "," << n.id << "," << csv_field(n.label) << "," << csv_field(n.family) << ","
           << csv_field(n.position) << "," << n.evaluations << "," << n.exclusive_ns << "," << n.inclusive_ns << ","
           << n.exclusive_ns / n.evaluations << "," << n.spawned << "," << execution(n.evaluations, n.spawned)
           << "\n";
      }
    }
  }
  return os.str();
}

std::vector<LocalityStats> locality_stats(const TraceSet& set) {
  std::vector<LocalityStats> out;
  for (const LocalityTrace& l : set.localities) {
    Tracks t = tracks_of(l);
    LocalityStats s;
    s.locality = l.locality;
    s.wall_ns = std::max<int64_t>(0, l.end - l.begin);
    std::vector<Interval> comm = intervals(t.comm);
    s.comm_ns = length(comm);
    for (const TraceEvent* e : t.comm) s.comm_bytes += e->amount;
    s.comm_ops = t.comm.size();
    s.steps = t.steps.size();
    for (size_t k = 0; k < t.threads.size(); ++k) {
      if (t.threads[k].empty()) continue;
      ++s.threads;
      std::vector<Interval> busy = intervals(t.top[k]);
      int64_t b = length(busy);
      s.compute_ns += b;
      s.comm_wait_ns += s.comm_ns - overlap(busy, comm);
      for (const TraceEvent* e : t.threads[k]) {
        if (e->kind == 't') ++s.tasks;
        if (e->kind == 'n') ++s.node_events;
      }
    }
    s.idle_ns = std::max<int64_t>(0, s.threads * s.wall_ns - s.compute_ns - s.comm_wait_ns);
    out.push_back(s);
  }
  return out;
}

std::vector<StepPhases> step_phases(const TraceSet& set) {
  std::vector<StepPhases> out;
  for (const LocalityTrace& l : set.localities) {
    Tracks t = tracks_of(l);
    auto family_of = [&](const TraceEvent* e) -> const std::string& {
      static const std::string none;
      return e->program < 0 ? none : l.programs[e->program].nodes[e->node].family;
    };
    for (const TraceEvent* st : t.steps) {
      StepPhases s;
      s.locality = l.locality;
      s.iteration = st->amount;
      s.t0 = st->t0;
      s.t1 = st->t1;
      auto from = std::lower_bound(t.nodes.begin(), t.nodes.end(), st->t0,
                                   [](const TraceEvent* e, int64_t v) { return e->t0 < v; });
      int64_t seed = -1, opt_start = -1, opt_end = -1;
      for (auto it = from; it != t.nodes.end() && (*it)->t0 <= st->t1; ++it) {
        if (seed < 0 && event_label(l, **it, "") == "grad_seed") seed = (*it)->t0;
        if (seed >= 0 && family_of(*it) == "optim") {
          if (opt_start < 0) opt_start = (*it)->t0;
          opt_end = std::max(opt_end, std::min((*it)->t1, st->t1));
        }
      }
      if (seed < 0) {
        out.push_back(s);
        continue;
      }
      int64_t comm_first = -1, comm_last = -1;
      for (const TraceEvent* c : t.comm) {
        if (c->t0 < seed || c->t0 > st->t1) continue;
        if (opt_start >= 0 && c->t0 > opt_start) break;
        if (comm_first < 0) comm_first = c->t0;
        comm_last = std::max(comm_last, std::min(c->t1, st->t1));
      }
      // Between the gradient seed and the first update, communication
      // waited for is the time communication is in flight while no thread
      // computes (gradient buckets reduced while the backward pass runs are
      // hidden by it); the rest is the backward pass. Drawn in that order.
      // Without an optimizer update, the backward pass ends where
      // communication starts.
      int64_t backward_end = st->t1;
      if (opt_start >= 0) {
        std::vector<const TraceEvent*> in_comm, in_compute;
        for (const TraceEvent* c : t.comm) {
          if (c->t1 > seed && c->t0 < opt_start) in_comm.push_back(c);
        }
        for (const auto& track : t.top) {
          for (const TraceEvent* e : track) {
            if (e->t1 > seed && e->t0 < opt_start) in_compute.push_back(e);
          }
        }
        auto clip = [&](std::vector<Interval> v) {
          for (auto& iv : v) iv = {std::max(iv.first, seed), std::min(iv.second, opt_start)};
          return v;
        };
        std::vector<Interval> comm = clip(intervals(in_comm)), busy = clip(intervals(in_compute));
        backward_end = opt_start - (length(comm) - overlap(comm, busy));
      } else if (comm_first >= 0) {
        backward_end = std::min(backward_end, comm_first);
      }
      int64_t wait_end = opt_start >= 0 ? opt_start : std::max(backward_end, comm_last);
      s.split = true;
      s.forward = seed - st->t0;
      s.backward = backward_end - seed;
      s.comm_wait = wait_end - backward_end;
      s.optimizer = opt_start >= 0 ? opt_end - opt_start : 0;
      s.other = st->t1 - st->t0 - s.forward - s.backward - s.comm_wait - s.optimizer;
      out.push_back(s);
    }
  }
  return out;
}

NativeStats native_stats(const TraceSet& set) {
  NativeStats out;
  std::map<std::string, NativeLoopStats> by_name;
  for (const LocalityTrace& l : set.localities) {
    for (const TraceEvent& e : l.events) {
      if (e.kind != 'l' && e.kind != 'x') continue;
      const std::string& name = string_at(l, e.name);
      if (e.kind == 'x' && e.mode == 4) {  // a jit translation: a function, not a loop
        ++out.translated;
        out.translate_ns += e.t1 - e.t0;
        continue;
      }
      NativeLoopStats& s = by_name[name];
      s.name = name;
      const int64_t span = e.t1 - e.t0;
      if (e.kind == 'l') {
        ++s.runs;
        if (e.flags & kLoopNative) ++s.native_runs;
        if (e.flags & kLoopGeneral) ++s.general_runs;
        if (e.flags & kLoopRolledBack) ++s.rolled_back;
        s.turns += e.amount;
        s.run_ns += span;
        continue;
      }
      s.compiles.push_back({e.mode, e.source, span});
      if (e.mode == 5) {  // on the background thread: not a wait of the loop's first call
        ++s.optimised;
        s.optimised_ns += span;
        ++out.optimised;
        out.optimised_ns += span;
        continue;
      }
      s.compile_ns += span;
      if (e.mode == 3) {
        ++s.refused;
        ++out.refused;
        out.compile_ns += span;
      } else if (e.source == 0) {
        ++s.compiled;
        ++out.compiled;
        out.compile_ns += span;
        out.generate_ns += std::max<int64_t>(0, e.generate_ns);
        out.optimise_ns += std::max<int64_t>(0, e.optimise_ns);
        out.codegen_ns += std::max<int64_t>(0, e.codegen_ns);
      } else {
        ++(e.source == 1 ? s.disk_loads : s.process_loads);
        ++(e.source == 1 ? out.disk_loads : out.process_loads);
        out.load_ns += span;
      }
    }
  }
  for (auto& [name, s] : by_name) out.loops.push_back(std::move(s));
  std::stable_sort(out.loops.begin(), out.loops.end(), [](const auto& a, const auto& b) {
    return a.compile_ns != b.compile_ns ? a.compile_ns > b.compile_ns : a.run_ns > b.run_ns;
  });
  return out;
}

std::string native_report_text(const NativeStats& n) {
  auto ms = [](int64_t ns) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f ms", static_cast<double>(ns) / 1e6);
    return std::string(buf);
  };
  std::string out;
  if (n.translated) {
    out += error_message("  jit translation: ", n.translated, n.translated == 1 ? " program in " : " programs in ",
                         ms(n.translate_ns), "\n");
  }
  if (n.loops.empty()) return out;
  out += error_message("  native code: ", ms(n.compile_ns + n.load_ns), "; ", n.compiled, " compiled in ",
                                   ms(n.compile_ns));
  if (n.compiled) {
    out += error_message(" (generate ", ms(n.generate_ns), ", optimise ", ms(n.optimise_ns), ", codegen ",
                         ms(n.codegen_ns), ")");
  }
  out += error_message("; cache: ", n.compiled, n.compiled == 1 ? " miss, " : " misses, ",
                       n.disk_loads + n.process_loads, n.disk_loads + n.process_loads == 1 ? " hit" : " hits");
  if (n.disk_loads + n.process_loads) {
    out += error_message(" (", n.disk_loads, " from disk, ", n.process_loads, " already loaded: ", ms(n.load_ns), ")");
  }
  if (n.refused) out += error_message("; ", n.refused, " refused (the interpreter runs those loops)");
  if (n.optimised) {
    out += error_message("; optimised tier: ", n.optimised, n.optimised == 1 ? " compile" : " compiles",
                         " in the background, ", ms(n.optimised_ns));
  }
  out += "\n";
  for (const NativeLoopStats& s : n.loops) {
    out += error_message("    loop ", s.name, ": ");
    if (!s.compiles.empty()) {
      out += error_message(ms(s.compile_ns), " of native code (");
      constexpr size_t kShown = 6;
      for (size_t i = 0; i < s.compiles.size() && i < kShown; ++i) {
        const auto& c = s.compiles[i];
        out += error_message(i ? ", " : "", compile_mode(c.mode), " ",
                             c.mode == 3 ? "" : c.source == 0 ? "compiled " : c.source == 1 ? "from disk " : "loaded ",
                             ms(c.ns));
      }
      if (s.compiles.size() > kShown) out += error_message(", and ", s.compiles.size() - kShown, " more");
      out += "); ";
    }
    out += error_message(s.runs, s.runs == 1 ? " run in " : " runs in ", ms(s.run_ns), " (", s.native_runs,
                         " native", s.general_runs ? error_message(", ", s.general_runs, " went on in the general "
                                                                   "evaluation") : std::string(),
                         "), ", s.turns, " turns on the interpreter\n");
  }
  return out;
}

std::string summary_json(const TraceSet& set) {
  std::vector<MergedProgram> merged = merged_programs(set);
  std::vector<LocalityStats> stats = locality_stats(set);
  std::vector<StepPhases> phases = step_phases(set);
  std::ostringstream os;
  // Labels of drawn events, shared through a table.
  std::vector<std::string> labels;
  std::unordered_map<std::string, int> label_ids;
  auto label = [&](const std::string& s) {
    auto [it, added] = label_ids.emplace(s, static_cast<int>(labels.size()));
    if (added) labels.push_back(s);
    return it->second;
  };
  // Events drawn one by one per track; beyond, the longest, and the track's
  // busy time per bin shows the rest.
  constexpr size_t kMaxDrawn = 4000;
  constexpr int kBins = 600;
  int64_t span = std::max<int64_t>(1, set.span_ns);
  auto bins_of = [&](const std::vector<Interval>& busy, int lanes_count) {
    std::vector<double> bins(kBins, 0.0);
    double width = static_cast<double>(span) / kBins;
    for (const auto& [a, b] : busy) {
      int first = std::clamp(static_cast<int>(a / width), 0, kBins - 1);
      int last = std::clamp(static_cast<int>(b / width), 0, kBins - 1);
      for (int k = first; k <= last; ++k) {
        double lo = std::max<double>(a, k * width), hi = std::min<double>(b, (k + 1) * width);
        if (hi > lo) bins[k] += (hi - lo) / (width * std::max(1, lanes_count));
      }
    }
    std::string s = "[";
    for (int k = 0; k < kBins; ++k) {
      char buf[16];
      std::snprintf(buf, sizeof buf, "%s%.3g", k ? "," : "", std::min(1.0, bins[k]));
      s += buf;
    }
    return s + "]";
  };

  os << "{\"dir\":" << json_string(set.dir) << ",\"expected\":" << set.expected << ",\"span_ns\":" << set.span_ns
     << ",\"bins\":" << kBins << ",\"problems\":[";
  for (size_t i = 0; i < set.problems.size(); ++i) os << (i ? "," : "") << json_string(set.problems[i]);
  os << "],\"localities\":[";
  int slowest = -1;
  int64_t most = -1;
  for (const auto& s : stats) {
    if (s.compute_ns > most) {
      most = s.compute_ns;
      slowest = s.locality;
    }
  }
  for (size_t li = 0; li < set.localities.size(); ++li) {
    const LocalityTrace& l = set.localities[li];
    const LocalityStats& s = stats[li];
    Tracks t = tracks_of(l);
    std::vector<std::string> titles = thread_titles(l);
    os << (li ? "," : "") << "{\"locality\":" << l.locality << ",\"host\":" << json_string(l.host)
       << ",\"pid\":" << l.pid << ",\"file\":" << json_string(l.file) << ",\"complete\":" << (l.complete ? "true" : "false")
       << ",\"begin\":" << l.begin << ",\"end\":" << l.end << ",\"stats\":{\"threads\":" << s.threads
       << ",\"wall_ns\":" << s.wall_ns << ",\"compute_ns\":" << s.compute_ns << ",\"comm_wait_ns\":" << s.comm_wait_ns
       << ",\"idle_ns\":" << s.idle_ns << ",\"comm_ns\":" << s.comm_ns << ",\"comm_bytes\":" << s.comm_bytes
       << ",\"comm_ops\":" << s.comm_ops << ",\"tasks\":" << s.tasks << ",\"node_events\":" << s.node_events
       << ",\"steps\":" << s.steps << "},\"threads\":[";
    std::vector<Interval> all_busy;
    bool any = false;
    for (size_t k = 0; k < t.threads.size(); ++k) {
      if (t.threads[k].empty()) continue;
      std::vector<Interval> busy = intervals(t.top[k]);
      all_busy.insert(all_busy.end(), busy.begin(), busy.end());
      std::vector<const TraceEvent*> drawn = t.top[k];
      bool truncated = drawn.size() > kMaxDrawn;
      if (truncated) {
        std::nth_element(drawn.begin(), drawn.begin() + kMaxDrawn, drawn.end(),
                         [](const TraceEvent* a, const TraceEvent* b) { return a->t1 - a->t0 > b->t1 - b->t0; });
        drawn.resize(kMaxDrawn);
      }
      os << (any ? "," : "") << "{\"name\":" << json_string(titles[k]) << ",\"busy_ns\":" << length(busy)
         << ",\"events_total\":" << t.top[k].size() << ",\"truncated\":" << (truncated ? "true" : "false")
         << ",\"bins\":" << bins_of(busy, 1) << ",\"events\":[";
      for (size_t i = 0; i < drawn.size(); ++i) {
        const TraceEvent* e = drawn[i];
        int pos = -1;
        if (e->program >= 0) pos = label(l.programs[e->program].nodes[e->node].position);
        os << (i ? "," : "") << "[" << e->t0 << "," << e->t1 - e->t0 << "," << label(task_name(l, *e)) << "," << pos
           << "]";
      }
      os << "]}";
      any = true;
    }
    os << "],\"utilization\":" << bins_of(all_busy, std::max(1, s.threads)) << ",\"comm\":[";
    std::vector<int> lane = lanes(t.comm);
    size_t drawn_comm = std::min(t.comm.size(), kMaxDrawn * 4);
    for (size_t i = 0; i < drawn_comm; ++i) {
      const TraceEvent* e = t.comm[i];
      os << (i ? "," : "") << "[" << e->t0 << "," << e->t1 - e->t0 << "," << label(comm_name(l, *e)) << ","
         << label(l.strings[e->site]) << "," << e->amount << "," << lane[i] << "]";
    }
    os << "],\"comm_total\":" << t.comm.size() << ",\"steps\":[";
    bool first_step = true;
    for (const StepPhases& p : phases) {
      if (p.locality != l.locality) continue;
      os << (first_step ? "" : ",") << "[" << p.iteration << "," << p.t0 << "," << p.t1 - p.t0 << "," << (p.split ? 1 : 0)
         << "," << p.forward << "," << p.backward << "," << p.comm_wait << "," << p.optimizer << "," << p.other << "]";
      first_step = false;
    }
    os << "]}";
  }
  os << "],\"slowest\":" << slowest << ",\"programs\":[";
  for (size_t m = 0; m < merged.size(); ++m) {
    const MergedProgram& p = merged[m];
    os << (m ? "," : "") << "{\"name\":" << json_string(p.name) << ",\"localities\":" << p.parts.size()
       << ",\"nodes\":[";
    for (size_t i = 0; i < p.nodes.size(); ++i) {
      const TraceNode& n = p.nodes[i];
      os << (i ? "," : "") << "[" << n.parent << "," << label(n.label) << "," << label(n.position) << ","
         << n.evaluations << "," << n.exclusive_ns << "," << n.inclusive_ns << "," << (n.primitive ? 1 : 0) << ","
         << n.spawned << "]";
    }
    os << "]}";
  }
  // Top primitives by exclusive time, over every node and locality.
  struct Top {
    std::string family;
    uint64_t evaluations = 0, exclusive_ns = 0, nodes = 0;
  };
  std::map<std::string, Top> top;
  for (const MergedProgram& p : merged) {
    for (const TraceNode& n : p.nodes) {
      if (!n.primitive || n.evaluations == 0) continue;
      Top& t = top[n.label];
      t.family = n.family;
      t.evaluations += n.evaluations;
      t.exclusive_ns += n.exclusive_ns;
      t.nodes += 1;
    }
  }
  std::vector<std::pair<std::string, Top>> ranked(top.begin(), top.end());
  std::sort(ranked.begin(), ranked.end(),
            [](const auto& a, const auto& b) { return a.second.exclusive_ns > b.second.exclusive_ns; });
  os << "],\"top\":[";
  for (size_t i = 0; i < ranked.size() && i < 50; ++i) {
    os << (i ? "," : "") << "{\"name\":" << json_string(ranked[i].first) << ",\"family\":"
       << json_string(ranked[i].second.family) << ",\"evaluations\":" << ranked[i].second.evaluations
       << ",\"exclusive_ns\":" << ranked[i].second.exclusive_ns << ",\"nodes\":" << ranked[i].second.nodes << "}";
  }
  // Sources the positions refer to: program texts and recorded files.
  std::map<std::string, std::string> sources;
  for (const LocalityTrace& l : set.localities) {
    for (const auto& [name, text] : l.sources) sources.emplace(name, text);
    for (const TraceProgram& p : l.programs) sources.emplace(p.name, p.text);
  }
  os << "],\"sources\":{";
  bool first_source = true;
  for (const auto& [name, text] : sources) {
    os << (first_source ? "" : ",") << json_string(name) << ":" << json_string(text);
    first_source = false;
  }
  NativeStats native = native_stats(set);
  os << "},\"native\":{\"translated\":" << native.translated << ",\"translate_ns\":" << native.translate_ns
     << ",\"compiled\":" << native.compiled << ",\"disk_loads\":" << native.disk_loads
     << ",\"process_loads\":" << native.process_loads << ",\"refused\":" << native.refused
     << ",\"compile_ns\":" << native.compile_ns << ",\"load_ns\":" << native.load_ns
     << ",\"generate_ns\":" << native.generate_ns << ",\"optimise_ns\":" << native.optimise_ns
     << ",\"codegen_ns\":" << native.codegen_ns << ",\"optimised\":" << native.optimised
     << ",\"optimised_ns\":" << native.optimised_ns << ",\"text\":" << json_string(native_report_text(native))
     << ",\"loops\":[";
  for (size_t i = 0; i < native.loops.size(); ++i) {
    const NativeLoopStats& s = native.loops[i];
    os << (i ? "," : "") << "{\"name\":" << json_string(s.name) << ",\"runs\":" << s.runs
       << ",\"native_runs\":" << s.native_runs << ",\"general_runs\":" << s.general_runs
       << ",\"rolled_back\":" << s.rolled_back << ",\"turns\":" << s.turns << ",\"run_ns\":" << s.run_ns
       << ",\"compiled\":" << s.compiled << ",\"disk_loads\":" << s.disk_loads
       << ",\"process_loads\":" << s.process_loads << ",\"refused\":" << s.refused
       << ",\"compile_ns\":" << s.compile_ns << ",\"optimised\":" << s.optimised
       << ",\"optimised_ns\":" << s.optimised_ns << "}";
  }
  os << "]},\"labels\":[";
  for (size_t i = 0; i < labels.size(); ++i) os << (i ? "," : "") << json_string(labels[i]);
  os << "]}";
  return os.str();
}

}  // namespace tessera::trace
