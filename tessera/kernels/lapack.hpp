// LAPACK on one row-major matrix (float or double), through LAPACKE: thin,
// single-threaded wrappers that return LAPACK's info (0: success, > 0: the
// algorithm's own failure, such as a matrix that is not positive definite).
// The primitives layer (primitives/decompositions.cpp) loops over stacks.
#pragma once

#include <cstdint>

namespace tessera::kernels {

// a (m x n) = u s vt; jobz 'A' (u m x m, vt n x n), 'S' (u m x k, vt k x n)
// or 'N' (s only), k = min(m, n). a is overwritten.
template <class T>
int lapack_svd(int64_t m, int64_t n, T* a, T* s, T* u, T* vt, char jobz);

// Eigenvalues (ascending) and, with vectors, eigenvectors (columns, in a) of
// the symmetric n x n matrix a, read from its 'L' or 'U' triangle.
template <class T>
int lapack_eigh(int64_t n, T* a, T* w, char uplo, bool vectors);

// Eigenvalues wr + i wi and, with vectors, right eigenvectors (columns of vr,
// unit norm) of the general n x n matrix a.
template <class T>
int lapack_eig(int64_t n, T* a, T* wr, T* wi, T* vr, bool vectors);

// Householder QR of a (m x n, in place: R above the diagonal) and
// Q's first q_cols columns from it (q is m x q_cols holding a's reflectors).
template <class T>
int lapack_geqrf(int64_t m, int64_t n, T* a, T* tau);
template <class T>
int lapack_orgqr(int64_t m, int64_t q_cols, int64_t k, T* q, const T* tau);

// The lower Cholesky factor, in place (the upper triangle is left as it was).
template <class T>
int lapack_cholesky(int64_t n, T* a);

// Least squares a x = b: a (m x n), b (max(m, n) x nrhs) overwritten with x
// in its first n rows; s gets min(m, n) singular values, rank the rank.
template <class T>
int lapack_lstsq(int64_t m, int64_t n, int64_t nrhs, T* a, T* b, T* s, double rcond,
                 int64_t* rank);

// LU with partial pivoting, in place; ipiv (n) 1-based pivot rows.
template <class T>
int lapack_lu(int64_t n, T* a, int64_t* ipiv);

// Solves (LU) x = b in place for the factors of lapack_lu, with 0-based row
// interchanges `pivots` (as lu_factor gives them); b is (n, nrhs) row-major.
int lapack_getrs(int64_t n, int64_t nrhs, const double* lu, const int64_t* pivots, double* b);

}  // namespace tessera::kernels
