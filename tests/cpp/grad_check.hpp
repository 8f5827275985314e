// Finite-difference checks for gradient rules: the vector-Jacobian product of
// a function of one float64 array, computed by central differences.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>

#include "tessera/core/array.hpp"

namespace tessera::test {

// d/dx sum(f(x) * g) by central differences with step h (x and f(x) float64;
// g has f(x)'s shape).
inline Array numeric_vjp(const std::function<Array(const Array&)>& f, const Array& x,
                         const Array& g, double h = 1e-6) {
  Array grad(DType::float64, x.shape());
  for (int64_t i = 0; i < x.size(); ++i) {
    Array xp = x.copy(), xm = x.copy();
    xp.data<double>()[i] += h;
    xm.data<double>()[i] -= h;
    Array fp = f(xp), fm = f(xm);
    double s = 0.0;
    for (int64_t j = 0; j < fp.size(); ++j) {
      s += (fp.get_double(j) - fm.get_double(j)) * g.get_double(j);
    }
    grad.data<double>()[i] = s / (2 * h);
  }
  return grad;
}

// Compares an analytic gradient with a numeric one elementwise.
inline ::testing::AssertionResult grads_close(const Array& analytic, const Array& numeric,
                                              double rtol = 1e-5, double atol = 1e-7) {
  if (analytic.shape() != numeric.shape()) {
    return ::testing::AssertionFailure() << "gradient shape " << shape_str(analytic.shape())
                                         << " != " << shape_str(numeric.shape());
  }
  for (int64_t i = 0; i < analytic.size(); ++i) {
    double a = analytic.get_double(i), n = numeric.get_double(i);
    if (!(std::fabs(a - n) <= atol + rtol * std::fabs(n))) {
      return ::testing::AssertionFailure() << "element " << i << ": analytic " << a
                                           << ", numeric " << n;
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace tessera::test
