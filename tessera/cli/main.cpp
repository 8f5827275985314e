// The `tessera` command: evaluate programs, list primitives.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/core/recursion_error.hpp"
#include "tessera/distributed/locality.hpp"
#include "tessera/kernels/simd.hpp"
#include "tessera/kernels/io.hpp"
#include "tessera/lang/compiler.hpp"
#include "tessera/lang/program.hpp"
#include "tessera/primitives/registry.hpp"
#include "tessera/runtime/scheduler.hpp"
#include "tessera/trace/session.hpp"

namespace tessera::cli {
// `tessera run` (run.cpp).
int cmd_run(const std::vector<std::string>& argv);
// `tessera report` (report.cpp).
int cmd_report(const std::vector<std::string>& argv);
}  // namespace tessera::cli

namespace {

using namespace tessera;

constexpr const char* kVersion = "0.1.0";

const char* kUsage = R"(usage: tessera <command> [options]

commands:
  eval FILE.tsl [args...]   run a program; its args are in `argv`, and if its value
                            is a function it is called with them
  eval -e 'EXPR' [args...]  run an expression given on the command line
  ops [NAME]                list every primitive with its signature, or show one
  run -n N [options] FILE.tsl|SCRIPT.py [args...]
                            run a program on N localities (MPI ranks) through mpirun,
                            here or on --hosts/--hostfile/SLURM hosts; each rank gets its
                            host's cores over the ranks there unless --threads; output
                            lines are prefixed with [rank r]; a failing rank is named;
                            `tessera run --help` lists every option
  report DIR [options]      the report and exports of a trace directory (below)
  help                      this text

eval options (before FILE):
  --threads N         worker threads (default: TESSERA_THREADS or all cores)
  --time              print the evaluation time to stderr
  --dump-tree[=FILE]  write the execution tree as Graphviz DOT (stdout or FILE)
  --counters[=FILE]   write per-node counters as CSV (stdout or FILE)
  --trace DIR         record a trace of the run into DIR (see `tessera report`)
  --quiet             do not print the program's value

run options: see `tessera run --help` (--hostfile, --mca, -x, --output-dir, ...).

report DIR [-o report.html] [--chrome trace.json] [--dot tree.dot] [--csv counters.csv]
  Reads the trace in DIR (of `tessera run --trace DIR`, `tessera eval --trace DIR`,
  or Python's `with tessera.trace(DIR):`), prints each locality's time split, and
  writes the HTML report, the Chrome trace (Perfetto, chrome://tracing), the
  execution trees (Graphviz DOT) and the counters (CSV). Without options all
  four go into DIR: report.html, trace.json, tree.dot, counters.csv.
)";

// The Python-style name of an exception kind, for messages.
std::string error_kind(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const SyntaxError&) {
    return "SyntaxError";
  } catch (const TypeError&) {
    return "TypeError";
  } catch (const MemoryError&) {
    return "MemoryError";
  } catch (const AttributeError&) {
    return "AttributeError";
  } catch (const ZeroDivisionError&) {
    return "ZeroDivisionError";
  } catch (const std::invalid_argument&) {
    return "ValueError";
  } catch (const std::out_of_range&) {
    return "IndexError";
  } catch (const std::bad_alloc&) {
    return "MemoryError";
  } catch (const RecursionError&) {
    return "RecursionError";
  } catch (...) {
    return "RuntimeError";
  }
}

bool write_output(const std::string& target, const std::string& text) {
  if (target.empty()) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return true;
  }
  try {
    kernels::write_file_atomic(target, text, "eval");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tessera: %s\n", e.what());
    return false;
  }
  return true;
}

int cmd_ops(const std::vector<std::string>& args) {
  if (args.empty()) {
    std::string family;
    std::printf("Special forms:\n");
    for (const auto& [sig, help] : special_forms()) std::printf("  %-44s %s\n", sig.c_str(), help.c_str());
    std::printf("\nOperators: + - * / %% ** @ == != < <= > >= && || ! (add, subtract, multiply, "
                "divide, mod, power, matmul, equal, ..., logical_not)\n");
    std::vector<const PrimitiveSpec*> prims = all_primitives();
    std::stable_sort(prims.begin(), prims.end(), [](auto* a, auto* b) { return a->family < b->family; });
    for (const PrimitiveSpec* p : prims) {
      if (p->family != family) {
        family = p->family;
        std::printf("\n%s:\n", family.c_str());
      }
      // The first sentence (all of a one-sentence help).
      size_t end = p->help.find(". ");
      std::string first = end == std::string::npos ? p->help : p->help.substr(0, end + 1);
      std::printf("  %-44s %s\n", p->signature().c_str(), first.c_str());
    }
    std::printf("\n%zu primitives. `tessera ops NAME` shows one.\n", prims.size());
    return 0;
  }
  int status = 0;
  for (const auto& name : args) {
    const PrimitiveSpec* p = find_primitive(name);
    if (!p) {
      std::fprintf(stderr, "tessera ops: unknown primitive '%s'", name.c_str());
      auto similar = similar_primitive_names(name);
      if (!similar.empty()) {
        std::fprintf(stderr, "; did you mean");
        for (const auto& s : similar) std::fprintf(stderr, " %s", s.c_str());
        std::fprintf(stderr, "?");
      }
      std::fprintf(stderr, "\n");
      status = 1;
      continue;
    }
    std::printf("%s\n  family: %s\n\n  %s\n", p->signature().c_str(), p->family.c_str(), p->help.c_str());
  }
  return status;
}

int cmd_eval(const std::vector<std::string>& argv) {
  std::string file, expr, tree_target, counters_target, trace_dir;
  bool have_expr = false, show_time = false, dump_tree = false, counters = false, quiet = false;
  std::vector<Value> prog_args;
  size_t i = 0;
  for (; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    auto value_of = [&](const std::string& flag) -> std::string {
      if (a.size() > flag.size() && a[flag.size()] == '=') return a.substr(flag.size() + 1);
      if (i + 1 >= argv.size()) throw std::invalid_argument("option " + flag + " needs a value");
      return argv[++i];
    };
    if (a == "-e" || a == "--expr") {
      if (i + 1 >= argv.size()) throw std::invalid_argument("option -e needs an expression");
      expr = argv[++i];
      have_expr = true;
      ++i;
      break;
    } else if (a.rfind("--threads", 0) == 0) {
      std::string v = value_of("--threads");
      int n = std::atoi(v.c_str());
      if (n <= 0) throw std::invalid_argument("--threads must be a positive integer, got '" + v + "'");
      set_num_threads(n);
    } else if (a.rfind("--trace", 0) == 0 && (a.size() == 7 || a[7] == '=')) {
      trace_dir = value_of("--trace");
    } else if (a == "--time") {
      show_time = true;
    } else if (a == "--quiet" || a == "-q") {
      quiet = true;
    } else if (a.rfind("--dump-tree", 0) == 0) {
      dump_tree = true;
      if (a.size() > 11 && a[11] == '=') tree_target = a.substr(12);
    } else if (a.rfind("--counters", 0) == 0) {
      counters = true;
      if (a.size() > 10 && a[10] == '=') counters_target = a.substr(11);
    } else if (a.size() > 1 && a[0] == '-' && a != "-") {
      throw std::invalid_argument("unknown option '" + a + "' (see `tessera help`)");
    } else {
      file = a;
      ++i;
      break;
    }
  }
  for (; i < argv.size(); ++i) prog_args.push_back(parse_cli_value(argv[i]));

  std::string text, name;
  if (have_expr) {
    text = expr;
    name = "<expr>";
  } else {
    if (file.empty()) throw std::invalid_argument("eval needs a FILE.tsl or -e 'EXPR' (see `tessera help`)");
    text = kernels::read_whole_file(file, "eval");
    name = file;
  }

  Program program(text, name);
  // --trace DIR, or TESSERA_TRACE from `tessera run --trace DIR`.
  bool tracing = !trace_dir.empty();
  if (tracing) {
    trace::start_session(trace_dir);
  } else {
    tracing = trace::start_session_from_env();
  }
  auto t0 = std::chrono::steady_clock::now();
  Value result;
  std::exception_ptr failure;
  try {
    result = program.run(prog_args);
  } catch (...) {
    failure = std::current_exception();
  }
  auto t1 = std::chrono::steady_clock::now();
  std::string trace_note;
  // (A locality whose peer failed has written its trace already.)
  if (tracing && trace::session_active()) {
    std::string path = trace::stop_session();
    if (!trace_dir.empty()) trace_note = "trace: " + path + " (view it: tessera report " + trace_dir + ")\n";
  }
  // The tree and counters are written even when the run failed: they help
  // to find out why.
  if (dump_tree && !write_output(tree_target, program.tree_dot())) return 1;
  if (counters && !write_output(counters_target, program.counters_csv())) return 1;
  if (failure) {
    std::fputs(trace_note.c_str(), stderr);
    std::rethrow_exception(failure);
  }
  if (!quiet && !result.is_nil()) std::printf("%s\n", result.str().c_str());
  std::fflush(stdout);
  std::fputs(trace_note.c_str(), stderr);
  if (show_time) {
    double ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
    std::fprintf(stderr, "time: %.3f ms (%d threads)\n", ms, num_threads());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "help" || args[0] == "--help" || args[0] == "-h") {
    std::fputs(kUsage, args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  if (args[0] == "--version" || args[0] == "version") {
    std::printf("tessera %s\n", kVersion);
    try {
      std::printf("simd: %s (widest on this CPU: %s)\n", tessera::simd_name(tessera::simd_level()),
                  tessera::simd_name(tessera::simd_best()));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "ValueError: %s\n", e.what());
      return 1;
    }
    return 0;
  }
  std::string cmd = args[0];
  std::vector<std::string> rest(args.begin() + 1, args.end());
  try {
    if (cmd == "eval") return cmd_eval(rest);
    if (cmd == "ops") return cmd_ops(rest);
    if (cmd == "run") return tessera::cli::cmd_run(rest);
    if (cmd == "report") return tessera::cli::cmd_report(rest);
    std::fprintf(stderr, "tessera: unknown command '%s'\n\n%s", cmd.c_str(), kUsage);
    return 2;
  } catch (...) {
    std::exception_ptr e = std::current_exception();
    tessera::distributed::mark_failed();
    std::fflush(stdout);
    std::fprintf(stderr, "%s: %s\n", error_kind(e).c_str(), exception_message(e).c_str());
    return 1;
  }
}
