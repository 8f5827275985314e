// What every fuzz target checks besides the sanitizers: bad input ends in
// one of tessera's errors (std::invalid_argument, std::out_of_range or
// std::runtime_error and their subclasses) whose message starts with the
// op tag "[op]". Anything else (another exception, an untagged message)
// aborts, which libFuzzer reports as a crash with the input that caused it.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <string>

namespace tessera::fuzz {

[[noreturn]] inline void fail(const char* what, const std::string& message) {
  std::fprintf(stderr, "fuzz: %s: %s\n", what, message.c_str());
  std::abort();
}

// Runs fn; returns true when it returned, false when it raised a proper
// tessera error.
template <class F>
bool expect_clean_error(F&& fn) {
  try {
    fn();
    return true;
  } catch (const std::invalid_argument& e) {
    if (e.what()[0] != '[') fail("ValueError without an op tag", e.what());
  } catch (const std::out_of_range& e) {
    if (e.what()[0] != '[') fail("IndexError without an op tag", e.what());
  } catch (const std::runtime_error& e) {
    if (e.what()[0] != '[') fail("RuntimeError without an op tag", e.what());
  } catch (const std::exception& e) {
    fail("foreign exception", e.what());
  } catch (...) {
    fail("foreign exception", "not a std::exception");
  }
  return false;
}

}  // namespace tessera::fuzz
