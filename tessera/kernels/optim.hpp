// Optimizer kernels: fused elementwise update steps (SGD with momentum and
// Nesterov, Adam and AdamW) and the sums behind gradient clipping by global
// norm. Each kernel handles elements [begin, end) of float32 or float64 arrays
// that all share one dtype and size; outputs may be the inputs themselves
// (every element is read before it is written), which is how updates happen in
// place.
#pragma once

#include <cstdint>

#include "tessera/core/array.hpp"

namespace tessera::kernels {

// PyTorch's SGD: d = g + weight_decay * w; v' = momentum * v + d (v' = d when
// there is no v yet); step = nesterov ? d + momentum * v' : v' (d without
// momentum); w' = w - lr * step.
struct SgdSettings {
  double lr = 0.01;
  double momentum = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
};

// w_out = SGD step of w with gradient g. `v` and `v_out` are the velocity
// before and after (both null when momentum is 0; `v` alone null on the first
// step).
void sgd_update_range(const SgdSettings& s, const Array& w, const Array& g, const Array* v,
                      Array& w_out, Array* v_out, int64_t begin, int64_t end);

// PyTorch's Adam and AdamW at step t (1-based): with d = g + weight_decay * w
// when not decoupled, m' = beta1 m + (1 - beta1) d, v' = beta2 v + (1 - beta2) d²,
// w' = w - lr (m' / (1 - beta1^t)) / (sqrt(v' / (1 - beta2^t)) + epsilon);
// decoupled (AdamW) first shrinks w by (1 - lr * weight_decay).
struct AdamSettings {
  double lr = 0.001;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double epsilon = 1e-7;
  double weight_decay = 0.0;
  bool decoupled = false;
  int64_t step = 1;
};

void adam_update_range(const AdamSettings& s, const Array& w, const Array& g, const Array& m,
                       const Array& v, Array& w_out, Array& m_out, Array& v_out, int64_t begin,
                       int64_t end);

// Sum of squares of elements [begin, end) of a float32 or float64 array,
// accumulated in float64 (pairwise, so the result depends only on the range).
double sum_squares_range(const Array& x, int64_t begin, int64_t end);

// out[i] = x[i] * factor over [begin, end) (same dtype).
void scale_range(const Array& x, double factor, Array& out, int64_t begin, int64_t end);

}  // namespace tessera::kernels
