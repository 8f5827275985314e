// Python's text forms of Values: str(), repr() and format() with the format
// mini-language (format(x, ".4f"), f"{x:>10}"), and the UTF-8 helpers that
// let strings count characters as Python does.
#pragma once

#include <string>
#include <vector>

#include "tessera/core/value.hpp"

namespace tessera {

// Python's str(v): None, True, 0.1, 'a' inside lists, (1,) for tuples, arrays
// as NumPy prints them.
std::string python_str(const Value& v);
// Python's repr(v): strings quoted ('a', "it's"), the rest as python_str.
std::string python_repr(const Value& v);
// Python's type name of a Value for messages ("NoneType", "str", "list",
// "numpy.ndarray", ...).
std::string python_type_name(const Value& v);

// Python's format(v, spec): the format mini-language
// [[fill]align][sign][z][#][0][width][grouping][.precision][type] for ints,
// floats (and bools and 0-d arrays, as NumPy scalars format), strings; an
// empty spec gives str(v) for any value. Bad specs raise ValueError and
// values that take no spec TypeError, with Python's messages, named by `op`.
std::string format_value(const Value& v, const std::string& spec, const char* op = "format");

// Python's printf-style formatting: `fmt % args` (%d %i %u %o %x %X %e %E %f %F
// %g %G %c %s %r %%, flags #0- +, width, precision, %(name)s with a dict);
// a tuple gives the positional arguments, any other value is the only one.
std::string percent_format(const std::string& fmt, const Value& args, const char* op = "mod");

// The characters (code points) of a UTF-8 string, each as its own string.
std::vector<std::string> utf8_chars(const std::string& s);
// The number of code points of a UTF-8 string (Python's len).
int64_t utf8_length(const std::string& s);

}  // namespace tessera
