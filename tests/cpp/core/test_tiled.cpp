#include <gtest/gtest.h>

#include <random>

#include "tessera/core/tiled.hpp"
#include "tessera/core/value.hpp"

namespace tessera {
namespace {

Span box(std::vector<int64_t> start, std::vector<int64_t> stop) { return Span{std::move(start), std::move(stop)}; }

TEST(Tiled, SplitSpansFollowsArraySplit) {
  auto spans = split_spans({7, 3}, 0, 4);
  ASSERT_EQ(spans.size(), 4u);
  EXPECT_EQ(spans[0], box({0, 0}, {2, 3}));
  EXPECT_EQ(spans[2], box({4, 0}, {6, 3}));
  EXPECT_EQ(spans[3], box({6, 0}, {7, 3}));
  auto empty = split_spans({2, 5}, 0, 3);
  EXPECT_TRUE(empty[2].empty());
  EXPECT_EQ(split_spans({2, 5}, 1, 2)[1], box({0, 3}, {2, 5}));
  EXPECT_THROW(split_spans({2, 5}, 2, 2), std::invalid_argument);
}

TEST(Tiled, CheckSpansAcceptsPartitionsAndOverlaps) {
  EXPECT_NO_THROW(check_spans({7, 3}, split_spans({7, 3}, 0, 4), true, "t"));
  EXPECT_NO_THROW(check_spans({4, 4}, {box({0, 0}, {3, 4}), box({2, 0}, {4, 4})}, true, "t"));
  EXPECT_NO_THROW(check_spans({0, 4}, {box({0, 0}, {0, 4})}, true, "t"));
  EXPECT_NO_THROW(check_spans({}, {box({}, {})}, true, "t"));
}

TEST(Tiled, CheckSpansNamesTheUncoveredElement) {
  try {
    check_spans({4, 4}, {box({0, 0}, {2, 4}), box({2, 0}, {4, 3})}, true, "annotate_d");
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("[annotate_d] the tiling does not cover the array of shape (4, 4): "
                                         "element (2, 3) is in no locality's span"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(check_spans({4}, {box({0}, {5})}, false, "t"), std::invalid_argument);
  EXPECT_NO_THROW(check_spans({4}, {box({0}, {2})}, false, "t"));
}

// Brute force over the elements of a small array: the pair of lowest ranks
// whose spans share an element, and whether every element is in some span.
bool brute_overlap(const Shape& shape, const std::vector<Span>& spans) {
  for (size_t r = 0; r < spans.size(); ++r) {
    for (size_t q = r + 1; q < spans.size(); ++q) {
      bool shared = !spans[r].empty() && !spans[q].empty();
      for (int d = 0; shared && d < spans[r].ndim(); ++d) {
        shared = std::max(spans[r].start[d], spans[q].start[d]) < std::min(spans[r].stop[d], spans[q].stop[d]);
      }
      if (shared) return true;
    }
  }
  return false;
}

bool brute_covers(const Shape& shape, const std::vector<Span>& spans) {
  int64_t total = 1;
  for (int64_t s : shape) total *= s;
  for (int64_t i = 0; i < total; ++i) {
    std::vector<int64_t> at(shape.size());
    int64_t rest = i;
    for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
      at[d] = rest % shape[d];
      rest /= shape[d];
    }
    bool in_some = false;
    for (const Span& s : spans) {
      bool in = true;
      for (size_t d = 0; in && d < shape.size(); ++d) in = s.start[d] <= at[d] && at[d] < s.stop[d];
      in_some = in_some || in;
    }
    if (!in_some) return false;
  }
  return true;
}

// Random spans inside a random small array: grids of blocks (partitions),
// the same with one span moved or grown (overlaps, gaps), and free boxes.
TEST(Tiled, FindOverlapAndCoverAgreeWithBruteForce) {
  std::mt19937 gen(7);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(gen); };
  for (int trial = 0; trial < 3000; ++trial) {
    const int nd = static_cast<int>(pick(1, 3));
    Shape shape(nd);
    for (auto& s : shape) s = pick(0, 6);
    std::vector<Span> spans;
    if (trial % 3 != 2) {  // a grid: cuts per dimension
      std::vector<std::vector<int64_t>> cuts(nd);
      for (int d = 0; d < nd; ++d) {
        cuts[d] = {0, shape[d]};
        for (int k = pick(0, 2); k > 0; --k) cuts[d].push_back(pick(0, shape[d]));
        std::sort(cuts[d].begin(), cuts[d].end());
      }
      std::vector<size_t> idx(nd, 0);
      for (;;) {
        Span s;
        for (int d = 0; d < nd; ++d) {
          s.start.push_back(cuts[d][idx[d]]);
          s.stop.push_back(cuts[d][idx[d] + 1]);
        }
        spans.push_back(s);
        int d = nd - 1;
        while (d >= 0 && ++idx[d] + 1 >= cuts[d].size()) idx[d--] = 0;
        if (d < 0) break;
      }
      std::shuffle(spans.begin(), spans.end(), gen);
      if (trial % 3 == 1 && !spans.empty()) {  // disturb one span
        Span& s = spans[pick(0, static_cast<int64_t>(spans.size()) - 1)];
        int d = static_cast<int>(pick(0, nd - 1));
        s.start[d] = pick(0, s.stop[d]);
        s.stop[d] = pick(s.start[d], shape[d]);
      }
    } else {
      for (int k = static_cast<int>(pick(1, 6)); k > 0; --k) {
        Span s;
        for (int d = 0; d < nd; ++d) {
          s.start.push_back(pick(0, shape[d]));
          s.stop.push_back(pick(s.start.back(), shape[d]));
        }
        spans.push_back(s);
      }
    }
    const bool overlap = brute_overlap(shape, spans);
    auto found = find_overlap(spans);
    ASSERT_EQ(found.has_value(), overlap) << "trial " << trial;
    if (found) {
      ASSERT_TRUE(brute_overlap(shape, {spans[found->first], spans[found->second]}))
          << "trial " << trial;
    }
    EXPECT_EQ(Spans(spans).disjoint(), !overlap);
    const bool covers = brute_covers(shape, spans);
    bool accepted = true;
    try {
      check_spans(shape, spans, true, "t");
    } catch (const std::invalid_argument& e) {
      accepted = false;
      EXPECT_NE(std::string(e.what()).find("is in no locality's span"), std::string::npos) << e.what();
    }
    ASSERT_EQ(accepted, covers) << "trial " << trial;
  }
}

// The uncovered element a slab tiling (rows with a gap) names is the first
// one not covered.
TEST(Tiled, CheckSpansNamesTheGapOfRows) {
  try {
    check_spans({6, 2}, {box({0, 0}, {2, 2}), box({3, 0}, {6, 2})}, true, "annotate_d");
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("element (2, 0) is in no locality's span"), std::string::npos) << e.what();
  }
}

// Copies of a tiled array share one span table; a new table is made only
// when the spans are assigned.
TEST(Tiled, CopiesShareTheirSpans) {
  TiledArray t;
  t.shape = {8, 3};
  t.spans = split_spans(t.shape, 0, 4);
  TiledArray u = t;
  EXPECT_EQ(&t.spans.vec(), &u.spans.vec());
  EXPECT_TRUE(u.same_tiling(t));
  u.spans = split_spans(t.shape, 0, 4);
  EXPECT_NE(&t.spans.vec(), &u.spans.vec());
  EXPECT_TRUE(u.same_tiling(t));  // equal by value too
  u.spans = split_spans(t.shape, 1, 4);
  EXPECT_FALSE(u.same_tiling(t));
}

TEST(Tiled, ValueHoldsATiledArray) {
  TiledArray t;
  t.tile = Array(DType::float64, {2, 3});
  t.shape = {4, 3};
  t.spans = split_spans(t.shape, 0, 2);
  t.locality = 1;
  t.tiling = "rows";
  Value v(t);
  EXPECT_TRUE(v.is_tiled());
  EXPECT_EQ(v.kind_name(), "tiled array");
  EXPECT_EQ(v.describe(), "tiled float64 array of shape (4, 3), rows over 2 localities");
  EXPECT_NE(v.str().find("locality 1 holds [2:4, 0:3]"), std::string::npos) << v.str();
  EXPECT_THROW(v.truthy(), std::invalid_argument);
  EXPECT_TRUE(v.equals(Value(t)));
  t.locality = 0;
  EXPECT_FALSE(v.equals(Value(t)));
}

}  // namespace
}  // namespace tessera
