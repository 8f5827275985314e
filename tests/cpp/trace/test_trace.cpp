// Tracing: the recorder, the trace files a session writes, reading them back
// (also damaged or incomplete), and the exports' consistency.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <sstream>
#include <string>

#include "tessera/lang/program.hpp"
#include "tessera/runtime/scheduler.hpp"
#include "tessera/runtime/trace.hpp"
#include "tessera/trace/export.hpp"
#include "tessera/trace/session.hpp"
#include "tessera/trace/trace_file.hpp"

namespace fs = std::filesystem;
using namespace tessera;

namespace {

// Large enough for tiles and spawned nodes, with a deterministic result.
const char* kProgram = R"(
define(x, random_normal([300, 200], seed=3))
define(w, random_normal([200, 50], seed=4))
define(f, v, sum(tanh(v @ w) * 2.0, axis=0))
define(a, f(x))
define(b, f(x + 1.0))
parallel_block(a + b, a - b)
)";

struct TempDir {
  fs::path path;
  TempDir() {
    static int n = 0;
    path = fs::temp_directory_path() / ("tessera-trace-test-" + std::to_string(getpid()) + "-" + std::to_string(n++));
    fs::remove_all(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string str() const { return path.string(); }
};

// Runs `program` once inside a trace session writing into `dir`.
Value traced_run(const Program& program, const std::string& dir) {
  trace::start_session(dir);
  Value v;
  try {
    v = program.run();
  } catch (...) {
    trace::stop_session();
    throw;
  }
  trace::stop_session();
  return v;
}

bool same_bits(const Value& a, const Value& b) {
  const Array &x = a.as_array(), &y = b.as_array();
  return x.dtype() == y.dtype() && x.shape() == y.shape() && std::memcmp(x.raw(), y.raw(), x.nbytes()) == 0;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct TraceThreads : ::testing::TestWithParam<int> {
  void SetUp() override {
    before_ = num_threads();
    set_num_threads(GetParam());
  }
  void TearDown() override {
    set_spawn_threshold_ns(kSpawnThresholdNs);
    set_num_threads(before_);
  }
  int before_ = 1;
};

}  // namespace

TEST(Trace, OffByDefault) { EXPECT_FALSE(trace::on()); }

TEST_P(TraceThreads, EveryEvaluationIsAnEventAndEverySpawnATask) {
  // Everything measured is spawned: the asynchronous paths are traced too.
  set_spawn_threshold_ns(0);
  Program program(kProgram, "prog.tsl");
  program.run();  // measured once, so the traced run spawns
  TempDir dir;
  traced_run(program, dir.str());
  trace::TraceSet set = trace::load_trace(dir.str());
  ASSERT_EQ(set.localities.size(), 1u);
  EXPECT_TRUE(set.problems.empty()) << set.problems.front();
  const trace::LocalityTrace& l = set.localities[0];
  EXPECT_TRUE(l.complete);
  ASSERT_EQ(l.programs.size(), 1u);
  std::map<int, uint64_t> node_events, task_events;
  for (const auto& e : l.events) {
    ASSERT_LE(e.t0, e.t1);
    if (e.kind == 'n') {
      ASSERT_GE(e.node, 0) << "a node event of a node outside the program";
      ++node_events[e.node];
    }
    if (e.kind == 't' && !e.tile && e.node >= 0) ++task_events[e.node];
  }
  uint64_t evaluations = 0, spawned = 0, tasks = 0;
  for (const auto& n : l.programs[0].nodes) {
    EXPECT_EQ(node_events[n.id], n.evaluations) << n.label << " at " << n.position;
    // A spawned node's work is a task named after it. The task that
    // completes the run may finish after the recording stopped (its event
    // is then lost), so one may be missing.
    EXPECT_LE(task_events[n.id], n.spawned) << n.label << " at " << n.position;
    evaluations += n.evaluations;
    spawned += n.spawned;
    tasks += task_events[n.id];
  }
  EXPECT_GE(evaluations, 8u);  // kProgram's nodes, a fused reduction being one
  EXPECT_GE(tasks + 1, spawned);
  if (GetParam() > 1) {
    EXPECT_GT(tasks, 0u);
  }
}

TEST_P(TraceThreads, TracingDoesNotChangeResults) {
  Program program(kProgram, "prog.tsl");
  Value plain = program.run();
  TempDir dir;
  Value traced = traced_run(program, dir.str());
  ASSERT_TRUE(plain.is_array());
  EXPECT_TRUE(same_bits(plain, traced));
  EXPECT_TRUE(same_bits(plain, program.run()));
}

INSTANTIATE_TEST_SUITE_P(Threads, TraceThreads, ::testing::Values(1, 2, 4));

TEST(Trace, CountersAreThoseOfTheRecordedRuns) {
  Program program("define(x, [1.0, 2.0, 3.0])\nsum(exp(x) * 2.0)", "small.tsl");
  program.run();
  program.run();
  TempDir dir;
  traced_run(program, dir.str());
  trace::TraceSet set = trace::load_trace(dir.str());
  // sum(exp(x) * 2.0) on an array is one fused reduction
  // (sum_fused(exp+multiply)); its operations and the sum are nodes below it,
  // evaluated only for scalar operands.
  std::map<std::string, uint64_t> evaluations;
  for (const auto& n : set.localities[0].programs[0].nodes) {
    if (n.primitive) evaluations[n.label] += n.evaluations;
  }
  std::map<std::string, uint64_t> expected = {
      {"sum_fused(exp+multiply)", 1}, {"sum", 0}, {"exp", 0}, {"multiply", 0}};
  EXPECT_EQ(evaluations, expected);
}

TEST(Trace, EventsOutsideASessionAreNotRecorded) {
  Program program("sum(exp(arange(1000) * 0.001))", "outside.tsl");
  trace::start();
  trace::Recording during = trace::stop();
  program.run();  // after the recording: not in it, nor in the next one
  trace::start();
  trace::Recording next = trace::stop();
  for (const auto& t : next.threads) EXPECT_TRUE(t.events.empty());
  (void)during;
}

TEST(Trace, SecondSessionWhileOneRunsFails) {
  TempDir dir;
  trace::start_session(dir.str());
  try {
    trace::start_session(dir.str());
    ADD_FAILURE() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("a trace is already being recorded into"), std::string::npos) << e.what();
  }
  trace::stop_session();
  EXPECT_THROW(trace::stop_session(), std::runtime_error);
}

TEST(Trace, DotTotalsMatchCounters) {
  Program program(kProgram, "prog.tsl");
  TempDir dir;
  traced_run(program, dir.str());
  trace::TraceSet set = trace::load_trace(dir.str());
  std::string dot = trace::tree_dot(set), csv = trace::counters_csv(set);
  // DOT: pPnN [label=..., evaluations=E, exclusive_ns=X, inclusive_ns=I];
  std::regex node(R"re((p\d+n\d+) \[label="[^"]*", evaluations=(\d+), exclusive_ns=(\d+), inclusive_ns=(\d+)\];)re");
  std::map<std::string, std::pair<uint64_t, uint64_t>> from_dot;
  uint64_t dot_total = 0;
  for (std::sregex_iterator it(dot.begin(), dot.end(), node), end; it != end; ++it) {
    from_dot[(*it)[1]] = {std::stoull((*it)[2]), std::stoull((*it)[3])};
    dot_total += std::stoull((*it)[3]);
  }
  ASSERT_FALSE(from_dot.empty()) << dot;
  std::istringstream rows(csv);
  std::string line;
  std::getline(rows, line);
  EXPECT_EQ(line, "locality,program,node,name,family,position,evaluations,exclusive_ns,inclusive_ns,mean_ns,spawned,"
                  "execution");
  uint64_t csv_total = 0;
  int count = 0;
  while (std::getline(rows, line)) {
    std::vector<std::string> f;
    std::stringstream ss(line);
    for (std::string x; std::getline(ss, x, ',');) f.push_back(x);
    ASSERT_EQ(f.size(), 12u) << line;
    auto it = from_dot.find("p" + f[1] + "n" + f[2]);
    ASSERT_NE(it, from_dot.end()) << line;
    EXPECT_EQ(it->second.first, std::stoull(f[6])) << line;
    EXPECT_EQ(it->second.second, std::stoull(f[7])) << line;
    csv_total += std::stoull(f[7]);
    ++count;
  }
  EXPECT_GT(count, 5);
  EXPECT_EQ(dot_total, csv_total);
  // The root's inclusive time is everything under it.
  EXPECT_EQ(set.localities[0].programs[0].nodes[0].inclusive_ns, csv_total);
}

TEST(Trace, MissingLocalityIsReported) {
  TempDir dir;
  setenv(trace::kTraceRunEnv, "run-42", 1);
  Program program("sum(arange(10))", "p.tsl");
  traced_run(program, dir.str());
  unsetenv(trace::kTraceRunEnv);
  std::ofstream(dir.path / "tessera-run.txt") << "run\trun-42\nlocalities\t3\nprogram\tp.tsl\n";
  trace::TraceSet set = trace::load_trace(dir.str());
  EXPECT_EQ(set.expected, 3);
  ASSERT_EQ(set.localities.size(), 1u);
  ASSERT_EQ(set.problems.size(), 2u);
  EXPECT_EQ(set.problems[0],
            "locality 1 of 3 wrote no trace (locality-1.trace is missing): it failed or was stopped before the end "
            "of its run");
  EXPECT_NE(set.problems[1].find("locality 2 of 3 wrote no trace"), std::string::npos);
  // The exports say it too.
  EXPECT_NE(trace::chrome_trace_json(set).find("locality 1 of 3 wrote no trace"), std::string::npos);
  EXPECT_NE(trace::report_html(set).find("locality 2 of 3 wrote no trace"), std::string::npos);
}

TEST(Trace, TruncatedFileIsReadAsFarAsItGoes) {
  TempDir dir;
  Program program(kProgram, "prog.tsl");
  traced_run(program, dir.str());
  fs::path file = dir.path / trace::locality_file_name(0);
  std::string text = read_file(file);
  size_t events_before = trace::load_trace(dir.str()).localities[0].events.size();
  // Cut in the middle of a line, as a crash while writing would.
  std::ofstream(file, std::ios::binary | std::ios::trunc) << text.substr(0, text.size() * 2 / 3 + 3);
  trace::TraceSet set = trace::load_trace(dir.str());
  ASSERT_EQ(set.localities.size(), 1u);
  EXPECT_FALSE(set.localities[0].complete);
  ASSERT_FALSE(set.problems.empty());
  bool said = false;
  for (const auto& p : set.problems) said = said || p.find("locality-0.trace is") != std::string::npos;
  EXPECT_TRUE(said) << set.problems.front();
  EXPECT_LT(set.localities[0].events.size(), events_before);
  EXPECT_FALSE(trace::chrome_trace_json(set).empty());
  EXPECT_FALSE(trace::report_html(set).empty());
}

TEST(Trace, NotATraceDirectory) {
  TempDir dir;
  auto message = [&](const std::string& d) {
    try {
      trace::load_trace(d);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message(dir.str()), "[report] the trace directory '" + dir.str() + "' does not exist");
  fs::create_directories(dir.path);
  EXPECT_EQ(message(dir.str()),
            "[report] '" + dir.str() +
                "' is not a trace directory: it has no locality-N.trace files (record a trace with `tessera run "
                "--trace DIR`, `tessera eval --trace DIR` or `with tessera.trace(DIR):`)");
  std::ofstream(dir.path / "locality-0.trace") << "hello\n";
  EXPECT_EQ(message(dir.str()), "[report] '" + dir.str() +
                                    "' holds no readable trace: locality-0.trace is not a tessera trace file (it does "
                                    "not start with 'tessera-trace'); it is left out");
  std::ofstream(dir.path / "x") << "a file";
  EXPECT_NE(message((dir.path / "x").string()).find("is not a trace directory: it is a file"), std::string::npos);
}

TEST(Trace, FilesOfAnotherRunAreLeftOut) {
  TempDir dir;
  Program program("sum(arange(10))", "p.tsl");
  setenv(trace::kTraceRunEnv, "old", 1);
  traced_run(program, dir.str());
  fs::rename(dir.path / "locality-0.trace", dir.path / "locality-1.trace");
  setenv(trace::kTraceRunEnv, "new", 1);
  traced_run(program, dir.str());
  unsetenv(trace::kTraceRunEnv);
  trace::TraceSet set = trace::load_trace(dir.str());
  ASSERT_EQ(set.localities.size(), 1u);
  EXPECT_EQ(set.localities[0].run, "new");
  ASSERT_EQ(set.problems.size(), 1u);
  EXPECT_EQ(set.problems[0], "locality-1.trace is from another run (old) and is left out");
}

TEST(Trace, StepPhasesFollowTheStepsEvents) {
  // A training step in the language: forward, the gradient seed, backward,
  // then an optimizer update (sgd_update, family optim).
  Program program(R"(
define(loss, w, x, sum(tanh(x @ w) ** 2.0))
define(x, random_normal([64, 32], seed=1))
define(w, random_normal([32, 8], seed=2))
define(g, grad(loss)(w, x))
sgd_update(w, g, 0.1)
)",
                  "step.tsl");
  TempDir dir;
  trace::start_session(dir.str());
  int64_t t0 = trace::now_ns();
  program.run();
  trace::record_step(7, t0, trace::now_ns());
  trace::stop_session();
  std::vector<trace::StepPhases> steps = trace::step_phases(trace::load_trace(dir.str()));
  ASSERT_EQ(steps.size(), 1u);
  const trace::StepPhases& s = steps[0];
  EXPECT_EQ(s.iteration, 7u);
  ASSERT_TRUE(s.split);
  EXPECT_GT(s.forward, 0);
  EXPECT_GT(s.backward, 0);
  EXPECT_EQ(s.comm_wait, 0);  // one locality
  EXPECT_GT(s.optimizer, 0);
  EXPECT_EQ(s.forward + s.backward + s.comm_wait + s.optimizer + s.other, s.t1 - s.t0);
}

TEST(TraceCli, EvalTraceThenReport) {
  TempDir dir;
  fs::create_directories(dir.path);
  fs::path program = dir.path / "p.tsl";
  std::ofstream(program) << "define(x, random_normal([200, 100], seed=1))\nsum(x @ transpose(x))\n";
  fs::path traced = dir.path / "t";
  auto run = [](const std::string& args) {
    std::string cmd = std::string(TESSERA_CLI) + " " + args + " 2>&1";
    std::string out;
    FILE* p = popen(cmd.c_str(), "r");
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    int st = pclose(p);
    return std::make_pair(WIFEXITED(st) ? WEXITSTATUS(st) : -1, out);
  };
  auto plain = run("eval " + program.string());
  auto with = run("eval --trace " + traced.string() + " " + program.string());
  ASSERT_EQ(plain.first, 0) << plain.second;
  ASSERT_EQ(with.first, 0) << with.second;
  // The same value, then where the trace went.
  EXPECT_EQ(with.second, plain.second + "trace: " + (traced / "locality-0.trace").string() +
                             " (view it: tessera report " + traced.string() + ")\n");
  auto report = run("report " + traced.string() + " --csv " + (dir.path / "c.csv").string());
  ASSERT_EQ(report.first, 0) << report.second;
  EXPECT_NE(report.second.find("trace " + traced.string() + ": 1 of 1 localities"), std::string::npos) << report.second;
  EXPECT_NE(read_file(dir.path / "c.csv").find(",matmul,matrix,"), std::string::npos);
  EXPECT_FALSE(fs::exists(traced / "report.html"));  // only what was asked for
  auto bad = run("report " + dir.path.string());
  EXPECT_EQ(bad.first, 1);
  EXPECT_NE(bad.second.find("ValueError: [report] '" + dir.path.string() + "' is not a trace directory"),
            std::string::npos)
      << bad.second;
}

namespace {

std::pair<int, std::string> run_cli(const std::string& args) {
  std::string cmd = std::string(TESSERA_CLI) + " " + args + " 2>&1";
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int st = pclose(p);
  return std::make_pair(WIFEXITED(st) ? WEXITSTATUS(st) : -1, out);
}

// The lines of a file, and the file made again from edited lines.
std::vector<std::string> lines_of(const fs::path& p) {
  std::vector<std::string> out;
  std::istringstream in(read_file(p));
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}
void write_lines(const fs::path& p, const std::vector<std::string>& lines) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  for (const auto& l : lines) out << l << '\n';
}

}  // namespace

TEST(TraceCli, ReportWritesNothingThroughPlantedLinks) {
  TempDir dir;
  fs::create_directories(dir.path);
  fs::path traced = dir.path / "t";
  fs::path program = dir.path / "p.tsl";
  std::ofstream(program) << "sum(arange(10))\n";
  ASSERT_EQ(run_cli("eval --trace " + traced.string() + " " + program.string()).first, 0);
  // Links where the old writer put its temporaries and its outputs.
  fs::path victim = dir.path / "victim", victim2 = dir.path / "victim2";
  std::ofstream(victim) << "precious";
  std::ofstream(victim2) << "precious too";
  fs::create_symlink(victim, traced / "report.html.tmp");
  fs::create_symlink(victim2, traced / "trace.json");
  auto r = run_cli("report -q " + traced.string());
  ASSERT_EQ(r.first, 0) << r.second;
  EXPECT_EQ(read_file(victim), "precious");
  EXPECT_EQ(read_file(victim2), "precious too");
  // The outputs are new files in place of the links; no temporary is left.
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(traced / "trace.json")));
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(traced / "report.html")));
  EXPECT_NE(read_file(traced / "report.html").find("<html"), std::string::npos);
  for (const auto& e : fs::directory_iterator(traced)) {
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
  }
}

// A trace folder is untrusted: a link planted in it (to one of the user's
// files, or to a device) is not read through, and neither is a pipe (which
// would block) or a device (which would never end).
TEST(Trace, LinksPipesAndDevicesInTheFolderAreNotRead) {
  TempDir dir;
  Program program("sum(arange(10))", "p.tsl");
  traced_run(program, dir.str());
  fs::path secret = dir.path.parent_path() / (dir.path.filename().string() + "-secret");
  fs::copy_file(dir.path / "locality-0.trace", secret, fs::copy_options::overwrite_existing);
  fs::create_symlink(secret, dir.path / "locality-1.trace");
  fs::create_symlink("/dev/zero", dir.path / "locality-2.trace");
  ASSERT_EQ(::mkfifo((dir.path / "locality-3.trace").c_str(), 0600), 0);
  fs::create_symlink("/dev/zero", dir.path / "tessera-run.txt");
  trace::TraceSet set = trace::load_trace(dir.str());
  fs::remove(secret);
  ASSERT_EQ(set.localities.size(), 1u);
  EXPECT_EQ(set.localities[0].locality, 0);
  std::string all;
  for (const auto& p : set.problems) all += p + "\n";
  for (const char* name : {"locality-1.trace", "locality-2.trace", "locality-3.trace"}) {
    EXPECT_NE(all.find(std::string(name) + " is left out: it is not a regular file"),
              std::string::npos)
        << all;
  }
  EXPECT_NE(all.find("tessera-run.txt is left out"), std::string::npos) << all;
}

// Outputs written over an existing file keep its permission bits (a report
// shared with a group stays shared); new ones get 0666 less the umask.
TEST(TraceCli, OutputsKeepTheModeOfTheFilesTheyReplace) {
  TempDir dir;
  fs::create_directories(dir.path);
  fs::path traced = dir.path / "t";
  fs::path program = dir.path / "p.tsl";
  std::ofstream(program) << "sum(arange(10))\n";
  ASSERT_EQ(run_cli("eval --trace " + traced.string() + " " + program.string()).first, 0);
  ASSERT_EQ(run_cli("report -q " + traced.string()).first, 0);
  mode_t old_mask = ::umask(022);
  ::umask(old_mask);
  auto mode = [](const fs::path& p) {
    struct stat st {};
    EXPECT_EQ(::stat(p.c_str(), &st), 0) << p;
    return st.st_mode & 07777;
  };
  EXPECT_EQ(mode(traced / "report.html"), 0666u & ~old_mask);
  ::chmod((traced / "report.html").c_str(), 0640);
  ::chmod((traced / "trace.json").c_str(), 0604);
  ASSERT_EQ(run_cli("report -q " + traced.string()).first, 0);
  EXPECT_EQ(mode(traced / "report.html"), 0640u);
  EXPECT_EQ(mode(traced / "trace.json"), 0604u);
}

TEST(Trace, DamagedRecordsAreProblemsNamingTheLine) {
  TempDir dir;
  Program program(kProgram, "prog.tsl");
  traced_run(program, dir.str());
  fs::path file = dir.path / trace::locality_file_name(0);
  const std::vector<std::string> good = lines_of(file);
  auto find_line = [&](const std::string& kind) {
    for (size_t i = 0; i < good.size(); ++i) {
      if (good[i].rfind(kind + "\t", 0) == 0) return i;
    }
    return size_t(0);
  };
  auto edit = [&](const std::string& kind, size_t field, const std::string& value) {
    size_t i = find_line(kind);
    EXPECT_GT(i, 0u) << kind;
    std::vector<std::string> lines = good;
    std::vector<std::string> f;
    std::string part;
    std::istringstream in(lines[i]);
    while (std::getline(in, part, '\t')) f.push_back(part);
    f[field] = value;
    std::string joined;
    for (size_t k = 0; k < f.size(); ++k) joined += (k ? "\t" : "") + f[k];
    lines[i] = joined;
    write_lines(file, lines);
    return i + 1;  // the line number
  };
  struct Case {
    std::string kind;
    size_t field;
    std::string value, why;
  };
  const std::vector<Case> cases = {
      {"locality", 2, "2000000000", "locality count 2000000000 is out of range (1 to 1048576)"},
      {"locality", 1, "-1", "locality -1 is out of range (0 to 0)"},
      {"n", 5, "-3", "node -3 is not defined before this record"},
      {"n", 4, "-2", "program -2 is not defined before this record"},
      {"n", 4, "7", "program 7 is not defined before this record"},
      {"n", 2, "-9223372036854775808", "time -9223372036854775808 is out of range"},
      {"n", 3, "0", "end time 0 is out of range"},
      {"n", 6, "x", "'x' is not a number"},
      {"node", 3, "-7", "parent node -7 is not defined before this record"},
      {"node", 2, "99", "nodes out of order: node 99 where node 0 comes next"},
      {"thread", 1, "99999999999", "thread 99999999999 is out of range"},
      {"clock", 1, "9223372036854775807", "wall clock 9223372036854775807 is out of range"},
      {"span", 1, "-5", "span -5 is out of range"},
  };
  for (const Case& c : cases) {
    size_t line = edit(c.kind, c.field, c.value);
    trace::TraceSet set = trace::load_trace(dir.str());
    std::string all;
    for (const auto& p : set.problems) all += p + "\n";
    EXPECT_NE(all.find(error_message("locality-0.trace is damaged at line ", line, " (", c.why)), std::string::npos)
        << c.kind << " " << c.value << ":\n" << all;
    // What was read before the damage is usable.
    EXPECT_FALSE(trace::report_html(set).empty());
    EXPECT_FALSE(trace::chrome_trace_json(set).empty());
    EXPECT_FALSE(trace::tree_dot(set).empty());
    EXPECT_FALSE(trace::counters_csv(set).empty());
  }
  // A communication naming a string that does not exist.
  std::vector<std::string> lines = good;
  lines.insert(lines.end() - 2, "c\t1\t2\t8\t-1\t-5\t0");
  write_lines(file, lines);
  EXPECT_NE(trace::load_trace(dir.str()).problems.at(0).find("string -5 is not defined before this record"),
            std::string::npos);
}

// Each evaluation carries its thread's CPU clock at its start and end: its CPU time is at
// most its wall span (and a few clock reads), and a thread's clock never runs backwards.
// A file of an earlier build, without the two fields, reads as CPU time unknown.
TEST(Trace, NodeEventsCarryTheirThreadsCpuClock) {
  TempDir dir;
  Program program(kProgram, "prog.tsl");
  traced_run(program, dir.str());  // without TESSERA_TRACE_CPU: no clock read
  trace::TraceSet set = trace::load_trace(dir.str());
  ASSERT_TRUE(set.problems.empty()) << set.problems.front();
  for (const auto& e : set.localities[0].events) {
    if (e.kind == 'n') {
      ASSERT_EQ(e.cpu0, -1);
    }
  }
  setenv(trace::kTraceCpuEnv, "1", 1);
  traced_run(program, dir.str());
  unsetenv(trace::kTraceCpuEnv);
  set = trace::load_trace(dir.str());
  ASSERT_TRUE(set.problems.empty()) << set.problems.front();
  std::map<int, int64_t> last_cpu;  // per thread
  int64_t cpu = 0, nodes = 0;
  for (const auto& e : set.localities[0].events) {
    if (e.kind != 'n') continue;
    ++nodes;
    ASSERT_GE(e.cpu0, 0);
    ASSERT_GE(e.cpu1, e.cpu0);
    EXPECT_LE(e.cpu1 - e.cpu0, e.t1 - e.t0 + 100000) << "CPU beyond the wall span";
    EXPECT_GE(e.cpu0, last_cpu[e.thread]) << "a thread's CPU clock ran backwards";
    last_cpu[e.thread] = e.cpu1;
    cpu += e.cpu1 - e.cpu0;
  }
  EXPECT_GE(nodes, 8);  // kProgram's nodes, a fused reduction being one
  EXPECT_GT(cpu, 0);
  std::string json = trace::chrome_trace_json(set);
  EXPECT_NE(json.find("\"cpu_us\":"), std::string::npos);
  EXPECT_NE(json.find("\"cpu_at_us\":"), std::string::npos);

  fs::path file = dir.path / trace::locality_file_name(0);
  std::vector<std::string> lines = lines_of(file);
  // A clock that ends before it starts is damage, named with its line.
  std::vector<std::string> bad = lines;
  size_t n_line = 0;
  while (bad[n_line].rfind("n\t", 0) != 0) ++n_line;
  bad[n_line].erase(bad[n_line].rfind('\t'));
  bad[n_line] += "\t-1";
  write_lines(file, bad);
  set = trace::load_trace(dir.str());
  ASSERT_FALSE(set.problems.empty());
  EXPECT_NE(set.problems[0].find(error_message("damaged at line ", n_line + 1, " (CPU clock at the end -1 is out of range")),
            std::string::npos) << set.problems[0];
  for (std::string& line : lines) {
    if (line.rfind("n\t", 0) != 0) continue;
    line.erase(line.rfind('\t'));
    line.erase(line.rfind('\t'));
  }
  write_lines(file, lines);
  set = trace::load_trace(dir.str());
  ASSERT_TRUE(set.problems.empty()) << set.problems.front();
  for (const auto& e : set.localities[0].events) {
    if (e.kind == 'n') {
      ASSERT_EQ(e.cpu0, -1);
    }
  }
  EXPECT_EQ(trace::chrome_trace_json(set).find("cpu_us"), std::string::npos);
}

TEST(Trace, LocalityNumbersAndCountsDoNotDriveAllocations) {
  TempDir dir;
  Program program("sum(arange(10))", "p.tsl");
  traced_run(program, dir.str());
  fs::path file = dir.path / trace::locality_file_name(0);
  std::vector<std::string> lines = lines_of(file);
  // A file named for the largest int (it says it is locality 0 of 1).
  fs::copy_file(file, dir.path / "locality-2147483647.trace");
  fs::copy_file(file, dir.path / "locality-99999999999999999999.trace");
  trace::TraceSet set = trace::load_trace(dir.str());
  std::string all;
  for (const auto& p : set.problems) all += p + "\n";
  EXPECT_NE(all.find("locality-2147483647.trace is left out: locality 2147483647 is past the largest one tessera "
                     "runs (1048575)"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("locality-99999999999999999999.trace is left out"), std::string::npos) << all;
  EXPECT_EQ(set.localities.size(), 1u);
  // A million localities claimed: one sentence for the missing ones.
  fs::remove(dir.path / "locality-2147483647.trace");
  fs::remove(dir.path / "locality-99999999999999999999.trace");
  for (auto& l : lines) {
    if (l.rfind("locality\t", 0) == 0) l = "locality\t0\t1000000";
  }
  write_lines(file, lines);
  set = trace::load_trace(dir.str());
  EXPECT_EQ(set.expected, 1000000);
  ASSERT_EQ(set.problems.size(), 1u);
  EXPECT_EQ(set.problems[0],
            "localities 1 to 999999 of 1000000 wrote no trace (locality-1.trace to locality-999999.trace are "
            "missing): they failed or were stopped before the end of their run");
  EXPECT_FALSE(trace::report_html(set).empty());
}

TEST(Trace, MutatedFilesAreReadOrReportedNeverACrash) {
  TempDir dir;
  Program program(kProgram, "prog.tsl");
  traced_run(program, dir.str());
  fs::path file = dir.path / trace::locality_file_name(0);
  const std::vector<std::string> good = lines_of(file);
  const std::vector<std::string> values = {"-1", "-2", "0", "1", "2", "7", "65535", "2147483647", "-2147483648",
                                           "4294967296", "9223372036854775807", "-9223372036854775808",
                                           "99999999999999999999", "", "x", "1e3"};
  std::mt19937 rng(2024);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<std::string> lines = good;
    int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) {
      size_t at = 1 + rng() % (lines.size() - 1);
      std::string line = lines[at];
      std::vector<std::string> f;
      std::string part;
      std::istringstream in(line);
      while (std::getline(in, part, '\t')) f.push_back(part);
      switch (rng() % 4) {
        case 0:
        case 1:
          if (f.size() > 1) f[1 + rng() % (f.size() - 1)] = values[rng() % values.size()];
          break;
        case 2:
          f.resize(rng() % (f.size() + 1));
          break;
        default:
          lines.push_back(line);  // a record repeated at the end
          break;
      }
      std::string joined;
      for (size_t k = 0; k < f.size(); ++k) joined += (k ? "\t" : "") + f[k];
      lines[at] = joined;
    }
    write_lines(file, lines);
    try {
      trace::TraceSet set = trace::load_trace(dir.str());
      trace::report_html(set);
      trace::chrome_trace_json(set);
      trace::tree_dot(set);
      trace::counters_csv(set);
      trace::locality_stats(set);
      trace::step_phases(set);
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()).rfind("[report] ", 0), 0u) << e.what();
    }
  }
}

// Loop runs (l) and native compiles (x): read with every field checked, summed
// per loop by native_stats, drawn by the exports; a damaged one is a problem
// naming its line, and mutations of them never crash a reader.
TEST(Trace, LoopAndCompileRecordsAreReadAndChecked) {
  TempDir dir;
  Program program(kProgram, "prog.tsl");
  traced_run(program, dir.str());
  fs::path file = dir.path / trace::locality_file_name(0);
  std::vector<std::string> good = lines_of(file);
  std::string thread;
  for (const auto& line : good) {
    if (line.rfind("thread\t", 0) == 0) thread = line.substr(7, line.find('\t', 7) - 7);
  }
  ASSERT_FALSE(thread.empty());
  const std::vector<std::string> added = {
      "string\t900\tf.py:3",  // replaced below by the next free string index
      "x\t" + thread + "\t10\t5000010\tS\tS\t1\t0\t2048\t1000000\t2000000\t1500000",
      "x\t" + thread + "\t6000000\t6000500\tS\tS\t0\t1\t2048\t-1\t-1\t-1",
      "l\t" + thread + "\t5\t6000600\t-1\t-1\tS\t1\t0\t1",
      "l\t" + thread + "\t7000000\t7000100\t-1\t-1\tS\t13\t4\t2",
      "x\t" + thread + "\t8000000\t8003000\tS\tS\t4\t0\t0\t-1\t-1\t-1",  // a jit translation
  };
  int strings = 0;
  for (const auto& line : good) strings += line.rfind("string\t", 0) == 0;
  std::vector<std::string> lines = good;
  for (std::string a : added) {
    if (a.rfind("string\t", 0) == 0) {
      a = "string\t" + std::to_string(strings) + "\tf.py:3";
    } else {
      for (size_t at; (at = a.find("\tS")) != std::string::npos;) a.replace(at, 2, "\t" + std::to_string(strings));
    }
    lines.insert(lines.end() - 2, a);
  }
  good = lines;
  write_lines(file, good);
  trace::TraceSet set = trace::load_trace(dir.str());
  ASSERT_TRUE(set.problems.empty()) << set.problems.front();
  trace::NativeStats n = trace::native_stats(set);
  ASSERT_EQ(n.loops.size(), 1u);
  EXPECT_EQ(n.loops[0].name, "f.py:3");
  EXPECT_EQ(n.loops[0].runs, 2u);
  EXPECT_EQ(n.loops[0].native_runs, 2u);
  EXPECT_EQ(n.loops[0].general_runs, 1u);
  EXPECT_EQ(n.loops[0].rolled_back, 1u);
  EXPECT_EQ(n.loops[0].turns, 4u);
  EXPECT_EQ(n.compiled, 1u);
  EXPECT_EQ(n.disk_loads, 1u);
  EXPECT_EQ(n.compile_ns, 5000000);
  EXPECT_EQ(n.load_ns, 500);
  EXPECT_EQ(n.optimise_ns, 2000000);
  EXPECT_EQ(n.translated, 1u);
  EXPECT_EQ(n.translate_ns, 3000);
  std::string text = trace::native_report_text(n);
  EXPECT_NE(text.find("1 compiled in 5.0 ms (generate 1.0 ms, optimise 2.0 ms, codegen 1.5 ms); cache: 1 miss, "
                      "1 hit (1 from disk, 0 already loaded: 0.0 ms)"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.rfind("  jit translation: 1 program in 0.0 ms\n", 0), 0u) << text;
  EXPECT_NE(text.find("loop f.py:3: 5.0 ms of native code (partial compiled 5.0 ms, whole from disk 0.0 ms); 2 runs"),
            std::string::npos)
      << text;
  std::string chrome = trace::chrome_trace_json(set);
  EXPECT_NE(chrome.find("\"name\":\"native compile f.py:3\",\"cat\":\"compile\""), std::string::npos);
  EXPECT_NE(chrome.find("\"cache\":\"hit: disk cache\""), std::string::npos);
  EXPECT_NE(chrome.find("\"name\":\"loop f.py:3\",\"cat\":\"loop\""), std::string::npos);
  EXPECT_NE(chrome.find("\"name\":\"jit translation f.py:3\",\"cat\":\"compile\""), std::string::npos);
  EXPECT_NE(trace::summary_json(set).find("\"native\":{\"translated\":1,\"translate_ns\":3000,\"compiled\":1"),
            std::string::npos);

  auto damaged = [&](size_t added_index, size_t field, const std::string& value, const std::string& why) {
    std::vector<std::string> bad = good;
    size_t i = good.size() - 2 - (added.size() - added_index);
    std::vector<std::string> f;
    std::string part;
    std::istringstream in(bad[i]);
    while (std::getline(in, part, '\t')) f.push_back(part);
    f[field] = value;
    std::string joined;
    for (size_t k = 0; k < f.size(); ++k) joined += (k ? "\t" : "") + f[k];
    bad[i] = joined;
    write_lines(file, bad);
    trace::TraceSet s = trace::load_trace(dir.str());
    std::string all;
    for (const auto& p : s.problems) all += p + "\n";
    EXPECT_NE(all.find(error_message("damaged at line ", i + 1, " (", why)), std::string::npos) << all;
    trace::native_report_text(trace::native_stats(s));
    trace::chrome_trace_json(s);
  };
  damaged(1, 6, "9", "compile mode 9 is out of range (0 to 5)");
  damaged(1, 7, "-1", "compile source -1 is out of range (0 to 2)");
  damaged(1, 4, "77", "string 77 is not defined before this record");
  damaged(1, 10, "-5", "optimisation time -5 is out of range");
  damaged(2, 3, "1", "end time 1 is out of range");
  damaged(3, 7, "16", "loop flags 16 is out of range (0 to 15)");
  damaged(3, 9, "-1", "native call count -1 is out of range");
  damaged(3, 4, "3", "program 3 is not defined before this record");
  damaged(4, 1, "4242", "thread 4242 has no thread record");

  // Mutations of the new records: read or reported, never a crash.
  std::mt19937 rng(31);
  const std::vector<std::string> values = {"-1", "0", "1", "3", "4", "15", "16", "2147483648",
                                           "9223372036854775807", "", "x"};
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<std::string> bad = good;
    size_t i = good.size() - 2 - added.size() + 1 + rng() % (added.size() - 1);
    std::vector<std::string> f;
    std::string part;
    std::istringstream in(bad[i]);
    while (std::getline(in, part, '\t')) f.push_back(part);
    if (rng() % 3 == 0) {
      f.resize(rng() % f.size());
    } else {
      f[1 + rng() % (f.size() - 1)] = values[rng() % values.size()];
    }
    std::string joined;
    for (size_t k = 0; k < f.size(); ++k) joined += (k ? "\t" : "") + f[k];
    bad[i] = joined;
    write_lines(file, bad);
    trace::TraceSet s = trace::load_trace(dir.str());
    trace::native_report_text(trace::native_stats(s));
    trace::chrome_trace_json(s);
    trace::summary_json(s);
  }
}
