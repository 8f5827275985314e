// The text family: format() against Python's own format() (the expected
// strings were produced by CPython 3.11 for these values and specs), str(),
// repr() and the UTF-8 helpers.
#include <cmath>
#include <limits>

#include "tessera/core/error.hpp"
#include "tessera/primitives/text.hpp"
#include "test_util.hpp"

using namespace tessera;
using namespace tessera::test;

namespace {

Value dict_of(std::vector<std::pair<Value, Value>> items) {
  Dict d;
  for (auto& [k, v] : items) d.set(k, v);
  return Value(std::move(d));
}

struct FormatCase {
  Value value;
  std::string spec;
  std::string expected;
};

TEST(TextFormat, MatchesPythonFormat) {
  const std::vector<FormatCase> cases = {
      {Value(0x1.921fb53c8d4f1p+1), ".4f", "3.1416"},
      {Value(0x1.921fb53c8d4f1p+1), ".2e", "3.14e+00"},
      {Value(0x1.2d687e4189375p+20), ",", "1,234,567.891"},
      {Value(0x1.2d687e4189375p+20), ",.2f", "1,234,567.89"},
      {Value(0x1.02e7ef70994ddp-13), "", "0.000123456"},
      {Value(0x1.1c37937e08000p+53), "", "1e+16"},
      {Value(0x1.4f8b588e368f1p-17), "", "1e-05"},
      {Value(0x1.b69b4ba630f35p+56), "", "1.2345678901234568e+17"},
      {Value(0x1.999999999999ap-4), "", "0.1"},
      {Value(-0.0), "", "-0.0"},
      {Value(0x1.4000000000000p+1), ".0f", "2"},
      {Value(0x1.c000000000000p+1), ".0f", "4"},
      {Value(0x1.8000000000000p+0), ".0", "2e+00"},
      {Value(0x1.ec00000000000p+6), ".3", "1.23e+02"},
      {Value(0x1.8000000000000p+3), ".3", "12.0"},
      {Value(0x1.9000000000000p+6), ".3", "1e+02"},
      {Value(0x1.0000000000000p-1), "%", "50.000000%"},
      {Value(0x1.f9a6b50b0f27cp-4), ".1%", "12.3%"},
      {Value(0x1.249ad2594c37dp+332), "g", "1e+100"},
      {Value(0x1.e240000000000p+16), "g", "123456"},
      {Value(0x1.2d68700000000p+20), "g", "1.23457e+06"},
      {Value(0x1.a36e2eb1c432dp-14), "g", "0.0001"},
      {Value(0x1.4f8b588e368f1p-17), "g", "1e-05"},
      {Value(0x1.0000000000000p+0), "#.3g", "1.00"},
      {Value(0x1.ec00000000000p+6), "#.3g", "123."},
      {Value(std::numeric_limits<double>::infinity()), "010", "0000000inf"},
      {Value(-std::numeric_limits<double>::infinity()), "+", "-inf"},
      {Value(std::nan("")), "E", "NAN"},
      {Value(std::nan("")), ">6", "   nan"},
      {Value(-0x1.8000000000000p+0), "z.0f", "-2"},
      {Value(-0x1.0624dd2f1a9fcp-10), "z.2f", "0.00"},
      {Value(0x1.921f9f01b866ep+1), "10.3f", "     3.142"},
      {Value(0x1.921f9f01b866ep+1), "<10.3f", "3.142     "},
      {Value(0x1.921f9f01b866ep+1), "^10.3f", "  3.142   "},
      {Value(-0x1.921f9f01b866ep+1), "=10.3f", "-    3.142"},
      {Value(-0x1.921f9f01b866ep+1), "010.3f", "-00003.142"},
      {Value(0x1.921f9f01b866ep+1), "+.2f", "+3.14"},
      {Value(0x1.921f9f01b866ep+1), " .2f", " 3.14"},
      {Value(0x1.34a0000000000p+10), "012,.2f", "0,001,234.50"},
      {Value(0x1.34a0000000000p+10), "_.1f", "1_234.5"},
      {Value(0x1.0000000000000p+1), "#.0f", "2."},
      {Value(0x1.0000000000000p+1), "#.0e", "2.e+00"},
      {Value(0x1.0f0cf064dd592p+73), ".3E", "1.000E+22"},
      {Value(0x0.0000000000001p-1022), "", "5e-324"},
      {Value(0x1.fffffffffffffp+1023), "", "1.7976931348623157e+308"},
      {Value(0x1.3333333333333p-2), ".20f", "0.29999999999999998890"},
      {Value(0x1.5555555555555p-2), ".17g", "0.33333333333333331"},
      {Value(0x1.5555555555555p-2), "", "0.3333333333333333"},
      {Value(0x1.81cd6c8b43958p+13), "n", "12345.7"},
      {Value(0x1.1c37937e08000p+53), ".16", "1e+16"},
      {Value(0x1.1c3791a131b00p+53), "", "9999999000000000.0"},
      {Value(int64_t{42}), "", "42"},
      {Value(int64_t{42}), "5d", "   42"},
      {Value(int64_t{42}), "<5d", "42   "},
      {Value(int64_t{42}), "^5", " 42  "},
      {Value(int64_t{42}), "*^7", "**42***"},
      {Value(int64_t{-42}), "=+8", "-     42"},
      {Value(int64_t{-42}), "08", "-0000042"},
      {Value(int64_t{42}), "+d", "+42"},
      {Value(int64_t{42}), " d", " 42"},
      {Value(int64_t{255}), "x", "ff"},
      {Value(int64_t{255}), "#X", "0XFF"},
      {Value(int64_t{255}), "#o", "0o377"},
      {Value(int64_t{5}), "#b", "0b101"},
      {Value(int64_t{5}), "08b", "00000101"},
      {Value(int64_t{1234567}), ",", "1,234,567"},
      {Value(int64_t{1234567}), "_", "1_234_567"},
      {Value(int64_t{1234}), "010,", "00,001,234"},
      {Value(int64_t{-1234}), "010,", "-0,001,234"},
      {Value(int64_t{3735928559}), "_x", "dead_beef"},
      {Value(int64_t{3735928559}), "#_x", "0xdead_beef"},
      {Value(int64_t{65}), "c", "A"},
      {Value(int64_t{233}), "c", "\xc3""\xa9"""},
      {Value(int64_t{42}), ".2f", "42.00"},
      {Value(int64_t{42}), "e", "4.200000e+01"},
      {Value(int64_t{42}), "%", "4200.000000%"},
      {Value(int64_t{42}), "g", "42"},
      {Value(std::numeric_limits<int64_t>::min()), "", "-9223372036854775808"},
      {Value(std::numeric_limits<int64_t>::min()), "x", "-8000000000000000"},
      {Value(int64_t{7}), "n", "7"},
      {Value(true), "", "True"},
      {Value(false), "", "False"},
      {Value(true), ">5", "    1"},
      {Value(true), "d", "1"},
      {Value(true), ".2f", "1.00"},
      {Value(std::string("hi")), "", "hi"},
      {Value(std::string("hi")), ">10", "        hi"},
      {Value(std::string("hi")), "<10", "hi        "},
      {Value(std::string("hi")), "^7", "  hi   "},
      {Value(std::string("hi")), "*^7", "**hi***"},
      {Value(std::string("hello")), ".3", "hel"},
      {Value(std::string("hello")), "10.3s", "hel       "},
      {Value(std::string("ab")), "05", "ab000"},
      {Value(std::string("h\xc3""\xa9""")), ">4", "  h\xc3""\xa9"""},
      {Value(std::string("x")), "\xc3""\xa9"">3", "\xc3""\xa9""\xc3""\xa9""x"},
      {Value(std::string("abc")), "s", "abc"},
      {Value(), "", "None"},
      {Value(List{Value(int64_t{1}), Value(std::string("a")), Value(0x1.4000000000000p+1), Value(), Value(true)}), "", "[1, 'a', 2.5, None, True]"},
      {Value::tuple(List{Value(int64_t{1})}), "", "(1,)"},
      {Value::tuple(List{Value(int64_t{1}), Value(std::string("b"))}), "", "(1, 'b')"},
      {dict_of({{Value(std::string("a")), Value(int64_t{1})}, {Value(int64_t{2}), Value(std::string("x"))}}), "", "{'a': 1, 2: 'x'}"},
  };
  for (const FormatCase& c : cases) {
    std::string got;
    try {
      got = format_value(c.value, c.spec);
    } catch (const std::exception& e) {
      got = std::string("error: ") + e.what();
    }
    EXPECT_EQ(got, c.expected) << c.value.describe() << " with spec '" << c.spec << "'";
  }
}

TEST(TextFormat, TheZeroFlagFillsWithZerosWhateverTheAlignment) {
  // Expected strings from CPython 3.11's format().
  EXPECT_EQ(format_value(Value(int64_t{5}), "<05"), "50000");
  EXPECT_EQ(format_value(Value("ab"), ">05"), "000ab");
  EXPECT_EQ(format_value(Value(5.5), "^08"), "005.5000");
  EXPECT_EQ(format_value(Value(int64_t{-5}), "<06"), "-50000");
  EXPECT_EQ(format_value(Value(int64_t{1234}), "<010,"), "1,23400000");
  EXPECT_EQ(format_value(Value(int64_t{12}), "x<05"), "12xxx");
  EXPECT_EQ(format_value(Value(std::numeric_limits<double>::infinity()), "+012,.14"), "+00000000inf");
  EXPECT_EQ(format_value(Value(std::nan("")), ",.3f"), "nan");
  EXPECT_EQ(format_value(Value(1e16), "#"), "1.e+16");
  EXPECT_EQ(format_value(Value(5e-324), "0=#13"), "0000005.e-324");
}

TEST(TextFormat, ZeroDimensionalArraysFormatAsNumPyScalars) {
  EXPECT_EQ(format_value(Array::scalar(0.1f, DType::float32), ".10f"), "0.1000000015");
  EXPECT_EQ(format_value(Array::scalar(1.5), ".2f"), "1.50");
  EXPECT_EQ(format_value(Array::scalar_int(42), "05d"), "00042");
  EXPECT_EQ(format_value(Array::scalar_bool(true), ">5"), "    1");
  EXPECT_EQ(format_value(Array::scalar(0.1f, DType::float32), ""), "0.1");
  // NumPy's str of float32 scalars: an exponent from 1e6 on.
  EXPECT_EQ(python_str(Array::scalar(999999.0, DType::float32)), "999999.0");
  EXPECT_EQ(python_str(Array::scalar(1234567.0, DType::float32)), "1.234567e+06");
  EXPECT_EQ(python_str(Array::scalar(1e-4, DType::float32)), "1e-04");
}

TEST(TextFormat, ErrorsAreThoseOfPython) {
  EXPECT_TRUE(throws_with<std::invalid_argument>([] { format_value(Value(0x1.0000000000000p+0), "d"); },
                                   "[format] Unknown format code 'd' for object of type 'float'"));
  EXPECT_TRUE(throws_with<std::invalid_argument>([] { format_value(Value(0x1.0000000000000p+0), "abc"); },
                                   "[format] Invalid format specifier 'abc' for object of type 'float'"));
  EXPECT_TRUE(throws_with<std::invalid_argument>([] { format_value(Value(int64_t{1}), ".2d"); },
                                   "[format] Precision not allowed in integer format specifier"));
  EXPECT_TRUE(throws_with<std::invalid_argument>([] { format_value(Value(int64_t{1}), ",x"); },
                                   "[format] Cannot specify ',' with 'x'."));
  EXPECT_TRUE(throws_with<std::invalid_argument>([] { format_value(Value(std::string("s")), "+"); },
                                   "[format] Sign not allowed in string format specifier"));
  EXPECT_TRUE(throws_with<std::invalid_argument>([] { format_value(Value(std::string("s")), "="); },
                                   "[format] '=' alignment not allowed in string format specifier"));
  EXPECT_TRUE(throws_with<std::invalid_argument>([] { format_value(Value(std::string("s")), "#"); },
                                   "[format] Alternate form (#) not allowed in string format specifier"));
  EXPECT_TRUE(throws_with<std::invalid_argument>([] { format_value(Value(std::string("s")), ","); },
                                   "[format] Cannot specify ',' with 's'."));
  EXPECT_TRUE(throws_with<std::invalid_argument>([] { format_value(Value(0x1.0000000000000p+0), ".f"); },
                                   "[format] Format specifier missing precision"));
  EXPECT_TRUE(throws_with<std::invalid_argument>([] { format_value(Value(int64_t{1}), ",_"); },
                                   "[format] Cannot specify both ',' and '_'."));
  EXPECT_TRUE(throws_with<TypeError>([] { format_value(Value(), ">5"); },
                                   "[format] unsupported format string passed to NoneType.__format__"));
  EXPECT_TRUE(throws_with<TypeError>([] { format_value(Value(List{Value(int64_t{1})}), "d"); },
                                   "[format] unsupported format string passed to list.__format__"));
  EXPECT_TRUE(throws_with<TypeError>([] { format_value(f64({1, 2}, {2}), ".2f"); },
                                     "[format] unsupported format string passed to "
                                     "numpy.ndarray.__format__"));
  EXPECT_TRUE(throws_with<std::overflow_error>([] { format_value(Value(int64_t{-1}), "c"); },
                                               "[format] %c arg not in range(0x110000)"));
}

TEST(TextFormat, ThePrimitive) {
  EXPECT_EQ(call("format", {Value(2.0 / 3.0), Value(".3f")}).as_string(), "0.667");
  EXPECT_EQ(call("format", {Value(int64_t{7})}).as_string(), "7");
  EXPECT_EQ(call("repr", {Value("it's")}).as_string(), "\"it's\"");
}

TEST(TextStr, PythonForms) {
  EXPECT_EQ(python_str(Value()), "None");
  EXPECT_EQ(python_str(Value(true)), "True");
  EXPECT_EQ(python_str(Value(1e16)), "1e+16");
  EXPECT_EQ(python_str(Value(3.0)), "3.0");
  EXPECT_EQ(python_str(Value(List{Value("a"), Value(), Value(0.5)})), "['a', None, 0.5]");
  EXPECT_EQ(python_str(Value::tuple(List{int64_t{1}})), "(1,)");
  EXPECT_EQ(python_str(Value::tuple(List{})), "()");
  EXPECT_EQ(python_str(dict_of({{Value("k"), Value(Value::tuple(List{int64_t{1}, int64_t{2}}))}})),
            "{'k': (1, 2)}");
  EXPECT_EQ(python_repr(Value("a'b\"c\n")), "'a\\'b\"c\\n'");
  EXPECT_EQ(python_repr(Value("\x01")), "'\\x01'");
  // Python escapes the characters str.isprintable() refuses (U+3000, U+00A0, U+200B,
  // U+E0001) and prints the others (é, U+1F600) as they are.
  EXPECT_EQ(python_repr(Value("a\u3000b\u00a0\u200b\U000E0001\u00e9\U0001F600")),
            "'a\\u3000b\\xa0\\u200b\\U000e0001\u00e9\U0001F600'");
  EXPECT_EQ(python_repr(Array::scalar(0.5)), "np.float64(0.5)");
  EXPECT_EQ(python_repr(Array::scalar_bool(false)), "np.False_");
  EXPECT_EQ(python_str(Array::scalar_int(3)), "3");
  EXPECT_TRUE(throws_with<TypeError>([] { python_repr(f64({1, 2}, {2})); }, "[repr] repr() of an array"));
}

TEST(TextMethods, StringMethodsAsPythons) {
  auto strs = [](std::vector<std::string> v) {
    List l;
    for (auto& s : v) l.emplace_back(s);
    return Value(std::move(l));
  };
  EXPECT_TRUE(call("str_split", {Value(" a  b ")}).equals(strs({"a", "b"})));
  EXPECT_TRUE(call("str_split", {Value(" a b c  "), Value(), Value(int64_t{1})}).equals(strs({"a", "b c  "})));
  EXPECT_TRUE(call("str_split", {Value("a,,b"), Value(",")}).equals(strs({"a", "", "b"})));
  EXPECT_TRUE(call("str_split", {Value("x\xc2\xa0y")}).equals(strs({"x", "y"})));  // U+00A0 is a space
  EXPECT_EQ(call("str_join", {Value("-"), strs({"a", "b"})}).as_string(), "a-b");
  EXPECT_EQ(call("str_strip", {Value("xxaxx"), Value("x")}).as_string(), "a");
  EXPECT_EQ(call("str_rstrip", {Value(" a ")}).as_string(), " a");
  EXPECT_EQ(call("str_upper", {Value("aB1")}).as_string(), "AB1");
  EXPECT_TRUE(call("str_endswith", {Value("abc"), Value::tuple(List{Value("x"), Value("bc")})}).as_bool());
  EXPECT_EQ(call("str_replace", {Value("a-b-c"), Value("-"), Value("+"), Value(int64_t{1})}).as_string(),
            "a+b-c");
  EXPECT_EQ(call("str_replace", {Value("ab"), Value(""), Value("|")}).as_string(), "|a|b|");
  EXPECT_EQ(call("str_find", {Value("h\xc3\xa9llo"), Value("l")}).as_int(), 2);
  EXPECT_TRUE(throws_with<std::invalid_argument>([] { call("str_split", {Value("a"), Value("")}); },
                                                 "[str_split] argument 'sep' is an empty separator"));
  EXPECT_TRUE(throws_with<std::invalid_argument>([] { call("str_lower", {Value("\xc3\x89")}); },
                                                 "[str_lower] changing the case of non-ASCII text"));
}

TEST(TextPercent, PrintfStyle) {
  EXPECT_EQ(percent_format("%5.2f|%-4s|%03d|%%", Value::tuple(List{Value(3.14159), Value("a"), Value(int64_t{7})})),
            " 3.14|a   |007|%");
  EXPECT_EQ(percent_format("%d", Value(3.9)), "3");
  EXPECT_TRUE(throws_with<TypeError>([] { percent_format("%d %d", Value(int64_t{1})); },
                                     "[mod] not enough arguments for format string"));
  EXPECT_TRUE(throws_with<TypeError>([] { percent_format("%x", Value(1.5)); },
                                     "%x format: an integer is required, not float"));
}

TEST(TextUtf8, CountsCharacters) {
  const std::string s = "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80";
  EXPECT_EQ(utf8_length(s), 4);
  std::vector<std::string> chars = utf8_chars(s);
  ASSERT_EQ(chars.size(), 4u);
  EXPECT_EQ(chars[2], "\xe2\x82\xac");
  EXPECT_EQ(call("len", {Value(s)}).as_int(), 4);
}

}  // namespace
