#include <gtest/gtest.h>

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
