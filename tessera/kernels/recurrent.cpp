#include "tessera/kernels/recurrent.hpp"

#include <cblas.h>

#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "tessera/kernels/vmath.hpp"

namespace tessera::kernels {

int rnn_gates(RnnCell cell) {
  switch (cell) {
    case RnnCell::simple: return 1;
    case RnnCell::lstm: return 4;
    case RnnCell::gru:
    case RnnCell::gru_before: return 3;
  }
  return 1;
}

int rnn_act_width(RnnCell cell) {
  switch (cell) {
    case RnnCell::simple: return 1;
    case RnnCell::lstm: return 5;  // i, f, c~, o, tanh(c)
    case RnnCell::gru: return 4;   // z, r, h~, the recurrent part of h~ (with its bias)
    case RnnCell::gru_before: return 4;  // z, r, h~, r * h
  }
  return 1;
}

namespace {

// C = alpha op(A) op(B) + beta C, row-major.
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), 1.0f, a,
              static_cast<int>(lda), b, static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
}

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double* a, int64_t lda,
          const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), 1.0, a,
              static_cast<int>(lda), b, static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
}

// y = sigmoid(x), or tanh(x) for columns in [tanh_begin, tanh_end), over a
// (rows, cols) block; one vector expm1 over the block: with m = expm1(-s |x|)
// (s = 1 for sigmoid, 2 for tanh), sigmoid(x) = (x >= 0 ? 1 : 1 + m) / (2 + m)
// and tanh(|x|) = -m / (2 + m), both without cancellation. tmp holds
// rows * cols values.
template <class T>
void sig_tanh(const T* x, int64_t ldx, T* y, int64_t ldy, int64_t rows, int64_t cols,
              int64_t tanh_begin, int64_t tanh_end, T* tmp) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * ldx;
    T* t = tmp + r * cols;
    for (int64_t j = 0; j < cols; ++j) t[j] = -std::fabs(xr[j]);
    for (int64_t j = tanh_begin; j < tanh_end; ++j) t[j] += t[j];
  }
  vmath(VecFn::expm1, tmp, tmp, rows * cols);
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * ldx;
    const T* t = tmp + r * cols;
    T* yr = y + r * ldy;
    for (int64_t j = 0; j < tanh_begin; ++j) {
      yr[j] = (xr[j] >= T(0) ? T(1) : T(1) + t[j]) / (T(2) + t[j]);
    }
    for (int64_t j = tanh_begin; j < tanh_end; ++j) {
      yr[j] = std::copysign(-t[j] / (T(2) + t[j]), xr[j]);
    }
    for (int64_t j = tanh_end; j < cols; ++j) {
      yr[j] = (xr[j] >= T(0) ? T(1) : T(1) + t[j]) / (T(2) + t[j]);
    }
  }
}

template <class T>
bool keeps(const RnnProblem& p, int64_t b, int64_t t) {
  return p.mask == nullptr || p.mask[b * p.steps + t] != 0;
}

}  // namespace

template <class T>
void rnn_forward(const RnnProblem& p, const T* xw, const T* u, const T* rb, const T* h0,
                 const T* c0, T* hs, T* cs, T* acts) {
  const int64_t B = p.batch, S = p.steps, H = p.units;
  const int64_t GH = rnn_gates(p.cell) * H, A = rnn_act_width(p.cell) * H;
  const int64_t BH = B * H;
  std::vector<T> pre(B * GH), tmp(B * GH);
  if (h0) {
    std::memcpy(hs, h0, sizeof(T) * BH);
  } else {
    std::fill(hs, hs + BH, T(0));
  }
  if (cs) {
    if (c0) {
      std::memcpy(cs, c0, sizeof(T) * BH);
    } else {
      std::fill(cs, cs + BH, T(0));
    }
  }
  for (int64_t k = 0; k < S; ++k) {
    const int64_t t = p.go_backwards ? S - 1 - k : k;
    const T* hp = hs + k * BH;
    T* hn = hs + (k + 1) * BH;
    T* a = acts + k * B * A;
    // pre = h U (the first two gates' columns only when r * h comes first)
    if (p.cell == RnnCell::gru_before) {
      gemm(false, false, B, 2 * H, H, hp, H, u, GH, T(0), pre.data(), GH);
    } else {
      gemm(false, false, B, GH, H, hp, H, u, GH, T(0), pre.data(), GH);
    }
    if (rb) {
      for (int64_t b = 0; b < B; ++b) {
        for (int64_t j = 0; j < GH; ++j) pre[b * GH + j] += rb[j];
      }
    }
    switch (p.cell) {
      case RnnCell::simple:
      case RnnCell::lstm: {
        for (int64_t b = 0; b < B; ++b) {
          const T* x = xw + (b * S + t) * GH;
          T* r = pre.data() + b * GH;
          for (int64_t j = 0; j < GH; ++j) r[j] += x[j];
        }
        if (p.cell == RnnCell::simple) {
          sig_tanh(pre.data(), GH, a, A, B, H, int64_t{0}, H, tmp.data());
          for (int64_t b = 0; b < B; ++b) {
            const bool keep = keeps<T>(p, b, t);
            std::memcpy(hn + b * H, keep ? a + b * A : hp + b * H, sizeof(T) * H);
          }
          break;
        }
        sig_tanh(pre.data(), GH, a, A, B, GH, 2 * H, 3 * H, tmp.data());
        const T* cp = cs + k * BH;
        T* cn = cs + (k + 1) * BH;
        for (int64_t b = 0; b < B; ++b) {
          const T* ar = a + b * A;
          for (int64_t j = 0; j < H; ++j) {
            cn[b * H + j] = ar[H + j] * cp[b * H + j] + ar[j] * ar[2 * H + j];
          }
        }
        sig_tanh(cn, H, a + 4 * H, A, B, H, int64_t{0}, H, tmp.data());
        for (int64_t b = 0; b < B; ++b) {
          const T* ar = a + b * A;
          if (keeps<T>(p, b, t)) {
            for (int64_t j = 0; j < H; ++j) hn[b * H + j] = ar[3 * H + j] * ar[4 * H + j];
          } else {
            std::memcpy(hn + b * H, hp + b * H, sizeof(T) * H);
            std::memcpy(cn + b * H, cp + b * H, sizeof(T) * H);
          }
        }
        break;
      }
      case RnnCell::gru:
      case RnnCell::gru_before: {
        const bool after = p.cell == RnnCell::gru;
        for (int64_t b = 0; b < B; ++b) {
          const T* x = xw + (b * S + t) * GH;
          T* r = pre.data() + b * GH;
          for (int64_t j = 0; j < 2 * H; ++j) r[j] += x[j];
        }
        sig_tanh(pre.data(), GH, a, A, B, 2 * H, int64_t{0}, int64_t{0}, tmp.data());
        if (after) {
          for (int64_t b = 0; b < B; ++b) {
            const T* x = xw + (b * S + t) * GH + 2 * H;
            T* r = pre.data() + b * GH + 2 * H;
            const T* gate = a + b * A + H;
            T* keep_hu = a + b * A + 3 * H;
            for (int64_t j = 0; j < H; ++j) {
              keep_hu[j] = r[j];
              r[j] = x[j] + gate[j] * r[j];
            }
          }
        } else {
          for (int64_t b = 0; b < B; ++b) {
            const T* gate = a + b * A + H;
            T* rh = a + b * A + 3 * H;
            for (int64_t j = 0; j < H; ++j) rh[j] = gate[j] * hp[b * H + j];
          }
          gemm(false, false, B, H, H, a + 3 * H, A, u + 2 * H, GH, T(0), pre.data() + 2 * H, GH);
          for (int64_t b = 0; b < B; ++b) {
            const T* x = xw + (b * S + t) * GH + 2 * H;
            T* r = pre.data() + b * GH + 2 * H;
            for (int64_t j = 0; j < H; ++j) r[j] += x[j];
          }
        }
        sig_tanh(pre.data() + 2 * H, GH, a + 2 * H, A, B, H, int64_t{0}, H, tmp.data());
        for (int64_t b = 0; b < B; ++b) {
          const T* ar = a + b * A;
          if (keeps<T>(p, b, t)) {
            for (int64_t j = 0; j < H; ++j) {
              const T z = ar[j];
              hn[b * H + j] = z * hp[b * H + j] + (T(1) - z) * ar[2 * H + j];
            }
          } else {
            std::memcpy(hn + b * H, hp + b * H, sizeof(T) * H);
          }
        }
        break;
      }
    }
  }
}

template <class T>
void rnn_backward(const RnnProblem& p, const T* u, const T* hs, const T* cs, const T* acts,
                  const T* gout, bool sequences, const T* gh, const T* gc, T* dxw, T* du, T* drb,
                  T* dh0, T* dc0) {
  const int64_t B = p.batch, S = p.steps, H = p.units;
  const int64_t GH = rnn_gates(p.cell) * H, A = rnn_act_width(p.cell) * H;
  const int64_t BH = B * H;
  const bool lstm = p.cell == RnnCell::lstm;
  // dz: the cotangents of each step's gate inputs (= of xw's row), by loop
  // step; dhu (GRU): those of h U + rb, which differ in the candidate's block.
  std::vector<T> dz(S * B * GH), dhu(p.cell == RnnCell::gru ? S * B * GH : 0);
  std::vector<T> dh(BH, T(0)), dc(lstm ? BH : 0, T(0)), dhn(BH), dcn(lstm ? BH : 0), drh(BH);
  if (gh) std::memcpy(dh.data(), gh, sizeof(T) * BH);
  if (gc && lstm) std::memcpy(dc.data(), gc, sizeof(T) * BH);
  for (int64_t k = S - 1; k >= 0; --k) {
    const int64_t t = p.go_backwards ? S - 1 - k : k;
    const T* hp = hs + k * BH;
    const T* a = acts + k * B * A;
    T* d = dz.data() + k * B * GH;
    // Split the carried cotangents: a kept row's go through the cell (with
    // this step's output's), a masked row's pass to the previous states.
    for (int64_t b = 0; b < B; ++b) {
      const T* go = nullptr;
      if (gout && sequences) go = gout + (b * S + k) * H;
      if (gout && !sequences && k == S - 1) go = gout + b * H;
      T* dhr = dh.data() + b * H;
      T* dnr = dhn.data() + b * H;
      if (keeps<T>(p, b, t)) {
        for (int64_t j = 0; j < H; ++j) dnr[j] = dhr[j] + (go ? go[j] : T(0));
        std::fill(dhr, dhr + H, T(0));
        if (lstm) {
          std::memcpy(dcn.data() + b * H, dc.data() + b * H, sizeof(T) * H);
          std::fill(dc.data() + b * H, dc.data() + (b + 1) * H, T(0));
        }
      } else {
        std::fill(dnr, dnr + H, T(0));
        if (go && !p.zero_output_for_mask) {
          for (int64_t j = 0; j < H; ++j) dhr[j] += go[j];
        }
        if (lstm) std::fill(dcn.data() + b * H, dcn.data() + (b + 1) * H, T(0));
      }
    }
    switch (p.cell) {
      case RnnCell::simple:
        for (int64_t b = 0; b < B; ++b) {
          const T* ar = a + b * A;
          const T* g = dhn.data() + b * H;
          T* dr = d + b * GH;
          for (int64_t j = 0; j < H; ++j) dr[j] = g[j] * (T(1) - ar[j] * ar[j]);
        }
        gemm(false, true, B, H, GH, d, GH, u, GH, T(1), dh.data(), H);
        break;
      case RnnCell::lstm: {
        const T* cp = cs + k * BH;
        for (int64_t b = 0; b < B; ++b) {
          const T* ar = a + b * A;
          const T* g = dhn.data() + b * H;
          const T* gcn = dcn.data() + b * H;
          T* dcr = dc.data() + b * H;
          T* dr = d + b * GH;
          for (int64_t j = 0; j < H; ++j) {
            const T i = ar[j], f = ar[H + j], c = ar[2 * H + j], o = ar[3 * H + j];
            const T tc = ar[4 * H + j];
            const T dct = gcn[j] + g[j] * o * (T(1) - tc * tc);
            dr[j] = dct * c * i * (T(1) - i);
            dr[H + j] = dct * cp[b * H + j] * f * (T(1) - f);
            dr[2 * H + j] = dct * i * (T(1) - c * c);
            dr[3 * H + j] = g[j] * tc * o * (T(1) - o);
            dcr[j] += dct * f;
          }
        }
        gemm(false, true, B, H, GH, d, GH, u, GH, T(1), dh.data(), H);
        break;
      }
      case RnnCell::gru: {
        T* dq = dhu.data() + k * B * GH;
        for (int64_t b = 0; b < B; ++b) {
          const T* ar = a + b * A;
          const T* g = dhn.data() + b * H;
          const T* hpr = hp + b * H;
          T* dhr = dh.data() + b * H;
          T* dr = d + b * GH;
          T* dqr = dq + b * GH;
          for (int64_t j = 0; j < H; ++j) {
            const T z = ar[j], r = ar[H + j], hh = ar[2 * H + j], hu = ar[3 * H + j];
            const T dzg = g[j] * (hpr[j] - hh) * z * (T(1) - z);
            const T dah = g[j] * (T(1) - z) * (T(1) - hh * hh);
            const T drg = dah * hu * r * (T(1) - r);
            dr[j] = dqr[j] = dzg;
            dr[H + j] = dqr[H + j] = drg;
            dr[2 * H + j] = dah;
            dqr[2 * H + j] = dah * r;
            dhr[j] += g[j] * z;
          }
        }
        gemm(false, true, B, H, GH, dq, GH, u, GH, T(1), dh.data(), H);
        break;
      }
      case RnnCell::gru_before: {
        for (int64_t b = 0; b < B; ++b) {
          const T* ar = a + b * A;
          const T* g = dhn.data() + b * H;
          const T* hpr = hp + b * H;
          T* dr = d + b * GH;
          for (int64_t j = 0; j < H; ++j) {
            const T z = ar[j], hh = ar[2 * H + j];
            dr[j] = g[j] * (hpr[j] - hh) * z * (T(1) - z);
            dr[2 * H + j] = g[j] * (T(1) - z) * (T(1) - hh * hh);
          }
        }
        // d(r * h) = dh~ U_h^T
        gemm(false, true, B, H, H, d + 2 * H, GH, u + 2 * H, GH, T(0), drh.data(), H);
        for (int64_t b = 0; b < B; ++b) {
          const T* ar = a + b * A;
          const T* g = dhn.data() + b * H;
          const T* hpr = hp + b * H;
          const T* drr = drh.data() + b * H;
          T* dhr = dh.data() + b * H;
          T* dr = d + b * GH;
          for (int64_t j = 0; j < H; ++j) {
            const T z = ar[j], r = ar[H + j];
            dr[H + j] = drr[j] * hpr[j] * r * (T(1) - r);
            dhr[j] += drr[j] * r + g[j] * z;
          }
        }
        gemm(false, true, B, H, 2 * H, d, GH, u, GH, T(1), dh.data(), H);
        break;
      }
    }
  }
  // The recurrent kernel's cotangent: every step's previous states against
  // its gate cotangents, one product over all (step, row) pairs.
  const int64_t n = S * B;
  if (p.cell == RnnCell::gru_before) {
    gemm(true, false, H, 2 * H, n, hs, H, dz.data(), GH, T(0), du, GH);
    gemm(true, false, H, H, n, acts + 3 * H, A, dz.data() + 2 * H, GH, T(0), du + 2 * H, GH);
  } else {
    const T* dq = p.cell == RnnCell::gru ? dhu.data() : dz.data();
    gemm(true, false, H, GH, n, hs, H, dq, GH, T(0), du, GH);
    if (drb) {
      std::fill(drb, drb + GH, T(0));
      for (int64_t r = 0; r < n; ++r) {
        for (int64_t j = 0; j < GH; ++j) drb[j] += dq[r * GH + j];
      }
    }
  }
  for (int64_t k = 0; k < S; ++k) {
    const int64_t t = p.go_backwards ? S - 1 - k : k;
    for (int64_t b = 0; b < B; ++b) {
      std::memcpy(dxw + (b * S + t) * GH, dz.data() + (k * B + b) * GH, sizeof(T) * GH);
    }
  }
  std::memcpy(dh0, dh.data(), sizeof(T) * BH);
  if (dc0 && lstm) std::memcpy(dc0, dc.data(), sizeof(T) * BH);
}

template void rnn_forward<float>(const RnnProblem&, const float*, const float*, const float*,
                                 const float*, const float*, float*, float*, float*);
template void rnn_forward<double>(const RnnProblem&, const double*, const double*, const double*,
                                  const double*, const double*, double*, double*, double*);
template void rnn_backward<float>(const RnnProblem&, const float*, const float*, const float*,
                                  const float*, const float*, bool, const float*, const float*,
                                  float*, float*, float*, float*, float*);
template void rnn_backward<double>(const RnnProblem&, const double*, const double*,
                                   const double*, const double*, const double*, bool,
                                   const double*, const double*, double*, double*, double*,
                                   double*, double*);

}  // namespace tessera::kernels
