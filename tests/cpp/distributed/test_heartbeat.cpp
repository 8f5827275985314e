// Failure detection's settings and messages (the detection itself runs
// under mpirun: tests/distributed/failure_check.py).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "tessera/distributed/heartbeat.hpp"

namespace tessera::test {
namespace {

using distributed::detail::failure_timeout_seconds;
using distributed::detail::Ignored;
using distributed::detail::PeerFailure;

struct FailureTimeoutEnv {
  explicit FailureTimeoutEnv(const char* v) {
    if (v) {
      setenv("TESSERA_FAILURE_TIMEOUT", v, 1);
    } else {
      unsetenv("TESSERA_FAILURE_TIMEOUT");
    }
  }
  ~FailureTimeoutEnv() { unsetenv("TESSERA_FAILURE_TIMEOUT"); }
};

TEST(Heartbeat, FailureTimeoutSetting) {
  struct Case {
    const char* env;
    double seconds;
  };
  for (Case c : {Case{nullptr, 30}, Case{"", 30}, Case{"5", 5}, Case{"2.5", 2.5}, Case{"0", 0},
                 Case{"off", 0}}) {
    FailureTimeoutEnv env(c.env);
    EXPECT_EQ(failure_timeout_seconds(), c.seconds) << (c.env ? c.env : "(unset)");
  }
  for (const char* bad : {"abc", "-1", "5s", "inf", "nan"}) {
    FailureTimeoutEnv env(bad);
    try {
      failure_timeout_seconds();
      ADD_FAILURE() << bad << " was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(
          std::string(e.what()),
          std::string(
              "[locality] TESSERA_FAILURE_TIMEOUT must be a number of seconds (0 or 'off' turns "
              "failure detection off), got '") +
              bad + "'");
    }
  }
}

PeerFailure failure(int rank, int noticed_by, int self, bool cut_off = false) {
  PeerFailure f;
  f.rank = rank;
  f.host = "node3 (10.0.0.3)";
  f.silent = 5.24;
  f.noticed_by = noticed_by;
  f.self = self;
  f.cut_off = cut_off;
  f.timeout = 5;
  if (cut_off) f.peers = {1, 2};
  return f;
}

TEST(Heartbeat, FailureMessagesNameTheRankAndItsHost) {
  EXPECT_EQ(failure(3, 0, 0).message(),
            "rank 3 on host node3 (10.0.0.3) has not been heard from for 5.2 s, more than "
            "TESSERA_FAILURE_TIMEOUT=5 s (it stopped, died, or its network link is down)");
  EXPECT_EQ(failure(3, 1, 0).message(),
            "rank 3 on host node3 (10.0.0.3) has not been heard from for 5.2 s, more than "
            "TESSERA_FAILURE_TIMEOUT=5 s (it stopped, died, or its network link is down; noticed "
            "by rank 1)");
  EXPECT_EQ(
      failure(0, 1, 0).message(),
      "rank 1 has not heard from this rank, rank 0 on host node3 (10.0.0.3), for 5.2 s, more than "
      "TESSERA_FAILURE_TIMEOUT=5 s: this process was stopped, or its network link is down");
  EXPECT_EQ(failure(0, 0, 0, true).message(),
            "this rank, rank 0 on host node3 (10.0.0.3), has heard from none of the ranks it "
            "watches (1, 2) for "
            "5.2 s, more than TESSERA_FAILURE_TIMEOUT=5 s: its network link is probably down, or "
            "they all stopped");
  EXPECT_EQ(failure(2, 2, 0, true).message(),
            "rank 2 on host node3 (10.0.0.3) has heard from none of the ranks it watches for 5.2 "
            "s, more than "
            "TESSERA_FAILURE_TIMEOUT=5 s: its network link is probably down");
}

TEST(Heartbeat, MarkerForTheLauncher) {
  EXPECT_EQ(failure(3, 1, 0).marker(),
            "tessera-run-peer-failed: rank=3 host=node3 addr=10.0.0.3 silent=5.2 by=1 cutoff=0");
  PeerFailure f = failure(2, 2, 0, true);
  f.host = "node2";
  EXPECT_EQ(f.marker(),
            "tessera-run-peer-failed: rank=2 host=node2 addr=- silent=5.2 by=2 cutoff=1");
}

TEST(Heartbeat, WhatWasIgnoredIsCountedByReason) {
  Ignored i;
  i.junk = 3;
  i.forged = 400;
  i.replayed = 12;
  i.misaddressed = 8;
  EXPECT_EQ(i.total(), 423u);
  EXPECT_EQ(i.message(1, "127.0.0.1:40321"),
            "tessera: warning: [locality] rank 1 ignored 423 heartbeat datagrams on "
            "127.0.0.1:40321: 3 junk, 400 forged (MAC did not match), 12 replayed or of another "
            "launch, 8 from an address other than the sender's (see docs/security.md, "
            "Heartbeats)");
}

// The secret leaves the environment: removed for child processes, and its
// characters overwritten where they were. (Once per process: the only test
// here that takes it.)
TEST(Heartbeat, JobKeyIsTakenOutOfTheEnvironment) {
  std::string key(64, 'a');
  setenv(distributed::detail::kJobKeyEnv, key.c_str(), 1);
  const char* where = std::getenv(distributed::detail::kJobKeyEnv);
  ASSERT_NE(where, nullptr);
  distributed::detail::take_job_key_from_environment();
  EXPECT_EQ(std::getenv(distributed::detail::kJobKeyEnv), nullptr);
  // glibc keeps the strings setenv made: `where` is still readable.
  EXPECT_EQ(std::string(where), std::string(64, '0'));
}

}  // namespace
}  // namespace tessera::test
