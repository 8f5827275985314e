// Failure detection's settings and messages (the detection itself runs
// under mpirun: tests/distributed/failure_check.py).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "tessera/distributed/heartbeat.hpp"
#include "test_util.hpp"

namespace tessera::test {
namespace {

using distributed::detail::failure_timeout_seconds;
using distributed::detail::Ignored;
using distributed::detail::PeerFailure;

// A failure notice spread as the heartbeat threads spread it: every rank
// that learns of `subject`'s failure (the `detectors` by their own
// detection, the others from a notice) sends notice_targets() kNoticeCopies
// copies each, once; `lost(from, to, copy)` drops a datagram. The subject
// passes nothing on.
struct Spread {
  std::vector<int> hop;   // per rank: the hop it learned at (-1: never)
  std::vector<int> sent;  // per rank: the datagrams it sent (per address)
  int reached = 0;        // ranks told, the detectors included
  int hops = 0;           // the last hop at which a rank learned
};

Spread spread(int n, int subject, const std::vector<int>& detectors,
              const std::function<bool(int, int, int)>& lost) {
  using distributed::detail::kNoticeCopies;
  using distributed::detail::notice_targets;
  Spread s;
  s.hop.assign(n, -1);
  s.sent.assign(n, 0);
  std::vector<int> now;
  for (int d : detectors) {
    s.hop[d] = 0;
    now.push_back(d);
  }
  for (int hop = 1; !now.empty(); ++hop) {
    std::vector<int> next;
    for (int r : now) {
      ++s.reached;
      for (int t : notice_targets(r, n, subject)) {
        for (int copy = 0; copy < kNoticeCopies; ++copy) {
          ++s.sent[r];
          if (lost(r, t, copy) || t == subject || s.hop[t] >= 0) continue;
          s.hop[t] = hop;
          s.hops = hop;
          next.push_back(t);
        }
      }
    }
    now = std::move(next);
  }
  return s;
}

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

TEST(Heartbeat, NoticesRelayedAlongTheHeartbeatPeers) {
  // Every rank told within ceil(log2 N) hops, none sending more than
  // 2 ceil(log2 N) datagrams per address (it was 2(N - 1) from each rank
  // that noticed), whichever peer the rank that noticed watches.
  using distributed::detail::heartbeat_targets;
  using distributed::detail::heartbeat_watched;
  auto none = [](int, int, int) { return false; };
  for (int n = 2; n <= 1000; ++n) {
    const int log_n = ceil_log2(n);
    ASSERT_EQ(static_cast<int>(heartbeat_targets(0, n).size()), log_n) << n;
    for (int subject : heartbeat_watched(0, n)) {
      // One rank noticed (the others' detection later), or every rank that
      // watches the subject did.
      std::vector<int> watchers = heartbeat_watched(subject, n);  // they send to it
      for (int w : watchers) {
        auto t = heartbeat_targets(w, n);
        ASSERT_NE(std::find(t.begin(), t.end(), subject), t.end());
      }
      for (const auto& detectors : {std::vector<int>{0}, watchers}) {
        Spread s = spread(n, subject, detectors, none);
        ASSERT_EQ(s.reached, n - 1) << "N = " << n << ", subject " << subject;
        ASSERT_LE(s.hops, log_n) << "N = " << n << ", subject " << subject;
        ASSERT_LE(*std::max_element(s.sent.begin(), s.sent.end()), 2 * log_n) << "N = " << n;
        ASSERT_EQ(s.sent[subject], 0);
      }
    }
  }
}

TEST(Heartbeat, NoticesReachEveryRankWhenDatagramsAreLost) {
  // A rank hears from several that pass the notice on: it is told even when
  // every datagram from the first of them is lost, or one copy of each.
  using distributed::detail::heartbeat_watched;
  std::vector<int> sizes;
  for (int n = 8; n <= 64; ++n) sizes.push_back(n);
  for (int n : {100, 127, 128, 129, 255, 256, 500, 1000}) sizes.push_back(n);
  for (int n : sizes) {
    for (int subject : heartbeat_watched(0, n)) {
      Spread clean = spread(n, subject, {0}, [](int, int, int) { return false; });
      Spread half = spread(n, subject, {0}, [](int, int, int copy) { return copy == 0; });
      ASSERT_EQ(half.reached, n - 1) << "N = " << n;
      const int step = std::max(1, n / 40);
      for (int v = 1; v < n; v += step) {
        if (v == subject) continue;
        // The rank that first told v in the clean spread: a rank of the
        // hop before whose targets include v.
        int first = -1;
        for (int r = 0; r < n && first < 0; ++r) {
          if (clean.hop[r] != clean.hop[v] - 1 || r == subject) continue;
          auto t = distributed::detail::notice_targets(r, n, subject);
          if (std::find(t.begin(), t.end(), v) != t.end()) first = r;
        }
        ASSERT_GE(first, 0);
        Spread s = spread(n, subject, {0}, [&](int from, int to, int) {
          return from == first && to == v;
        });
        ASSERT_EQ(s.reached, n - 1) << "N = " << n << ", subject " << subject << ", lost "
                                    << first << " -> " << v;
      }
    }
  }
}

}  // namespace
}  // namespace tessera::test
