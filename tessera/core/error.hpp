// Error types of tessera and the source positions they point at.
//
// Errors are ordinary C++ exceptions so that they travel through futures and
// map onto Python's exception classes: std::invalid_argument -> ValueError,
// TypeError -> TypeError, KeyError -> KeyError, std::out_of_range -> IndexError, MemoryError ->
// MemoryError, everything else derived from std::runtime_error -> RuntimeError.
// Messages follow "[op] what was wrong: values received (at file:line:col)".
#pragma once

#include <cstdint>
#include <exception>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace tessera {

// A position in a source text: file name (or "<expr>"), 1-based line and
// column; column 0 stands for "the whole line" (positions set by #line).
struct SourceLoc {
  std::string file;
  int line = 0;
  int column = 0;

  bool valid() const { return line > 0; }
  std::string str() const;
};

// Wrong type of an argument (a string where an array was expected, ...).
class TypeError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// An attribute a value does not have (Python's AttributeError: `t.append(v)`
// on a tuple).
class AttributeError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// A division (or modulo) by zero that Python reports: of an integer (NumPy
// gives 0 with a warning, tessera reports it), or of two Python floats
// (Python's ZeroDivisionError; NumPy's float64 gives inf). An
// invalid_argument for C++ callers, Python's ZeroDivisionError through the
// binding.
class ZeroDivisionError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// A key missing from a dict (Python's KeyError; an out_of_range so that C++
// callers may treat it as any failed lookup).
class KeyError : public std::out_of_range {
 public:
  using std::out_of_range::out_of_range;
};

// The program text does not parse or refers to unknown names.
class SyntaxError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// An allocation that cannot be satisfied (huge shapes).
class MemoryError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// An evaluation stopped by an interrupt (Ctrl-C, see runtime/interrupt.hpp):
// KeyboardInterrupt in Python. Keeps its type when a location is added.
class Interrupted : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Builds a message from streamable parts: error_message("[add] bad: ", 3).
template <class... Parts>
std::string error_message(Parts&&... parts) {
  std::ostringstream os;
  (os << ... << std::forward<Parts>(parts));
  return os.str();
}

// Rethrows `error` as the same kind of exception with " (at LOC)" appended,
// unless the message already carries a location. Never returns.
[[noreturn]] void rethrow_with_location(std::exception_ptr error, const SourceLoc& loc);

// Returns a copy of `error` with the location appended (see rethrow_with_location).
std::exception_ptr with_location(std::exception_ptr error, const SourceLoc& loc);

// Returns the message of an exception_ptr (for reporting at the outer boundary).
std::string exception_message(std::exception_ptr error);

}  // namespace tessera
