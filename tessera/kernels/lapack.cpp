#include "tessera/kernels/lapack.hpp"
#include "tessera/kernels/blis_pool.hpp"

#include <lapacke.h>

#include <algorithm>
#include <type_traits>
#include <vector>

namespace tessera::kernels {

namespace {

constexpr int kRow = LAPACK_ROW_MAJOR;

lapack_int li(int64_t v) { return static_cast<lapack_int>(v); }

}  // namespace

template <class T>
int lapack_svd(int64_t m, int64_t n, T* a, T* s, T* u, T* vt, char jobz) {
  BlisCall in_blis("linalg.svd");  // LAPACK's blocked steps call BLIS's gemm
  int64_t ucols = jobz == 'A' ? m : std::min(m, n);
  // LAPACK wants valid leading dimensions even when u/vt are not referenced.
  lapack_int ldu = li(std::max<int64_t>(ucols, 1)), ldvt = li(std::max<int64_t>(n, 1));
  if constexpr (std::is_same_v<T, double>) {
    return LAPACKE_dgesdd(kRow, jobz, li(m), li(n), a, li(std::max<int64_t>(n, 1)), s, u, ldu,
                          vt, ldvt);
  } else {
    return LAPACKE_sgesdd(kRow, jobz, li(m), li(n), a, li(std::max<int64_t>(n, 1)), s, u, ldu,
                          vt, ldvt);
  }
}

template <class T>
int lapack_eigh(int64_t n, T* a, T* w, char uplo, bool vectors) {
  BlisCall in_blis("linalg.eigh");  // LAPACK's blocked steps call BLIS's gemm
  char jobz = vectors ? 'V' : 'N';
  if constexpr (std::is_same_v<T, double>) {
    return LAPACKE_dsyevd(kRow, jobz, uplo, li(n), a, li(std::max<int64_t>(n, 1)), w);
  } else {
    return LAPACKE_ssyevd(kRow, jobz, uplo, li(n), a, li(std::max<int64_t>(n, 1)), w);
  }
}

template <class T>
int lapack_eig(int64_t n, T* a, T* wr, T* wi, T* vr, bool vectors) {
  BlisCall in_blis("linalg.eig");  // LAPACK's blocked steps call BLIS's gemm
  char jobvr = vectors ? 'V' : 'N';
  lapack_int ld = li(std::max<int64_t>(n, 1));
  T dummy = 0;
  if constexpr (std::is_same_v<T, double>) {
    return LAPACKE_dgeev(kRow, 'N', jobvr, li(n), a, ld, wr, wi, &dummy, 1, vectors ? vr : &dummy,
                         ld);
  } else {
    return LAPACKE_sgeev(kRow, 'N', jobvr, li(n), a, ld, wr, wi, &dummy, 1, vectors ? vr : &dummy,
                         ld);
  }
}

template <class T>
int lapack_geqrf(int64_t m, int64_t n, T* a, T* tau) {
  BlisCall in_blis("linalg.qr");  // LAPACK's blocked steps call BLIS's gemm
  if constexpr (std::is_same_v<T, double>) {
    return LAPACKE_dgeqrf(kRow, li(m), li(n), a, li(std::max<int64_t>(n, 1)), tau);
  } else {
    return LAPACKE_sgeqrf(kRow, li(m), li(n), a, li(std::max<int64_t>(n, 1)), tau);
  }
}

template <class T>
int lapack_orgqr(int64_t m, int64_t q_cols, int64_t k, T* q, const T* tau) {
  BlisCall in_blis("linalg.qr");  // LAPACK's blocked steps call BLIS's gemm
  if constexpr (std::is_same_v<T, double>) {
    return LAPACKE_dorgqr(kRow, li(m), li(q_cols), li(k), q, li(std::max<int64_t>(q_cols, 1)),
                          tau);
  } else {
    return LAPACKE_sorgqr(kRow, li(m), li(q_cols), li(k), q, li(std::max<int64_t>(q_cols, 1)),
                          tau);
  }
}

template <class T>
int lapack_cholesky(int64_t n, T* a) {
  BlisCall in_blis("linalg.cholesky");  // LAPACK's blocked steps call BLIS's gemm
  if constexpr (std::is_same_v<T, double>) {
    return LAPACKE_dpotrf(kRow, 'L', li(n), a, li(std::max<int64_t>(n, 1)));
  } else {
    return LAPACKE_spotrf(kRow, 'L', li(n), a, li(std::max<int64_t>(n, 1)));
  }
}

template <class T>
int lapack_lstsq(int64_t m, int64_t n, int64_t nrhs, T* a, T* b, T* s, double rcond,
                 int64_t* rank) {
  BlisCall in_blis("linalg.lstsq");  // LAPACK's blocked steps call BLIS's gemm
  lapack_int r = 0;
  int info;
  lapack_int lda = li(std::max<int64_t>(n, 1)), ldb = li(std::max<int64_t>(nrhs, 1));
  if constexpr (std::is_same_v<T, double>) {
    info = LAPACKE_dgelsd(kRow, li(m), li(n), li(nrhs), a, lda, b, ldb, s, rcond, &r);
  } else {
    info = LAPACKE_sgelsd(kRow, li(m), li(n), li(nrhs), a, lda, b, ldb, s,
                          static_cast<float>(rcond), &r);
  }
  *rank = r;
  return info;
}

template <class T>
int lapack_lu(int64_t n, T* a, int64_t* ipiv) {
  BlisCall in_blis("linalg (LU factorization)");  // LAPACK's blocked steps call BLIS's gemm
  std::vector<lapack_int> piv(static_cast<size_t>(std::max<int64_t>(n, 1)));
  int info;
  if constexpr (std::is_same_v<T, double>) {
    info = LAPACKE_dgetrf(kRow, li(n), li(n), a, li(std::max<int64_t>(n, 1)), piv.data());
  } else {
    info = LAPACKE_sgetrf(kRow, li(n), li(n), a, li(std::max<int64_t>(n, 1)), piv.data());
  }
  for (int64_t i = 0; i < n; ++i) ipiv[i] = piv[i];
  return info;
}

int lapack_getrs(int64_t n, int64_t nrhs, const double* lu, const int64_t* pivots, double* b) {
  BlisCall in_blis("linalg.solve");  // LAPACK's blocked steps call BLIS's gemm
  std::vector<lapack_int> piv(static_cast<size_t>(std::max<int64_t>(n, 1)));
  for (int64_t i = 0; i < n; ++i) piv[i] = static_cast<lapack_int>(pivots[i] + 1);
  return LAPACKE_dgetrs(kRow, 'N', li(n), li(nrhs), lu, li(std::max<int64_t>(n, 1)), piv.data(), b,
                        li(std::max<int64_t>(nrhs, 1)));
}

#define TESSERA_LAPACK_INSTANTIATE(T)                                                     \
  template int lapack_svd<T>(int64_t, int64_t, T*, T*, T*, T*, char);                     \
  template int lapack_eigh<T>(int64_t, T*, T*, char, bool);                               \
  template int lapack_eig<T>(int64_t, T*, T*, T*, T*, bool);                              \
  template int lapack_geqrf<T>(int64_t, int64_t, T*, T*);                                 \
  template int lapack_orgqr<T>(int64_t, int64_t, int64_t, T*, const T*);                  \
  template int lapack_cholesky<T>(int64_t, T*);                                           \
  template int lapack_lstsq<T>(int64_t, int64_t, int64_t, T*, T*, T*, double, int64_t*); \
  template int lapack_lu<T>(int64_t, T*, int64_t*);
TESSERA_LAPACK_INSTANTIATE(float)
TESSERA_LAPACK_INSTANTIATE(double)
#undef TESSERA_LAPACK_INSTANTIATE

}  // namespace tessera::kernels
