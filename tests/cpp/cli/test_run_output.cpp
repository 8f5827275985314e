// The output side of `tessera run` driven directly (OutputFilter): thousands
// of ranks' lines under the common descriptor limit, logs opened as ranks
// write and closed least recently used first, and mpirun's tags parsed
// without regular expressions.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tessera/cli/run_output.hpp"

namespace {

namespace fs = std::filesystem;
using tessera::cli::OutputFilter;
using tessera::cli::OutputOptions;

struct TempDir {
  fs::path path;
  TempDir() {
    char templ[] = "/tmp/tessera-run-output-XXXXXX";
    path = mkdtemp(templ);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

int open_descriptors() {
  int n = 0;
  for (const auto& e : fs::directory_iterator("/proc/self/fd")) {
    (void)e;
    ++n;
  }
  return n;
}

std::string tagged(int rank, bool err, const std::string& text) {
  return "[1," + std::to_string(rank) + "]<" + (err ? "stderr" : "stdout") + ">:" + text;
}

// Lowers the soft descriptor limit for the test's span.
struct DescriptorLimit {
  rlimit old{};
  explicit DescriptorLimit(rlim_t soft) {
    getrlimit(RLIMIT_NOFILE, &old);
    rlimit lim = old;
    lim.rlim_cur = std::min(soft, old.rlim_max);
    setrlimit(RLIMIT_NOFILE, &lim);
  }
  ~DescriptorLimit() { setrlimit(RLIMIT_NOFILE, &old); }
};

}  // namespace

TEST(RunOutput, TwoThousandRanksUnderTheDescriptorLimit) {
  // `-n 2048 --output-dir` under `ulimit -n 1024`: opening every log at start
  // failed (EMFILE) before the job began.
  TempDir dir;
  constexpr int kRanks = 2048;
  DescriptorLimit limit(1024);
  const int before = open_descriptors();
  OutputOptions opt;
  opt.ranks = kRanks;
  opt.output_dir = dir.path.string();
  OutputFilter filter(opt);
  int peak = 0;
  size_t peak_logs = 0;
  for (int round = 0; round < 3; ++round) {
    std::string out, err;
    for (int r = 0; r < kRanks; ++r) {
      // Ranks in an order that is not the ranks' (every log closed and
      // reopened between rounds), with one line split over two chunks.
      int rank = (r * 7 + round) % kRanks;
      if (rank == 5) {
        out += tagged(rank, false, "round " + std::to_string(round) + " of ");
        out += tagged(6, false, "rank 6 interrupts\n");
        out += tagged(rank, false, "rank 5\n");
        continue;
      }
      out += tagged(rank, false, "round " + std::to_string(round) + " of rank " +
                                     std::to_string(rank) + "\n");
      if (rank % 100 == 3)
        err += tagged(rank, true, "ValueError: rank " + std::to_string(rank) + "\n");
    }
    // In pieces, as a pipe delivers them.
    for (size_t at = 0; at < out.size(); at += 4096)
      filter.feed(1, out.data() + at, std::min<size_t>(4096, out.size() - at));
    filter.feed(2, err.data(), err.size());
    peak = std::max(peak, open_descriptors() - before);
    peak_logs = std::max(peak_logs, filter.open_logs());
  }
  filter.finish();
  EXPECT_GT(peak_logs, 1u);
  EXPECT_LE(peak_logs, 512u);  // half the limit
  EXPECT_LE(peak, 513);        // the logs and the directory listing at most
  EXPECT_FALSE(filter.failure_seen());
  for (int rank = 0; rank < kRanks; ++rank) {
    // Each stream's lines in order; stdout and stderr are separate pipes, so
    // only each stream's order is kept.
    std::string want_out, want_err;
    for (int round = 0; round < 3; ++round) {
      want_out += "round " + std::to_string(round) + " of rank " + std::to_string(rank) + "\n";
      if (rank % 100 == 3) want_err += "ValueError: rank " + std::to_string(rank) + "\n";
    }
    std::string got_out, got_err;
    int interruptions = 0;
    std::istringstream lines(read(dir.path / ("rank-" + std::to_string(rank) + ".log")));
    for (std::string l; std::getline(lines, l);) {
      if (l == "rank 6 interrupts") {
        ++interruptions;
      } else {
        (l.rfind("ValueError", 0) == 0 ? got_err : got_out) += l + "\n";
      }
    }
    ASSERT_EQ(got_out, want_out) << "rank-" << rank << ".log";
    ASSERT_EQ(got_err, want_err) << "rank-" << rank << ".log";
    ASSERT_EQ(interruptions, rank == 6 ? 3 : 0) << "rank-" << rank << ".log";
  }
}

TEST(RunOutput, LogsOpenedAsRanksWriteAndReopenedToAppend) {
  TempDir dir;
  {
    std::ofstream old(dir.path / "rank-2.log");
    old << "an older run's\n";
    std::ofstream other(dir.path / "rank-02.log");
    other << "not a log\n";
  }
  OutputOptions opt;
  opt.ranks = 5;
  opt.output_dir = dir.path.string();
  opt.max_open_logs = 2;
  opt.launches = 2;
  {
    OutputFilter filter(opt);
    // Nothing is opened before a rank writes; the older run's log is gone.
    EXPECT_EQ(filter.open_logs(), 0u);
    EXPECT_FALSE(fs::exists(dir.path / "rank-2.log"));
    EXPECT_TRUE(fs::exists(dir.path / "rank-02.log"));
    std::string out;
    for (int rank : {0, 1, 2, 0, 3, 0, 1})
      out += tagged(rank, false, "line of rank " + std::to_string(rank) + "\n");
    // A rank the job does not have gets no log.
    out += tagged(7, false, "not a rank of this job\n");
    filter.feed(1, out.data(), out.size());
    EXPECT_EQ(filter.open_logs(), 2u);
    filter.finish();
  }
  auto lines_of = [&](int rank) {
    return read(dir.path / ("rank-" + std::to_string(rank) + ".log"));
  };
  const std::string header = lines_of(4);
  ASSERT_EQ(header.rfind("=== launch 1 of 2, ", 0), 0u) << header;
  ASSERT_EQ(std::count(header.begin(), header.end(), '\n'), 1);
  EXPECT_EQ(lines_of(0), header + "line of rank 0\nline of rank 0\nline of rank 0\n");
  EXPECT_EQ(lines_of(1), header + "line of rank 1\nline of rank 1\n");
  EXPECT_EQ(lines_of(2), header + "line of rank 2\n");
  // The second launch appends after a header of its own.
  opt.launch = 2;
  {
    OutputFilter filter(opt);
    std::string out = tagged(1, false, "again\n");
    filter.feed(1, out.data(), out.size());
    filter.finish();
  }
  std::string second = lines_of(1).substr(header.size() + 30);
  EXPECT_NE(second.find("=== launch 2 of 2, "), std::string::npos) << lines_of(1);
  EXPECT_EQ(second.substr(second.find('\n') + 1), "again\n") << lines_of(1);
  EXPECT_NE(lines_of(4).find("=== launch 2 of 2, "), std::string::npos);
  EXPECT_FALSE(fs::exists(dir.path / "rank-7.log"));
}

TEST(RunOutput, PlantedLinkIsRefusedBeforeTheJob) {
  TempDir dir;
  fs::create_symlink("/etc/passwd", dir.path / "rank-1.log");
  OutputOptions opt;
  opt.ranks = 2;
  opt.output_dir = dir.path.string();
  try {
    OutputFilter filter(opt);
    FAIL() << "a planted link was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "[run] cannot write a rank's log: '" + dir.path.string() +
                                         "/rank-1.log' is not a regular file (--output-dir " +
                                         dir.path.string() + ")");
  }
}

TEST(RunOutput, TagsParsedWithoutRegularExpressions) {
  using tessera::cli::parse_tag;
  auto t = parse_tag("[1,12]<stderr>:text");
  EXPECT_EQ(t.rank, 12);
  EXPECT_TRUE(t.err);
  EXPECT_EQ(t.length, std::string("[1,12]<stderr>:").size());
  EXPECT_EQ(parse_tag("[1,0]<stdout>:").length, std::string("[1,0]<stdout>:").size());
  for (const char* no : {"[1,2]<stdin>:x", "[1,]<stdout>:", "[,2]<stdout>:", " [1,2]<stdout>:",
                         "[1,2]<stdout>", "[1,2] <stdout>:", "[a,2]<stdout>:", ""})
    EXPECT_EQ(parse_tag(no).length, 0u) << no;
  // A rank beyond int is no tag: the line is mpirun's (it was an uncaught
  // std::out_of_range from std::stoi, which ended the launcher).
  EXPECT_EQ(parse_tag("[1,99999999999]<stdout>:x").length, 0u);
  OutputOptions opt;
  opt.ranks = 2;
  OutputFilter filter(opt);
  std::string line = "[1,99999999999]<stdout>:x\n";
  EXPECT_NO_THROW(filter.feed(1, line.data(), line.size()));

  using tessera::cli::log_name_rank;
  EXPECT_EQ(log_name_rank("rank-0.log"), 0);
  EXPECT_EQ(log_name_rank("rank-2047.log"), 2047);
  for (const char* no : {"rank-007.log", "rank-.log", "rank-1.log.old", "rank-x.log",
                         "rank-99999999999999999999.log", "xrank-1.log"})
    EXPECT_EQ(log_name_rank(no), -1) << no;

  using tessera::cli::is_error_line;
  for (const char* yes : {"ValueError: bad", "[RuntimeError] x", "MyException", "OSError"})
    EXPECT_TRUE(is_error_line(yes)) << yes;
  for (const char* no : {"Errors happen", "ValueErrorX: y", "  ValueError: z", "", "[", "error: x"})
    EXPECT_FALSE(is_error_line(no)) << no;
}

TEST(RunOutput, MpirunMessagesReadWithoutRegularExpressions) {
  OutputOptions opt;
  opt.ranks = 4;
  OutputFilter filter(opt);
  std::string text =
      "--------------------------------------------------------------------------\n"
      "Primary job  terminated normally, but 1 process returned\n"
      "--------------------------------------------------------------------------\n"
      "mpirun detected that one or more processes exited with non-zero status\n"
      "  Process name: [[4321,1],3]\n"
      "  Exit code:    7\n";
  filter.feed(2, text.data(), text.size());
  filter.finish();
  auto report = filter.failure_report(7);
  ASSERT_FALSE(report.empty());
  EXPECT_EQ(report.back(), "tessera run: rank 3 of 4 failed (exit code 7): (no error message)");
  OutputFilter lost(opt);
  text = "  Remote daemon: [[4321,0],1] on node node2\n";
  lost.feed(2, text.data(), text.size());
  EXPECT_EQ(lost.failure(), "lost host node2");
  OutputFilter tcp(opt);
  text =
      "Open MPI failed to TCP connect to a peer MPI process.  This should not happen.\n"
      "  Local host:   node1\n"
      "  PID:          42\n"
      "  Message:      connect() to 10.1.0.2:1024 failed\n";
  tcp.feed(2, text.data(), text.size());
  EXPECT_EQ(tcp.failure(), "cannot connect");
  auto said = tcp.failure_report(1);
  ASSERT_EQ(said.size(), 1u);
  EXPECT_NE(said[0].find("the ranks on node1 cannot connect to 10.1.0.2:1024,"), std::string::npos)
      << said[0];
  OutputFilter killed(opt);
  text = "mpirun noticed that process rank 2 with PID 77 on node n3 exited on signal 9 (Killed).\n" +
         tagged(2, true, "tessera-run-rank-ended: pid=77 status=0 signal=9 forwarded=0\n");
  killed.feed(2, text.data(), text.size());
  said = killed.failure_report(137);
  ASSERT_EQ(said.size(), 1u);
  EXPECT_EQ(said[0],
            "tessera run: rank 2 of 4 (pid 77) was killed by signal 9 (SIGKILL); the other ranks "
            "were stopped");
}
