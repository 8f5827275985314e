// np.linalg's decompositions on LAPACK (kernels/lapack.hpp): svd, eigh,
// eigvalsh, eig, eigvals, qr, cholesky, lstsq, pinv, slogdet, matrix_rank.
//
// Each works on a contiguous float64 copy (float32 stays float32, as in
// NumPy; ints and bools become float64); a stack of matrices (..., M, N) is
// cut into single matrices run in parallel, each one LAPACK call on one
// thread. LAPACK's failures are ValueErrors (NumPy's LinAlgError is a
// ValueError). Signs of singular vectors, eigenvectors and QR factors can
// differ from NumPy's (both are valid); the help texts say so.
#include <algorithm>
#include <atomic>
#include <functional>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/kernels/lapack.hpp"
#include "tessera/primitives/registry.hpp"
#include "tessera/runtime/parallel.hpp"

namespace tessera {

namespace {

using namespace kernels;

// A stack of matrices: the float copy, the batch shape and the matrix shape.
struct Stack {
  Array a;
  Shape batch;
  int64_t count = 1, m = 0, n = 0;
};

Stack float_stack(const Args& a, size_t i, bool square) {
  Array x = a.array(i);
  if (x.ndim() < 2) {
    throw std::invalid_argument(error_message(
        "[", a.op(), "] ", x.ndim(), "-dimensional array given. Array must be at least "
        "two-dimensional: got ", a[i].describe()));
  }
  Stack s;
  DType dt = x.dtype() == DType::float32 ? DType::float32 : DType::float64;
  s.a = x.astype(dt);
  if (s.a.shares_storage(x)) s.a = s.a.copy();  // LAPACK writes into it
  s.batch.assign(x.shape().begin(), x.shape().end() - 2);
  for (int64_t d : s.batch) s.count *= d;
  s.m = x.dim(x.ndim() - 2);
  s.n = x.dim(x.ndim() - 1);
  if (square && s.m != s.n) {
    throw std::invalid_argument(error_message("[", a.op(), "] Last 2 dimensions of the array "
                                              "must be square: got shape ",
                                              shape_str(x.shape())));
  }
  return s;
}

Shape with_batch(const Shape& batch, std::initializer_list<int64_t> tail) {
  Shape s = batch;
  s.insert(s.end(), tail.begin(), tail.end());
  return s;
}

// Runs fn(index) for each matrix of the stack in parallel; the first
// failure's info is reported as `what` (a ValueError).
void each_matrix(const Args& a, const Stack& s, double ns, const std::string& what,
                 const std::function<int(int64_t)>& fn) {
  std::atomic<int> failed{0};
  parallel_for(s.count, ns, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      int info = fn(i);
      if (info != 0) failed.store(info);
    }
  });
  if (int info = failed.load(); info != 0) {
    throw std::invalid_argument(error_message("[", a.op(), "] ", what, " (LAPACK info ", info,
                                              ")"));
  }
}

double cube_ns(const Stack& s) {
  double k = static_cast<double>(std::max(s.m, s.n));
  return 2.0 * k * k * k;
}

template <class T>
double eps_of() {
  return std::numeric_limits<T>::epsilon();
}

// svd(a, full_matrices, compute_uv): list(U, S, Vh) or S.
Value svd(Args& a) {
  Stack s = float_stack(a, 0, false);
  bool full = a.boolean(1), uv = a.boolean(2);
  int64_t m = s.m, n = s.n, k = std::min(m, n);
  char jobz = !uv ? 'N' : full ? 'A' : 'S';
  int64_t ucols = full ? m : k, vrows = full ? n : k;
  DType dt = s.a.dtype();
  Array S(dt, with_batch(s.batch, {k}));
  Array U(dt, with_batch(s.batch, {m, uv ? ucols : 0}));
  Array V(dt, with_batch(s.batch, {uv ? vrows : 0, n}));
  dispatch(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T>) {
      each_matrix(a, s, cube_ns(s), "SVD did not converge", [&](int64_t i) {
        std::vector<T> vt(static_cast<size_t>(uv ? std::max<int64_t>(vrows, 1) * n : 1));
        std::vector<T> u(static_cast<size_t>(uv ? m * std::max<int64_t>(ucols, 1) : 1));
        int info = lapack_svd<T>(m, n, s.a.data<T>() + i * m * n, S.data<T>() + i * k, u.data(),
                                 vt.data(), jobz);
        if (uv) {
          std::copy(u.begin(), u.begin() + m * ucols, U.data<T>() + i * m * ucols);
          std::copy(vt.begin(), vt.begin() + vrows * n, V.data<T>() + i * vrows * n);
        }
        return info;
      });
    }
  });
  if (!uv) return S;
  return List{U, S, V};
}

// eigh / eigvalsh (a, UPLO).
Value eigh(Args& a, bool vectors) {
  Stack s = float_stack(a, 0, true);
  const std::string& uplo = a.string(1);
  if (uplo != "L" && uplo != "U") a.value_error(1, "must be 'L' or 'U': got '" + uplo + "'");
  int64_t n = s.n;
  DType dt = s.a.dtype();
  Array W(dt, with_batch(s.batch, {n}));
  dispatch(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T>) {
      each_matrix(a, s, cube_ns(s), "Eigenvalues did not converge", [&](int64_t i) {
        return lapack_eigh<T>(n, s.a.data<T>() + i * n * n, W.data<T>() + i * n, uplo[0],
                              vectors);
      });
    }
  });
  if (!vectors) return W;
  return List{W, s.a};
}

// eig / eigvals: real results only; complex eigenvalues are a TypeError.
Value eig(Args& a, bool vectors) {
  Stack s = float_stack(a, 0, true);
  int64_t n = s.n;
  DType dt = s.a.dtype();
  Array W(dt, with_batch(s.batch, {n}));
  Array V(dt, with_batch(s.batch, {n, n}));
  std::atomic<bool> complex{false};
  dispatch(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T>) {
      each_matrix(a, s, 2 * cube_ns(s), "Eigenvalues did not converge", [&](int64_t i) {
        std::vector<T> wi(static_cast<size_t>(std::max<int64_t>(n, 1)));
        int info = lapack_eig<T>(n, s.a.data<T>() + i * n * n, W.data<T>() + i * n, wi.data(),
                                 V.data<T>() + i * n * n, vectors);
        for (int64_t j = 0; j < n; ++j) {
          if (wi[j] != T(0)) complex = true;
        }
        return info;
      });
    }
  });
  if (complex) {
    throw TypeError(error_message(
        "[", a.op(), "] the matrix has complex eigenvalues, and complex results are not "
        "supported yet (tessera has no complex dtype): got ", a[0].describe(),
        "; for a symmetric matrix use eigh"));
  }
  if (!vectors) return W;
  return List{W, V};
}

// qr(a, mode): list(Q, R) for 'reduced' / 'complete', R for 'r'.
Value qr(Args& a) {
  Stack s = float_stack(a, 0, false);
  const std::string& mode = a.string(1);
  if (mode != "reduced" && mode != "complete" && mode != "r") {
    a.value_error(1, "must be 'reduced', 'complete' or 'r' ('raw' is not supported): got '" +
                         mode + "'");
  }
  int64_t m = s.m, n = s.n, k = std::min(m, n);
  int64_t qcols = mode == "complete" ? m : k;
  int64_t rrows = mode == "complete" ? m : k;
  DType dt = s.a.dtype();
  Array Q(dt, with_batch(s.batch, {m, mode == "r" ? 0 : qcols}));
  Array R(dt, with_batch(s.batch, {rrows, n}));
  dispatch(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T>) {
      each_matrix(a, s, cube_ns(s), "QR failed", [&](int64_t i) {
        T* x = s.a.data<T>() + i * m * n;
        std::vector<T> tau(static_cast<size_t>(std::max<int64_t>(k, 1)));
        int info = lapack_geqrf<T>(m, n, x, tau.data());
        if (info != 0) return info;
        T* r = R.data<T>() + i * rrows * n;
        for (int64_t row = 0; row < rrows; ++row) {
          for (int64_t col = 0; col < n; ++col) {
            r[row * n + col] = (row <= col && row < m) ? x[row * n + col] : T(0);
          }
        }
        if (mode == "r" || qcols == 0) return 0;
        std::vector<T> q(static_cast<size_t>(m * qcols), T(0));
        for (int64_t row = 0; row < m; ++row) {
          for (int64_t col = 0; col < std::min(qcols, n); ++col) {
            q[row * qcols + col] = x[row * n + col];
          }
        }
        info = lapack_orgqr<T>(m, qcols, k, q.data(), tau.data());
        std::copy(q.begin(), q.end(), Q.data<T>() + i * m * qcols);
        return info;
      });
    }
  });
  if (mode == "r") return R;
  return List{Q, R};
}

// cholesky(a, upper): L (or L^T).
Value cholesky(Args& a) {
  Stack s = float_stack(a, 0, true);
  bool upper = a.boolean(1);
  int64_t n = s.n;
  dispatch(s.a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T>) {
      each_matrix(a, s, cube_ns(s) / 3, "Matrix is not positive definite", [&](int64_t i) {
        T* x = s.a.data<T>() + i * n * n;
        int info = lapack_cholesky<T>(n, x);
        for (int64_t r = 0; r < n; ++r) {
          for (int64_t c = r + 1; c < n; ++c) {
            if (upper) {
              x[r * n + c] = x[c * n + r];
              x[c * n + r] = T(0);
            } else {
              x[r * n + c] = T(0);
            }
          }
        }
        return info;
      });
    }
  });
  return s.a;
}

// lstsq(a, b, rcond): list(x, residuals, rank, s), as numpy.linalg.lstsq.
Value lstsq(Args& a) {
  Stack s = float_stack(a, 0, false);
  if (!s.batch.empty()) {
    a.value_error(0, error_message("must be 2-dimensional: got shape ",
                                   shape_str(a.array(0).shape())));
  }
  Array b0 = a.array(1);
  if (b0.ndim() != 1 && b0.ndim() != 2) {
    a.value_error(1, error_message("must be 1- or 2-dimensional: got shape ",
                                   shape_str(b0.shape())));
  }
  int64_t m = s.m, n = s.n, k = std::min(m, n);
  if (b0.dim(0) != m) {
    throw std::invalid_argument(error_message("[lstsq] Incompatible dimensions: a has shape ",
                                              shape_str(s.a.shape()), ", b has shape ",
                                              shape_str(b0.shape())));
  }
  bool vec = b0.ndim() == 1;
  int64_t nrhs = vec ? 1 : b0.dim(1);
  DType dt = promote(s.a.dtype(), b0.dtype()) == DType::float32 ? DType::float32
                                                                  : DType::float64;
  Array A = s.a.astype(dt);
  Array B = b0.astype(dt).reshaped({m, nrhs});
  int64_t rows = std::max(m, n);
  Array x(dt, vec ? Shape{n} : Shape{n, nrhs});
  Array S(dt, {k});
  Array res;
  int64_t rank = 0;
  dispatch(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T>) {
      std::vector<T> work(static_cast<size_t>(rows * nrhs), T(0));
      std::copy(B.data<T>(), B.data<T>() + m * nrhs, work.begin());
      double rcond = a.is_nil(2) ? eps_of<T>() * static_cast<double>(std::max(m, n))
                                 : a.number(2);
      std::vector<T> acopy(A.data<T>(), A.data<T>() + m * n);
      int info = m == 0 || n == 0 ? 0
                                  : lapack_lstsq<T>(m, n, nrhs, acopy.data(), work.data(),
                                                    S.data<T>(), rcond, &rank);
      if (info != 0) {
        throw std::invalid_argument(error_message("[lstsq] SVD did not converge in Linear "
                                                  "Least Squares (LAPACK info ", info, ")"));
      }
      std::copy(work.begin(), work.begin() + n * nrhs, x.data<T>());
      if (rank == n && m > n) {
        res = Array(dt, {nrhs});
        for (int64_t c = 0; c < nrhs; ++c) {
          T sum = 0;
          for (int64_t r = n; r < m; ++r) sum += work[r * nrhs + c] * work[r * nrhs + c];
          res.data<T>()[c] = sum;
        }
      } else {
        res = Array(dt, {0});
      }
    }
  });
  return List{x, res, Value(rank), S};
}

// pinv(a, rcond, hermitian, rtol): V diag(1/s) U^T, singular values at or
// below cutoff * max(s) dropped.
Value pinv(Args& a) {
  Stack s = float_stack(a, 0, false);
  int64_t m = s.m, n = s.n, k = std::min(m, n);
  DType dt = s.a.dtype();
  double rcond;
  bool rtol_given = !(a[3].is_string() && a[3].as_string() == "unset");
  if (!a.is_nil(1) && rtol_given) {
    throw std::invalid_argument("[pinv] `rtol` and `rcond` can't be both set");
  }
  if (!a.is_nil(1)) {
    rcond = a.number(1);
  } else if (!rtol_given) {
    rcond = 1e-15;
  } else if (a.is_nil(3)) {
    rcond = static_cast<double>(std::max(m, n)) *
            (dt == DType::float32 ? eps_of<float>() : eps_of<double>());
  } else {
    rcond = a.number(3);
  }
  Array out(dt, with_batch(s.batch, {n, m}));
  dispatch(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T>) {
      each_matrix(a, s, cube_ns(s), "SVD did not converge", [&](int64_t i) {
        std::vector<T> u(static_cast<size_t>(std::max<int64_t>(m * k, 1)));
        std::vector<T> vt(static_cast<size_t>(std::max<int64_t>(k * n, 1)));
        std::vector<T> sv(static_cast<size_t>(std::max<int64_t>(k, 1)));
        int info = k == 0 ? 0
                          : lapack_svd<T>(m, n, s.a.data<T>() + i * m * n, sv.data(), u.data(),
                                          vt.data(), 'S');
        T cutoff = k ? static_cast<T>(rcond) * *std::max_element(sv.begin(), sv.begin() + k)
                     : T(0);
        T* p = out.data<T>() + i * n * m;
        for (int64_t r = 0; r < n; ++r) {
          for (int64_t c = 0; c < m; ++c) {
            T sum = 0;
            for (int64_t j = 0; j < k; ++j) {
              if (sv[j] > cutoff) sum += vt[j * n + r] * u[c * k + j] / sv[j];
            }
            p[r * m + c] = sum;
          }
        }
        return info;
      });
    }
  });
  return out;
}

// slogdet(a): list(sign, logabsdet) from an LU factorization.
Value slogdet(Args& a) {
  Stack s = float_stack(a, 0, true);
  int64_t n = s.n;
  DType dt = s.a.dtype();
  Array sign(dt, s.batch), logdet(dt, s.batch);
  dispatch(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T>) {
      each_matrix(a, s, cube_ns(s) / 3, "LU failed", [&](int64_t i) {
        T* x = s.a.data<T>() + i * n * n;
        std::vector<int64_t> piv(static_cast<size_t>(std::max<int64_t>(n, 1)));
        int info = n == 0 ? 0 : lapack_lu<T>(n, x, piv.data());
        T sg = 1, ld = 0;
        if (info > 0) {
          sg = 0;
          ld = -std::numeric_limits<T>::infinity();
        } else {
          for (int64_t j = 0; j < n; ++j) {
            T d = x[j * n + j];
            if (piv[j] != j + 1) sg = -sg;
            if (d < 0) sg = -sg;
            ld += std::log(std::abs(d));
          }
        }
        sign.data<T>()[i] = sg;
        logdet.data<T>()[i] = ld;
        return info < 0 ? info : 0;
      });
    }
  });
  return List{sign, logdet};
}

// matrix_rank(A, tol, hermitian, rtol): singular values above the tolerance.
Value matrix_rank(Args& a) {
  Array x = a.array(0);
  if (x.ndim() < 2) {
    bool nonzero = false;
    for (int64_t i = 0; i < x.size(); ++i) nonzero = nonzero || x.get_double(i) != 0.0;
    return Value(static_cast<int64_t>(nonzero));
  }
  Stack s = float_stack(a, 0, false);
  int64_t m = s.m, n = s.n, k = std::min(m, n);
  DType dt = s.a.dtype();
  Array out(DType::int64, s.batch);
  dispatch(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T>) {
      each_matrix(a, s, cube_ns(s), "SVD did not converge", [&](int64_t i) {
        std::vector<T> sv(static_cast<size_t>(std::max<int64_t>(k, 1)), T(0));
        T dummy = 0;
        int info = k == 0 ? 0
                          : lapack_svd<T>(m, n, s.a.data<T>() + i * m * n, sv.data(), &dummy,
                                          &dummy, 'N');
        T smax = k ? *std::max_element(sv.begin(), sv.begin() + k) : T(0);
        double tol;
        if (!a.is_nil(1)) {
          tol = a.number(1);
        } else {
          double rtol = a.is_nil(3) ? static_cast<double>(std::max(m, n)) * eps_of<T>()
                                    : a.number(3);
          tol = static_cast<double>(smax) * rtol;
        }
        int64_t r = 0;
        for (int64_t j = 0; j < k; ++j) r += static_cast<double>(sv[j]) > tol;
        out.data<int64_t>()[i] = r;
        return info;
      });
    }
  });
  return out;
}

const char* kSigns =
    " Singular vectors, eigenvectors and QR factors are unique only up to sign (LAPACK's "
    "choice can differ from NumPy's): compare reconstructions, not the factors.";

const bool registered_decompositions = register_primitives({
    {.name = "svd", .family = "matrix",
     .params = {{"a"}, opt("full_matrices", true), opt("compute_uv", true),
                opt("hermitian", false)},
     .help = std::string("Singular value decomposition a = U @ diag(S) @ Vh of a matrix or a "
                         "stack (..., M, N), like numpy.linalg.svd: list(U, S, Vh) (U M x M and "
                         "Vh N x N with full_matrices, else K = min(M, N) columns/rows), S only "
                         "without compute_uv; S descending. LAPACK gesdd; float32 stays "
                         "float32.") + kSigns,
     .eval = svd, .ns_per_element = 20.0},
    {.name = "eigh", .family = "matrix", .params = {{"a"}, opt("UPLO", "L")},
     .help = std::string("Eigenvalues (ascending) and eigenvectors (columns) of a symmetric "
                         "matrix or stack, read from its UPLO ('L' or 'U') triangle, like "
                         "numpy.linalg.eigh: list(w, v). LAPACK syevd.") + kSigns,
     .eval = [](Args& a) -> Value { return eigh(a, true); }, .ns_per_element = 20.0},
    {.name = "eigvalsh", .family = "matrix", .params = {{"a"}, opt("UPLO", "L")},
     .help = "Eigenvalues (ascending) of a symmetric matrix or stack, like "
             "numpy.linalg.eigvalsh. LAPACK syevd.",
     .eval = [](Args& a) -> Value { return eigh(a, false); }, .ns_per_element = 10.0},
    {.name = "eig", .family = "matrix", .params = {{"a"}},
     .help = std::string("Eigenvalues and right eigenvectors (unit columns) of a square "
                         "matrix or stack, like numpy.linalg.eig: list(w, v). tessera has no "
                         "complex dtype yet: real eigenvalues give real arrays (as NumPy "
                         "does), complex ones a TypeError. Eigenvalues are in LAPACK geev's "
                         "order.") + kSigns,
     .eval = [](Args& a) -> Value { return eig(a, true); }, .ns_per_element = 40.0},
    {.name = "eigvals", .family = "matrix", .params = {{"a"}},
     .help = "Eigenvalues of a square matrix or stack, like numpy.linalg.eigvals; complex "
             "eigenvalues are a TypeError (no complex dtype yet).",
     .eval = [](Args& a) -> Value { return eig(a, false); }, .ns_per_element = 20.0},
    {.name = "qr", .family = "matrix", .params = {{"a"}, opt("mode", "reduced")},
     .help = std::string("QR decomposition a = Q @ R of a matrix or stack, like "
                         "numpy.linalg.qr: mode 'reduced' (Q M x K, R K x N), 'complete' (Q "
                         "M x M, R M x N) give list(Q, R), 'r' gives R; 'raw' is not "
                         "supported. LAPACK geqrf + orgqr.") + kSigns,
     .eval = qr, .ns_per_element = 10.0},
    {.name = "cholesky", .family = "matrix", .params = {{"a"}, opt("upper", false)},
     .help = "The Cholesky factor L (a = L @ L.T; upper=true gives L.T) of a symmetric "
             "positive-definite matrix or stack, like numpy.linalg.cholesky (only the lower "
             "triangle is read). Not positive definite: ValueError. LAPACK potrf.",
     .eval = cholesky, .ns_per_element = 5.0},
    {.name = "lstsq", .family = "matrix", .params = {{"a"}, {"b"}, opt("rcond", Value())},
     .help = "Least-squares solution of a @ x = b, like numpy.linalg.lstsq: list(x, "
             "residuals, rank, s); residuals are the squared norms of b - a @ x per column "
             "when rank == N < M, else empty; rcond nil is machine epsilon * max(M, N) "
             "(NumPy's default). LAPACK gelsd.",
     .eval = lstsq, .ns_per_element = 20.0},
    {.name = "pinv", .family = "matrix",
     .params = {{"a"}, opt("rcond", Value()), opt("hermitian", false), opt("rtol", "unset")},
     .help = "Moore-Penrose pseudo-inverse of a matrix or stack via the SVD, like "
             "numpy.linalg.pinv: singular values at or below rcond * max(s) are dropped "
             "(rcond 1e-15 by default; rtol=nil means max(M, N) * eps).",
     .eval = pinv, .ns_per_element = 20.0},
    {.name = "slogdet", .family = "matrix", .params = {{"a"}},
     .help = "Sign and natural log of |det| of a square matrix or stack, like "
             "numpy.linalg.slogdet: list(sign, logabsdet); singular gives (0, -inf). LAPACK "
             "getrf.",
     .eval = slogdet, .ns_per_element = 5.0},
    {.name = "matrix_rank", .family = "matrix",
     .params = {{"A"}, opt("tol", Value()), opt("hermitian", false), opt("rtol", Value())},
     .help = "Rank of a matrix or stack: singular values above tol (default S.max() * "
             "max(M, N) * eps, or S.max() * rtol), like numpy.linalg.matrix_rank; a 1-d or "
             "0-d array has rank 1 unless all zero. int64.",
     .eval = matrix_rank, .ns_per_element = 10.0},
});

}  // namespace

}  // namespace tessera
