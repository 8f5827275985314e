// Layer normalization over the last n elements of each row, forward and
// backward in one pass over the rows each: y = (x - mean) / sqrt(var + eps) *
// gamma + beta, with the row's mean and (biased) variance. The backward
// recomputes a row's mean and variance from x instead of reading saved ones.
// Single-threaded, like every kernel; the caller runs row ranges side by side.
// Each row's sums run in double and in a fixed order, so results do not
// depend on the thread count.
#pragma once

#include <cstdint>

namespace tessera::kernels {

// y (rows, n) from x (rows, n), gamma (n) and beta (n).
template <class T>
void layer_norm_forward(const T* x, const T* gamma, const T* beta, int64_t rows, int64_t n,
                        double epsilon, T* y);

// dx (rows, n) from the cotangent g of y; dgamma += sum over the rows of g *
// x_hat and dbeta += sum of g (n each, in double: a caller adds the partial
// sums of row ranges in a fixed order).
template <class T>
void layer_norm_backward(const T* g, const T* x, const T* gamma, int64_t rows, int64_t n,
                         double epsilon, T* dx, double* dgamma, double* dbeta);

}  // namespace tessera::kernels
