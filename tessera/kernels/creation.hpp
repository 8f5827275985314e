// Creation kernels: ranges, diagonals and triangles filled in place.
#pragma once

#include <cstdint>

#include "tessera/core/array.hpp"

namespace tessera::kernels {

// Fills out[i] = start + i * step for the elements [begin, end) (in double,
// then cast, as NumPy's arange does for floating and mixed inputs).
void arange_fill_range(Array& out, double start, double step, int64_t begin, int64_t end);

// Integer arange, exact: out[i] = start + i * step.
void arange_int_fill(Array& out, int64_t start, int64_t step);

// np.linspace values for out.size() samples; integer dtypes take the floor.
void linspace_fill(Array& out, double start, double stop, bool endpoint);

// A zero array of shape (n, m) with ones on diagonal k (k > 0 above).
Array eye_array(int64_t n, int64_t m, int64_t k, DType dt);

// Lower (keep j <= i + k) or upper (keep j >= i + k) triangle of the last two
// dimensions of `a`, other elements zero.
Array triangle_array(const Array& a, int64_t k, bool lower);

// np.diag of a 1-d array: an (n + |k|) square matrix with `v` on diagonal k.
Array diag_from_vector(const Array& v, int64_t k);

// np.diag of a 2-d array: a copy of diagonal k.
Array diag_of_matrix(const Array& a, int64_t k);

}  // namespace tessera::kernels
