#include <gtest/gtest.h>

#include "tessera/lang/parser.hpp"
#include "test_util.hpp"

using namespace tessera;
using tessera::test::throws_with;

namespace {
std::string roundtrip(const std::string& text) { return parse_expression(text)->str(); }
}  // namespace

TEST(LangParser, OperatorPrecedenceAndAssociativity) {
  EXPECT_EQ(roundtrip("1 + 2 * 3"), "add(1, multiply(2, 3))");
  EXPECT_EQ(roundtrip("(1 + 2) * 3"), "multiply(add(1, 2), 3)");
  EXPECT_EQ(roundtrip("a - b - c"), "subtract(subtract(a, b), c)");
  EXPECT_EQ(roundtrip("2 ** 3 ** 2"), "power(2, power(3, 2))");
  EXPECT_EQ(roundtrip("-x ** 2"), "negative(power(x, 2))");
  EXPECT_EQ(roundtrip("a < b && c >= d || !e"),
            "__or__(__and__(less(a, b), greater_equal(c, d)), logical_not(e))");
  EXPECT_EQ(roundtrip("a == b != c"), "not_equal(equal(a, b), c)");
  EXPECT_EQ(roundtrip("x @ w + b"), "add(matmul(x, w), b)");
  EXPECT_EQ(roundtrip("a % b / c"), "divide(mod(a, b), c)");
}

TEST(LangParser, LiteralsCallsAndNamedArguments) {
  EXPECT_EQ(roundtrip("-3"), "-3");
  EXPECT_EQ(roundtrip("1.5e3"), "1500.0");
  EXPECT_EQ(roundtrip("\"a\\nb\""), "\"a\nb\"");
  EXPECT_EQ(roundtrip("'single'"), "\"single\"");
  EXPECT_EQ(roundtrip("sum(x, axis=1, keepdims=true)"), "sum(x, axis=1, keepdims=true)");
  EXPECT_EQ(roundtrip("[[1, 2], [3, 4]]"), "[[1, 2], [3, 4]]");
  EXPECT_EQ(roundtrip("f(1)(2)"), "(f(1))(2)");
  EXPECT_EQ(roundtrip("f(a, b,)"), "f(a, b)");
  EXPECT_EQ(roundtrip("nil"), "nil");
  EXPECT_EQ(roundtrip("true"), "true");
}

TEST(LangParser, IndexingSugar) {
  EXPECT_EQ(roundtrip("x[1, 2:3, ::-1]"), "getitem(x, 1, slice(2, 3, nil), slice(nil, nil, -1))");
  EXPECT_EQ(roundtrip("shape(x)[0]"), "getitem(shape(x), 0)");
  EXPECT_EQ(roundtrip("x[:, i + 1:]"), "getitem(x, slice(nil, nil, nil), slice(add(i, 1), nil, nil))");
  EXPECT_EQ(roundtrip("m[0][1]"), "getitem(getitem(m, 0), 1)");
  // With a space, `[` starts a new expression (top-level expressions are space-separated).
  auto prog = parse_program("f(x) [1, 2]");
  ASSERT_EQ(prog.size(), 2u);
  EXPECT_EQ(prog[1]->str(), "[1, 2]");
  EXPECT_TRUE(throws_with<SyntaxError>([] { parse_program("x[]"); }, "empty index"));
}

TEST(LangParser, CommentsAndPositions) {
  auto prog = parse_program("// a comment\ndefine(x, 1)  // trailing\n  x + 2\n", "t.tsl");
  ASSERT_EQ(prog.size(), 2u);
  EXPECT_EQ(prog[0]->loc.line, 2);
  EXPECT_EQ(prog[0]->loc.column, 1);
  EXPECT_EQ(prog[1]->loc.line, 3);
  EXPECT_EQ(prog[1]->loc.column, 5);  // the operator's position
  EXPECT_EQ(prog[1]->args[0].value->loc.column, 3);
}

TEST(LangParser, ErrorsNamePositionAndToken) {
  EXPECT_TRUE(throws_with<SyntaxError>([] { parse_program("f(1, 2", "a.tsl"); },
                                       "expected ',' or ')', found end of input (at a.tsl:1:7)"));
  EXPECT_TRUE(throws_with<SyntaxError>([] { parse_program("1 +\n  )", "b.tsl"); },
                                       "unexpected ')' (at b.tsl:2:3)"));
  EXPECT_TRUE(throws_with<SyntaxError>([] { parse_program("\"abc", "c.tsl"); },
                                       "unterminated string literal (at c.tsl:1:1)"));
  EXPECT_TRUE(throws_with<SyntaxError>([] { parse_program("x $ y"); },
                                       "unexpected character '$' (at <expr>:1:3)"));
  EXPECT_TRUE(throws_with<SyntaxError>([] { parse_program("99999999999999999999"); },
                                       "too large for int64"));
  EXPECT_TRUE(throws_with<SyntaxError>([] { parse_program("12abc"); }, "invalid number literal"));
  EXPECT_TRUE(throws_with<SyntaxError>([] { parse_expression("1 2"); }, "unexpected '2'"));
}

TEST(LangParser, DeepNestingIsAnErrorNotACrash) {
  std::string deep(100000, '(');
  EXPECT_TRUE(throws_with<SyntaxError>([&] { parse_program(deep); }, "nested more than 256 levels deep"));
  std::string minus(100000, '-');
  EXPECT_TRUE(throws_with<SyntaxError>([&] { parse_program(minus + "1"); }, "nested more than 256 levels deep"));
}

TEST(LangParser, ShortChainsAreTreesLongOnesSequences) {
  // Up to kChainSegment terms: the tree of calls, as it reads.
  EXPECT_EQ(roundtrip("a + b - c + d"), "add(subtract(add(a, b), c), d)");
  std::string eight = "t1 + t2 + t3 + t4 + t5 + t6 + t7 + t8";
  static_assert(kChainSegment == 8);
  EXPECT_EQ(roundtrip(eight),
            "add(add(add(add(add(add(add(t1, t2), t3), t4), t5), t6), t7), t8)");
  // Longer: steps of kChainSegment terms in a variable no program can name.
  EXPECT_EQ(roundtrip(eight + " - t9 * u + t10"),
            "block(define(chain#1, add(add(add(add(add(add(add(t1, t2), t3), t4), t5), t6), t7), "
            "t8)), add(subtract(chain#1, multiply(t9, u)), t10))");
  EXPECT_EQ(roundtrip("f(" + eight + " + t9, " + eight + " + t9)"),
            "f(block(define(chain#1, add(add(add(add(add(add(add(t1, t2), t3), t4), t5), t6), "
            "t7), t8)), add(chain#1, t9)), block(define(chain#2, add(add(add(add(add(add(add(t1, "
            "t2), t3), t4), t5), t6), t7), t8)), add(chain#2, t9)))");
  // A chain is one level of nesting, however long.
  std::string chain = "1";
  for (int i = 0; i < 100000; ++i) chain += " + 1";
  std::string nested = chain;
  for (int i = 0; i < kMaxExpressionDepth - 2; ++i) nested = "abs(" + nested + ")";
  EXPECT_NO_THROW(parse_program(nested));
  // Nesting in right operands too (two recursions of the parser a level).
  std::string right = "x";
  for (int i = 0; i < kMaxExpressionDepth - 1; ++i) right = "1 + (" + right + ")";
  EXPECT_NO_THROW(parse_program(right));
  EXPECT_TRUE(throws_with<SyntaxError>([&] { parse_program("1 + (" + right + ")"); },
                                       "nested 257 levels deep: the limit is 256"));
  EXPECT_TRUE(throws_with<SyntaxError>([&] { parse_program("abs(" + nested + ")"); },
                                       "nested 257 levels deep: the limit is 256"));
}

TEST(LangParser, UnicodeIdentifiersAsPythonHasThem) {
  EXPECT_EQ(roundtrip("größe + α * 名前"), "add(größe, multiply(α, 名前))");
  EXPECT_EQ(roundtrip("f(σ=1, _x2ñ=2)"), "f(σ=1, _x2ñ=2)");
  // Combining marks and digits continue a name (XID_Continue).
  EXPECT_EQ(roundtrip("e\xcc\x81t\xc3\xa9\xd9\xa3"), "e\xcc\x81t\xc3\xa9\xd9\xa3");
  // Columns count characters, not bytes.
  EXPECT_TRUE(throws_with<SyntaxError>([] { parse_program("αβγ + $", "u.tsl"); },
                                       "unexpected character '$' (at u.tsl:1:7)"));
  EXPECT_TRUE(throws_with<SyntaxError>([] { parse_program("\"日本\" + (", "u.tsl"); },
                                       "unexpected end of input (at u.tsl:1:9)"));
  // What Python refuses in a name is refused, by name and code point.
  EXPECT_TRUE(throws_with<SyntaxError>([] { parse_program("a × b", "u.tsl"); },
                                       "unexpected character '×' (U+00D7) (at u.tsl:1:3)"));
  EXPECT_TRUE(throws_with<SyntaxError>([] { parse_program("x + \xd9\xa3", "u.tsl"); },
                                       "(U+0663) (at u.tsl:1:5)"));  // a digit cannot start one
  EXPECT_TRUE(throws_with<SyntaxError>([] { parse_program("a\xc2\xa0+ b", "u.tsl"); },
                                       "(U+00A0) (at u.tsl:1:2)"));  // no-break space
  EXPECT_TRUE(
      throws_with<SyntaxError>([] { parse_program("1α"); }, "invalid number literal '1α"));
  // Invalid UTF-8 is an error at its position.
  for (const char* bad : {"ab\xff", "ab\xc3", "ab\xc0\x80", "ab\xed\xa0\x80", "ab\xf4\x90\x80\x80",
                          "ab\x80", "ab\xe0\x80\x80"}) {
    EXPECT_TRUE(throws_with<SyntaxError>([&] { parse_program(std::string("x + ") + bad, "u.tsl"); },
                                         "invalid UTF-8: byte 0x"))
        << bad;
  }
  EXPECT_TRUE(throws_with<SyntaxError>([] { parse_program("α\n  β\xff", "u.tsl"); },
                                       "invalid UTF-8: byte 0xFF (at u.tsl:2:4)"));
  // Strings and comments hold any bytes, as before.
  EXPECT_EQ(roundtrip("\"\xff→\" // \xfe"), "\"\xff→\"");
}
