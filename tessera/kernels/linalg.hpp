// Linear-algebra kernels: matrix products (BLAS for float32/float64, blocked
// loops for int64 and bool), axis permutation, LU factorization and norms.
//
// Every kernel is single-threaded and knows nothing of the runtime; the
// primitives in primitives/matrix.cpp cut large products into row tiles.
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/core/array.hpp"

namespace tessera::kernels {

// Rows [row_begin, row_end) of C = A B, where A is (m, k), B is (k, n) and C is
// (m, n), all contiguous row-major of dtype `dt` (bool: C = OR of ANDs, as NumPy).
// `a` and `c` point at row 0, so tiles of one product may run concurrently.
void matmul_rows(DType dt, const void* a, const void* b, void* c, int64_t k, int64_t n,
                 int64_t row_begin, int64_t row_end);

// A float matrix operand as BLAS reads it in place: element (i, j) at
// data[i * row_stride + j * col_stride] (elements), where one of the strides is
// 1 (row-major, or a transposed view of a row-major matrix) and the other at
// least the extent it steps over.
struct BlasMatrix {
  const void* data;
  int64_t row_stride;
  int64_t col_stride;
};

// Rows [row_begin, row_end) of C = A B for float32 or float64 A (m, k) and
// B (k, n) read through their strides (a transposed or sliced view needs no
// copy: BLAS's transpose flags and leading dimensions); C (m, n) contiguous.
void matmul_rows_strided(DType dt, BlasMatrix a, BlasMatrix b, void* c, int64_t k, int64_t n,
                         int64_t row_begin, int64_t row_end);

// Whether products of the vector x (stride incx) with B, x B by
// vector_matrix_cols and B x by matmul_rows_strided, run tessera's own kernels
// (float64, x contiguous, B row-major or a transposed view, the CPU's
// AVX2/AVX-512 in use), which give every output element the same bits
// whatever columns or rows a call covers: the tiles may follow the thread count.
bool vector_matrix_splits(DType dt, int64_t incx, BlasMatrix b);

// Columns [col_begin, col_end) of the row vector y = x B, for float32 or
// float64 x (k elements, stride incx) and B (k, n) read through its strides;
// y (n elements) contiguous. Each y[j] is summed over k in one fixed order.
void vector_matrix_cols(DType dt, const void* x, int64_t incx, BlasMatrix b, void* y, int64_t k,
                        int64_t col_begin, int64_t col_end);

// Rows [row_begin, row_end) of C = A^T B without forming A^T: A is (k, p),
// B is (k, n), C is (p, n), row-major float32 or float64 (BLAS reads A
// transposed in place).
void matmul_tn_rows(DType dt, const void* a, const void* b, void* c, int64_t k, int64_t p,
                    int64_t n, int64_t row_begin, int64_t row_end);

// A contiguous copy of `a` with its axes permuted: out.shape[i] = a.shape[perm[i]]
// (numpy.transpose(a, perm)). `perm` must be a permutation of 0..ndim-1.
Array permute_axes(const Array& a, const std::vector<int>& perm);

// Elementwise product of `a` with the single element of `s` (both converted to
// `dt`; bool multiplies as AND), keeping a's shape.
Array scale_by(const Array& a, const Array& s, DType dt);

// LU factorization with partial pivoting of the (n, n) row-major matrix `m`, in
// place (L below the diagonal with unit diagonal, U on and above). pivots[i] is
// the row swapped with row i. Returns false if a pivot is exactly zero (singular,
// as LAPACK's getrf reports it); `sign` receives the permutation's sign.
bool lu_factor(double* m, int64_t n, int64_t* pivots, int* sign);

// Solves A X = B in place for `nrhs` right-hand sides (x is (n, nrhs) row-major),
// given the factors of a successful lu_factor.
void lu_solve(const double* lu, const int64_t* pivots, int64_t n, double* x, int64_t nrhs);

// Sum of the diagonal at `offset` of axes (axis1, axis2), over the remaining axes
// (numpy.trace). bool and int64 sum to int64; floats keep their dtype.
Array trace(const Array& a, int64_t offset, int axis1, int axis2);

// Vector norm of n contiguous values: ord inf/-inf (max/min |x|), 0 (nonzero
// count), or sum(|x|^ord)^(1/ord) with fast paths for 1 and 2.
double vector_norm(const double* x, int64_t n, double ord);

// Matrix norms of a (rows, cols) row-major matrix, as numpy.linalg.norm.
enum class MatrixNorm { frobenius, max_col_sum, min_col_sum, max_row_sum, min_row_sum };
double matrix_norm(const double* x, int64_t rows, int64_t cols, MatrixNorm kind);

}  // namespace tessera::kernels
