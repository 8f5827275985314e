// What `tessera run` works out about hosts: SLURM node lists (SLURM is not
// installed here, so its syntax is checked against what `scontrol show
// hostnames` prints), hostfiles, --hosts, forwarded variables.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>
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
  EXPECT_EQ(nodelist_error("node[1-3"),
            "[run] cannot read the SLURM node list 'node[1-3': '[' without ']'");
  EXPECT_EQ(nodelist_error("node[3-1]"),
            "[run] cannot read the SLURM node list 'node[3-1]': the range '3-1' runs backwards");
  EXPECT_EQ(
      nodelist_error("node[a-b]"),
      "[run] cannot read the SLURM node list 'node[a-b]': 'a-b' is not a number or a range a-b");
  EXPECT_EQ(nodelist_error("a,,b"),
            "[run] cannot read the SLURM node list 'a,,b': an empty host name");
  EXPECT_EQ(nodelist_error("node[]"),
            "[run] cannot read the SLURM node list 'node[]': an empty range '[]'");
  EXPECT_EQ(nodelist_error("node]1["),
            "[run] cannot read the SLURM node list 'node]1[': unbalanced brackets");
  EXPECT_EQ(nodelist_error("n[1-2,]"),
            "[run] cannot read the SLURM node list 'n[1-2,]': an empty range in '[1-2,]'");
  EXPECT_NE(nodelist_error("n[1-999999]"), "");
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
