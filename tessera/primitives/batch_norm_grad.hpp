// batch_norm_grad's cotangent of x as rows computed on demand: what
// batch_norm_grad writes into an array of x's shape, and what conv*_grads_bn
// (primitives/conv.cpp) computes a chunk of samples at a time, each chunk
// going straight into the convolution's backward while it is in cache.
#pragma once

#include <cstdint>
#include <functional>

#include "tessera/core/array.hpp"
#include "tessera/primitives/registry.hpp"

namespace tessera {

struct BatchNormGradRows {
  Array g;            // the cotangent of the batch norm's output (dtype)
  DType dtype = DType::float64;
  Shape shape;        // x's (the batch norm's input)
  int64_t rows = 0, channels = 0;
  // Rows [begin, end) of the cotangent of x (`channels` values each, dtype)
  // from g (this g: a separate argument, so that batch_norm_grad can write
  // into g's own buffer when nothing else holds it), written to out, row
  // `begin` first.
  std::function<void(const Array& g, int64_t begin, int64_t end, void* out)> compute;
};

// Checks batch_norm_grad's arguments `a` (its spec's parameters: g, x, gamma,
// mean, var, epsilon, training, stats, sums, y) and works out the per-channel
// coefficients (computing the sums when training without them). Errors name
// a.op().
BatchNormGradRows batch_norm_grad_rows(Args& a);

// Every row of the plan's cotangent written to `out` (rows * channels values
// of plan.dtype; may be plan.g's own buffer), in parallel tiles.
void batch_norm_grad_all_rows(const BatchNormGradRows& plan, void* out);

}  // namespace tessera
