// Helpers shared by the C++ tests: building arrays from literals and
// comparing results against hand-checked values.
#pragma once

#include <gtest/gtest.h>
#include <pthread.h>
#include <sys/wait.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <exception>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "tessera/core/array.hpp"
#include "tessera/core/value.hpp"
#include "tessera/primitives/registry.hpp"

namespace tessera::test {

// What a shell command did: its exit status (-1 when it did not exit) and
// everything it wrote on its standard output (redirect stderr: "2>&1").
struct CommandResult {
  int status = -1;
  std::string out;
};

inline CommandResult run_command(const std::string& command) {
  CommandResult r;
  FILE* p = popen(command.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

// A float64 array of the given shape from values (row-major).
inline Array f64(std::vector<double> v, Shape shape = {}) {
  return Array::from_vector<double>(v, shape);
}
inline Array f32(std::vector<float> v, Shape shape = {}) {
  return Array::from_vector<float>(v, shape);
}
inline Array i64(std::vector<int64_t> v, Shape shape = {}) {
  return Array::from_vector<int64_t>(v, shape);
}
inline Array b8(std::vector<bool> v, Shape shape = {}) {
  Array a(DType::bool_, shape.empty() && v.size() != 1 ? Shape{int64_t(v.size())} : shape);
  for (size_t i = 0; i < v.size(); ++i) a.data<bool>()[i] = v[i];
  return a;
}

// Checks dtype, shape and every element (floats within rtol/atol; NaNs equal).
inline ::testing::AssertionResult array_eq(const Value& got, DType dtype, Shape shape,
                                           std::vector<double> expected, double rtol = 1e-6,
                                           double atol = 1e-9) {
  if (!got.is_array()) {
    return ::testing::AssertionFailure() << "expected an array, got " << got.describe();
  }
  const Array& a = got.as_array();
  if (a.dtype() != dtype) {
    return ::testing::AssertionFailure()
           << "dtype " << dtype_name(a.dtype()) << " != expected " << dtype_name(dtype);
  }
  if (a.shape() != shape) {
    return ::testing::AssertionFailure()
           << "shape " << shape_str(a.shape()) << " != expected " << shape_str(shape);
  }
  if (static_cast<size_t>(a.size()) != expected.size()) {
    return ::testing::AssertionFailure() << "test bug: " << expected.size() << " expected values";
  }
  for (int64_t i = 0; i < a.size(); ++i) {
    double g = a.get_double(i), e = expected[i];
    if (std::isnan(e) && std::isnan(g)) continue;
    if (std::isinf(e) && g == e) continue;
    if (!(std::fabs(g - e) <= atol + rtol * std::fabs(e))) {
      return ::testing::AssertionFailure()
             << "element " << i << ": got " << g << ", expected " << e << "\n got " << a.str();
    }
  }
  return ::testing::AssertionSuccess();
}

// Expects `fn` to throw exception type E whose message contains `needle`.
template <class E, class F>
::testing::AssertionResult throws_with(F&& fn, const std::string& needle) {
  try {
    fn();
  } catch (const E& e) {
    std::string msg = e.what();
    if (msg.find(needle) == std::string::npos) {
      return ::testing::AssertionFailure() << "message '" << msg << "' lacks '" << needle << "'";
    }
    return ::testing::AssertionSuccess();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "wrong exception type: " << e.what();
  }
  return ::testing::AssertionFailure() << "no exception thrown";
}

// Runs fn on a thread with a stack of `bytes`; rethrows what it throws.
inline void on_stack(size_t bytes, const std::function<void()>& fn) {
  struct Job {
    const std::function<void()>* fn;
    std::exception_ptr error;
  } job{&fn, nullptr};
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  ASSERT_EQ(pthread_attr_setstacksize(&attr, bytes), 0);
  pthread_t t;
  auto body = [](void* p) -> void* {
    auto* j = static_cast<Job*>(p);
    try {
      (*j->fn)();
    } catch (...) {
      j->error = std::current_exception();
    }
    return nullptr;
  };
  ASSERT_EQ(pthread_create(&t, &attr, body, &job), 0);
  pthread_join(t, nullptr);
  pthread_attr_destroy(&attr);
  if (job.error) std::rethrow_exception(job.error);
}

// 1 MB; sanitizers' redzones make every frame several times larger.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr size_t kSmallStack = size_t{4} << 20;
#else
inline constexpr size_t kSmallStack = size_t{1} << 20;
#endif

// Calls a primitive with positional values (shorthand for tests).
inline Value call(const char* name, std::vector<Value> args) {
  return call_primitive(name, std::move(args));
}

// Calls a primitive with named arguments ({"", x} positional, {"axis", v}).
inline Value named(const char* name, std::vector<CallArg> args) {
  return call_primitive(name, std::move(args));
}

// name(x, rest...): a primitive called with x first and the rest as given.
inline Value named(const char* name, Value x, std::vector<CallArg> rest) {
  rest.insert(rest.begin(), CallArg{"", std::move(x)});
  return call_primitive(name, std::move(rest));
}
inline const double kNaN = std::numeric_limits<double>::quiet_NaN();
inline const double kInf = std::numeric_limits<double>::infinity();

// ⌈log2 n⌉ for n ≥ 1.
inline int ceil_log2(int n) {
  int k = 0;
  while ((1 << k) < n) ++k;
  return k;
}

}  // namespace tessera::test
