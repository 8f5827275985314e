// What `tessera run` works out about hosts: SLURM node lists (SLURM is not
// installed here, so its syntax is checked against what `scontrol show
// hostnames` prints), hostfiles, --hosts, forwarded variables.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <future>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tessera/cli/cluster.hpp"

using tessera::cli::expand_nodelist;
using V = std::vector<std::string>;

namespace {

std::string nodelist_error(const std::string& list) {
  try {
    expand_nodelist(list);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

// The error of read_hostfile(path), or "" when it reads the file.
std::string hostfile_error(const std::string& path) {
  try {
    tessera::cli::read_hostfile(path);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

std::string write_hostfile(const std::string& name, const std::string& text) {
  std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

}  // namespace

TEST(Nodelist, Expands) {
  EXPECT_EQ(expand_nodelist("node1"), V({"node1"}));
  EXPECT_EQ(expand_nodelist("node[1-3,5]"), V({"node1", "node2", "node3", "node5"}));
  EXPECT_EQ(expand_nodelist("gpu[08-11]"), V({"gpu08", "gpu09", "gpu10", "gpu11"}));
  EXPECT_EQ(expand_nodelist("a[1-2],login,b[7]"), V({"a1", "a2", "login", "b7"}));
  EXPECT_EQ(expand_nodelist("rack[1-2]-n[01-02]"),
            V({"rack1-n01", "rack1-n02", "rack2-n01", "rack2-n02"}));
  EXPECT_EQ(expand_nodelist("n[1-2].cluster.org"), V({"n1.cluster.org", "n2.cluster.org"}));
  EXPECT_EQ(expand_nodelist("n[001-3]"), V({"n001", "n002", "n003"}));
}

TEST(Nodelist, Errors) {
  auto error = [](const std::string& list, const std::string& what) {
    return "[run] cannot read the SLURM node list: " + what + " (SLURM_JOB_NODELIST='" + list +
           "')";
  };
  EXPECT_EQ(nodelist_error("node[1-3"), error("node[1-3", "'[' without ']'"));
  EXPECT_EQ(nodelist_error("node[3-1]"), error("node[3-1]", "the range '3-1' runs backwards"));
  EXPECT_EQ(nodelist_error("node[a-b]"),
            error("node[a-b]", "'a-b' is not a number or a range a-b"));
  EXPECT_EQ(nodelist_error("a,,b"), error("a,,b", "an empty host name"));
  EXPECT_EQ(nodelist_error("node[]"), error("node[]", "an empty range '[]'"));
  EXPECT_EQ(nodelist_error("node]1["), error("node]1[", "unbalanced brackets"));
  EXPECT_EQ(nodelist_error("n[1-2,]"), error("n[1-2,]", "an empty range in '[1-2,]'"));
  EXPECT_EQ(nodelist_error("n[1-999999]"),
            error("n[1-999999]", "it names 999999 hosts, more than the 65536 tessera run accepts"));
  // The variable the list came from is named.
  try {
    expand_nodelist("n[1", "SLURM_NODELIST");
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()),
              "[run] cannot read the SLURM node list: '[' without ']' (SLURM_NODELIST='n[1')");
  }
  // A long list is shown by its start.
  std::string long_list(300, 'a');
  EXPECT_EQ(nodelist_error(long_list + "]"),
            error(std::string(200, 'a') + "... (301 characters)", "unbalanced brackets"));
}

TEST(Hostfile, ReadsHostsOnce) {
  std::string path = ::testing::TempDir() + "tessera_hostfile_test";
  {
    std::ofstream f(path);
    f << "# cluster\nnode1 slots=2\n\n  node2 slots=4 max_slots=8  # big\nuser@node1\nnode3\n";
  }
  EXPECT_EQ(tessera::cli::read_hostfile(path), V({"node1", "node2", "node3"}));
  {
    std::ofstream f(path);
    f << "node1 slots=2\nnode2 speed=9\n";
  }
  try {
    tessera::cli::read_hostfile(path);
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()),
              "[run] --hostfile " + path +
                  ":2: 'speed=9' is not a setting Open MPI knows (slots=N, max_slots=N)");
  }
  std::remove(path.c_str());
  EXPECT_THROW(tessera::cli::read_hostfile(path), std::runtime_error);
}

TEST(Hosts, ParsesSlots) {
  EXPECT_EQ(tessera::cli::parse_hosts("a:2,b,c:4,a"), V({"a", "b", "c"}));
  EXPECT_THROW(tessera::cli::parse_hosts("a:x"), std::invalid_argument);
  EXPECT_THROW(tessera::cli::parse_hosts("a,,b"), std::invalid_argument);
  EXPECT_TRUE(tessera::cli::is_local_host("localhost"));
  std::string why;
  EXPECT_FALSE(tessera::cli::network_to_hosts({"localhost"}, why));
  EXPECT_EQ(why, "every host is this machine");
  EXPECT_FALSE(tessera::cli::network_to_hosts({"localhost", "no-such-host.invalid"}, why));
  EXPECT_EQ(why, "the host 'no-such-host.invalid' does not resolve to an IPv4 address here");
}

TEST(Environment, ForwardedByDefault) {
  for (const char* name : {"PYTHONPATH", "OMP_NUM_THREADS", "TESSERA_THREADS", "LD_LIBRARY_PATH"}) {
    EXPECT_TRUE(tessera::cli::forwarded_by_default(name)) << name;
  }
  for (const char* name : {"HOME", "PATH", "SECRET", "XOMP_X"})
    EXPECT_FALSE(tessera::cli::forwarded_by_default(name));
  EXPECT_TRUE(tessera::cli::valid_env_name("MY_VAR2"));
  EXPECT_FALSE(tessera::cli::valid_env_name("2X"));
  EXPECT_FALSE(tessera::cli::valid_env_name("A-B"));
  EXPECT_FALSE(tessera::cli::valid_env_name(""));
}

// The size of a node list is its product of ranges, known before expanding
// it: 'n[1-99999]x[1-99999]' (about 10^10 hosts) was expanded first and ran
// out of memory.
TEST(Nodelist, CountedBeforeExpansion) {
  EXPECT_EQ(nodelist_error("n[1-99999]x[1-99999]"),
            "[run] cannot read the SLURM node list: it names 9999800001 hosts, more than the "
            "65536 tessera run accepts (SLURM_JOB_NODELIST='n[1-99999]x[1-99999]')");
  // Too large for 64 bits, still counted without expanding anything.
  EXPECT_NE(nodelist_error("n[1-999999999]x[1-999999999]y[1-999999999]z[1-999999999]")
                .find("more than the 65536 tessera run accepts"),
            std::string::npos);
}

// The cap is on the whole list, not on each item: 3 x 60,000 hosts.
TEST(Nodelist, TotalHostCap) {
  EXPECT_EQ(nodelist_error("a[1-60000],b[1-60000],c[1-60000]"),
            "[run] cannot read the SLURM node list: it names 180000 hosts, more than the 65536 "
            "tessera run accepts (SLURM_JOB_NODELIST='a[1-60000],b[1-60000],c[1-60000]')");
  EXPECT_EQ(expand_nodelist("a[1-32768],b[1-32768]").size(), 65536u);
}

// Open MPI 4.1's mpirun crashes (stack smashing) on a host name whose part
// before the first '.' is longer than 56 characters.
TEST(Nodelist, HostNameLength) {
  std::string ok(56, 'a'), bad(57, 'a');
  EXPECT_EQ(expand_nodelist(ok + ".cluster.org"), V({ok + ".cluster.org"}));
  EXPECT_EQ(nodelist_error(std::string(55, 'a') + "[1-10]"),
            "[run] a host name is too long for Open MPI: '" + std::string(55, 'a') +
                "10' has 57 characters before its first '.', at most 56 work (mpirun crashes on "
                "longer ones) (SLURM_JOB_NODELIST)");
  // Names of megabytes are refused before the list is expanded.
  EXPECT_NE(nodelist_error(std::string(1 << 20, 'a') + "[1-65536]").find("more than a DNS name"),
            std::string::npos);
}

TEST(Hostfile, HostNameLengthNamesFileAndLine) {
  std::string ok(56, 'a'), bad(57, 'b');
  std::string path = write_hostfile("tessera_hostfile_long", "node1 slots=2\n" + ok +
                                                                 " slots=1\n\n" + bad +
                                                                 " slots=2\n");
  EXPECT_EQ(hostfile_error(path),
            "[run] a host name is too long for Open MPI: '" + bad +
                "' has 57 characters before its first '.', at most 56 work (mpirun crashes on "
                "longer ones) (--hostfile " +
                path + ":4)");
  std::ofstream(path) << "user@" << bad << ".example.org\n";
  EXPECT_NE(hostfile_error(path).find("(--hostfile " + path + ":1)"), std::string::npos);
  // Longer names are fine after the first '.' (Open MPI keeps only the first part).
  std::string fqdn = ok + "." + std::string(60, 'c') + "." + std::string(60, 'd');
  std::ofstream(path) << fqdn << "\n";
  EXPECT_EQ(tessera::cli::read_hostfile(path), V({fqdn}));
  // But no DNS label is longer than 63 characters.
  std::ofstream(path) << "node1\nnode." << std::string(64, 'e') << "\n";
  EXPECT_NE(hostfile_error(path).find("(--hostfile " + path + ":2)"), std::string::npos);
  std::remove(path.c_str());
}

TEST(Hostfile, TotalHostCap) {
  std::string text;
  for (int i = 0; i <= 65536; ++i) text += "n" + std::to_string(i) + "\n";
  std::string path = write_hostfile("tessera_hostfile_many", text);
  EXPECT_EQ(hostfile_error(path),
            "[run] too many hosts in the hostfile: more than the 65536 tessera run accepts "
            "(--hostfile " +
                path + ":65537)");
  std::remove(path.c_str());
}

// /dev/zero was read until memory ran out (2.1 GB); it is no regular file.
TEST(Hostfile, OnlyRegularFiles) {
  EXPECT_EQ(hostfile_error("/dev/zero"),
            "[run] the hostfile is not a regular file: a character device (--hostfile /dev/zero)");
  EXPECT_EQ(hostfile_error("/"), "[run] the hostfile is not a regular file: a directory "
                                 "(--hostfile /)");
}

// A FIFO blocked the launcher in open() until a writer came: it must be
// refused at once. The read runs in a thread of its own so that a hang
// fails the test instead of hanging it.
TEST(Hostfile, FifoDoesNotBlock) {
  std::string path = ::testing::TempDir() + "tessera_hostfile_fifo";
  std::remove(path.c_str());
  ASSERT_EQ(mkfifo(path.c_str(), 0600), 0);
  std::promise<std::string> error;
  auto got = error.get_future();
  std::thread([path, e = std::move(error)]() mutable { e.set_value(hostfile_error(path)); })
      .detach();
  if (got.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
    // Let the blocked reader go (it sees an empty file), then fail.
    int fd = open(path.c_str(), O_WRONLY | O_NONBLOCK);
    if (fd >= 0) close(fd);
    got.wait_for(std::chrono::seconds(5));
    std::remove(path.c_str());
    FAIL() << "read_hostfile blocked on a FIFO for 5 s";
  }
  EXPECT_EQ(got.get(),
            "[run] the hostfile is not a regular file: a FIFO (--hostfile " + path + ")");
  std::remove(path.c_str());
}

TEST(Hostfile, SizeCap) {
  std::string path = ::testing::TempDir() + "tessera_hostfile_big";
  {
    std::ofstream f(path);
    f << "node1\n";
  }
  ASSERT_EQ(truncate(path.c_str(), (16 << 20) + 1), 0);
  EXPECT_EQ(hostfile_error(path),
            "[run] the hostfile is too large: 16777217 bytes, at most 16777216 (--hostfile " +
                path + ")");
  std::remove(path.c_str());
}

TEST(Hosts, CapAndNameLength) {
  std::string bad(57, 'x');
  try {
    tessera::cli::parse_hosts("a:2," + bad + ":2");
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()),
              "[run] a host name is too long for Open MPI: '" + bad +
                  "' has 57 characters before its first '.', at most 56 work (mpirun crashes on "
                  "longer ones) (--hosts)");
  }
  std::string many;
  for (int i = 0; i <= 65536; ++i) many += (i ? ",h" : "h") + std::to_string(i);
  try {
    tessera::cli::parse_hosts(many);
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()),
              "[run] too many hosts: more than the 65536 tessera run accepts (--hosts)");
  }
}
