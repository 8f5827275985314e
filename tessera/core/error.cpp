#include "tessera/core/error.hpp"
#include "tessera/core/recursion_error.hpp"

#include <new>

namespace tessera {

std::string SourceLoc::str() const {
  if (!valid()) return file.empty() ? "<unknown>" : file;
  const std::string& name = file.empty() ? std::string("<expr>") : file;
  // Column 0: the position came from a #line directive (generated code), so
  // only the line is meaningful.
  if (column <= 0) return error_message(name, ":", line);
  return error_message(name, ":", line, ":", column);
}

namespace {

bool has_location(const std::string& msg) { return msg.find(" (at ") != std::string::npos; }

std::string located(const std::string& msg, const SourceLoc& loc) {
  if (!loc.valid() || has_location(msg)) return msg;
  return msg + " (at " + loc.str() + ")";
}

}  // namespace

void rethrow_with_location(std::exception_ptr error, const SourceLoc& loc) {
  // Most derived first: each class keeps its kind so the Python binding can map it.
  try {
    std::rethrow_exception(error);
  } catch (const TypeError& e) {
    if (has_location(e.what()) || !loc.valid()) throw;
    throw TypeError(located(e.what(), loc));
  } catch (const SyntaxError& e) {
    if (has_location(e.what()) || !loc.valid()) throw;
    throw SyntaxError(located(e.what(), loc));
  } catch (const MemoryError& e) {
    if (has_location(e.what()) || !loc.valid()) throw;
    throw MemoryError(located(e.what(), loc));
  } catch (const Interrupted&) {
    throw;  // where it stopped is not an error of that line
  } catch (const AttributeError& e) {
    if (has_location(e.what()) || !loc.valid()) throw;
    throw AttributeError(located(e.what(), loc));
  } catch (const ZeroDivisionError& e) {
    if (has_location(e.what()) || !loc.valid()) throw;
    throw ZeroDivisionError(located(e.what(), loc));
  } catch (const std::invalid_argument& e) {
    if (has_location(e.what()) || !loc.valid()) throw;
    throw std::invalid_argument(located(e.what(), loc));
  } catch (const KeyError& e) {
    if (has_location(e.what()) || !loc.valid()) throw;
    throw KeyError(located(e.what(), loc));
  } catch (const std::out_of_range& e) {
    if (has_location(e.what()) || !loc.valid()) throw;
    throw std::out_of_range(located(e.what(), loc));
  } catch (const RecursionError& e) {
    if (has_location(e.what()) || !loc.valid()) throw;
    throw RecursionError(located(e.what(), loc));
  } catch (const std::bad_alloc&) {
    throw MemoryError(located("out of memory", loc));
  } catch (const std::overflow_error& e) {
    if (has_location(e.what()) || !loc.valid()) throw;
    throw std::overflow_error(located(e.what(), loc));
  } catch (const std::runtime_error& e) {
    if (has_location(e.what()) || !loc.valid()) throw;
    throw std::runtime_error(located(e.what(), loc));
  }
}

std::exception_ptr with_location(std::exception_ptr error, const SourceLoc& loc) {
  try {
    rethrow_with_location(error, loc);
  } catch (...) {
    return std::current_exception();
  }
}

std::string exception_message(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown error";
  }
}

}  // namespace tessera
