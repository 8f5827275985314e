// `tessera report DIR`: reads a trace directory and writes the HTML report and
// the exports (Chrome trace JSON, DOT tree, counters CSV); prints each
// locality's time split and what the trace is missing.
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/kernels/io.hpp"
#include "tessera/trace/export.hpp"
#include "tessera/trace/trace_file.hpp"

namespace tessera::cli {

namespace {

// Through a new temporary beside the file (never a path that exists), so
// an interrupted report leaves no half file and a planted link is not followed.
void write_file(const std::string& path, const std::string& text) {
  kernels::write_file_atomic(path, text, "report");
}

std::string seconds(int64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f s", static_cast<double>(ns) * 1e-9);
  return buf;
}

std::string percent(int64_t part, int64_t whole) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%.0f%%", whole > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0);
  return buf;
}

}  // namespace

int cmd_report(const std::vector<std::string>& argv) {
  std::string dir, html, chrome, dot, csv;
  bool quiet = false;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    auto value = [&](const std::string& flag) -> std::string {
      if (a.size() > flag.size() && a[flag.size()] == '=') return a.substr(flag.size() + 1);
      if (i + 1 >= argv.size()) throw std::invalid_argument("[report] option " + flag + " needs a file name");
      return argv[++i];
    };
    auto is = [&](const std::string& flag) { return a == flag || a.rfind(flag + "=", 0) == 0; };
    if (is("-o")) {
      html = value("-o");
    } else if (is("--html")) {
      html = value("--html");
    } else if (is("--chrome")) {
      chrome = value("--chrome");
    } else if (is("--dot")) {
      dot = value("--dot");
    } else if (is("--csv")) {
      csv = value("--csv");
    } else if (a == "--quiet" || a == "-q") {
      quiet = true;
    } else if (a.size() > 1 && a[0] == '-') {
      throw std::invalid_argument("[report] unknown option '" + a + "' (see `tessera help`)");
    } else if (dir.empty()) {
      dir = a;
    } else {
      throw std::invalid_argument("[report] one trace directory at a time, got '" + dir + "' and '" + a + "'");
    }
  }
  if (dir.empty()) throw std::invalid_argument("[report] needs a trace directory: tessera report DIR");
  trace::TraceSet set = trace::load_trace(dir);
  if (html.empty() && chrome.empty() && dot.empty() && csv.empty()) {
    std::filesystem::path d(dir);
    html = (d / "report.html").string();
    chrome = (d / "trace.json").string();
    dot = (d / "tree.dot").string();
    csv = (d / "counters.csv").string();
  }
  if (!html.empty()) write_file(html, trace::report_html(set));
  if (!chrome.empty()) write_file(chrome, trace::chrome_trace_json(set));
  if (!dot.empty()) write_file(dot, trace::tree_dot(set));
  if (!csv.empty()) write_file(csv, trace::counters_csv(set));

  for (const auto& p : set.problems) std::fprintf(stderr, "warning: %s\n", p.c_str());
  if (quiet) return 0;
  std::printf("trace %s: %zu of %d localities\n", dir.c_str(), set.localities.size(), set.expected);
  for (const trace::LocalityStats& s : trace::locality_stats(set)) {
    int64_t capacity = s.threads * s.wall_ns;
    std::printf("  locality %d: %s on %d threads; compute %s, waiting for communication %s, idle %s; "
                "%llu communication operations (%llu bytes), %llu tasks\n",
                s.locality, seconds(s.wall_ns).c_str(), s.threads, percent(s.compute_ns, capacity).c_str(),
                percent(s.comm_wait_ns, capacity).c_str(), percent(s.idle_ns, capacity).c_str(),
                static_cast<unsigned long long>(s.comm_ops), static_cast<unsigned long long>(s.comm_bytes),
                static_cast<unsigned long long>(s.tasks));
  }
  std::fputs(trace::native_report_text(trace::native_stats(set)).c_str(), stdout);
  for (const auto& [what, path] : {std::pair<const char*, std::string>{"report", html}, {"chrome trace", chrome},
                                   {"tree", dot}, {"counters", csv}}) {
    if (!path.empty()) std::printf("%s: %s\n", what, path.c_str());
  }
  return 0;
}

}  // namespace tessera::cli
