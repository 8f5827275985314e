#include <gtest/gtest.h>

#include "tessera/core/error.hpp"
#include "test_util.hpp"

using namespace tessera;

TEST(Registry, EveryPrimitiveIsWellFormed) {
  for (const std::string& p : registry_problems()) ADD_FAILURE() << p;
  auto all = all_primitives();
  EXPECT_GT(all.size(), 150u);
  for (const PrimitiveSpec* s : all) {
    EXPECT_FALSE(s->help.empty()) << s->name;
    EXPECT_FALSE(s->family.empty()) << s->name;
    EXPECT_TRUE(static_cast<bool>(s->eval)) << s->name;
  }
}

TEST(Registry, BindingChecksArity) {
  const PrimitiveSpec* range = find_primitive("range");
  ASSERT_NE(range, nullptr);
  EXPECT_EQ(range->signature(), "range(start, stop=nil, step=1)");
  EXPECT_EQ(bind_arguments(*range, {"", "step"}), (std::vector<int>{0, 2}));
  EXPECT_TRUE(test::throws_with<std::invalid_argument>([&] { bind_arguments(*range, {"", "", "", ""}); },
                                                       "[range] takes at most 3 arguments but 4 were given"));
  EXPECT_TRUE(test::throws_with<std::invalid_argument>([&] { bind_arguments(*range, {"", "start"}); },
                                                       "[range] argument 'start' given more than once"));
  EXPECT_TRUE(test::throws_with<SyntaxError>([&] { bind_arguments(*range, {"stop", ""}); },
                                             "positional argument follows a named argument"));
  auto similar = similar_primitive_names("rnage");
  ASSERT_FALSE(similar.empty());
  EXPECT_EQ(similar.front(), "range");
}
