// Recurrent sequence kernels: the time loop of Keras's SimpleRNN, LSTM and GRU
// cells (tanh activation, sigmoid recurrent activation) forward over all
// steps, keeping what the backward needs, and its backward (BPTT).
//
// The input projection xw = x @ kernel + input bias is computed by the caller
// (rnn_matmul: one matrix product for all steps); the kernels add, per step, the
// recurrent product h @ recurrent_kernel (one matrix product for the rows:
// for float32 with units a multiple of 32 on AVX-512, a kernel of its own
// reading the recurrent kernel packed once per sequence; else oneDNN's sgemm
// for float32, four to five times BLIS's speed at these small shapes; BLAS
// for float64) and the gates. Single-threaded, like every
// kernel: the caller runs blocks of rows (independent through all steps)
// and blocks of the recurrent kernel's columns side by side.
#pragma once

#include <cstdint>

namespace tessera::kernels {

// The cell of a sequence, with its gate count G (xw has G * units columns).
enum class RnnCell : uint8_t {
  simple,      // G = 1: h = tanh(xw + h U)
  lstm,        // G = 4: gates i, f, c, o (Keras's order); states h, c
  gru,         // G = 3: z, r, h~, reset after the recurrent product (+ recurrent bias)
  gru_before,  // G = 3: reset_after=False, r * h before the candidate's product
};

int rnn_gates(RnnCell cell);
// Columns per step and row of the tape's activations (acts below).
int rnn_act_width(RnnCell cell);
// Whether the backward writes the gates' cotangents straight into dxw (the
// simple RNN and the LSTM: no dz by loop step).
bool rnn_grads_in_place(RnnCell cell);

// The problem: batch B, steps T, units H. Time step k of the loop reads input
// step t = k (or T - 1 - k with go_backwards). mask (B, T) by input step,
// nonzero = keep, or null: a masked row keeps its states; its output is the
// previous output, or zeros with zero_output_for_mask.
struct RnnProblem {
  RnnCell cell;
  int64_t batch, steps, units;
  bool go_backwards;
  bool zero_output_for_mask;
  const uint8_t* mask;  // (B, T) or null
};

// C = op(A) op(B) + beta C, row-major (op: transposed when ta / tb): oneDNN's
// sgemm for float32 (on one OpenMP thread), BLAS for float64.
void rnn_matmul(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
void rnn_matmul(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double* a, int64_t lda,
                const double* b, int64_t ldb, double beta, double* c, int64_t ldc);

// Forward of rows [b0, b1). xw (b1 - b0, T, G H): those rows' input
// projections; u (H, G H); rb (G H) the GRU's
// recurrent bias or null; h0, c0 (B, H) or null (zeros). Writes those rows
// of hs (T + 1, B, H): the states h before each step and the last; of cs
// likewise for the LSTM (else null); of acts (T, B, rnn_act_width H): the
// gate activations per loop step.
template <class T>
void rnn_forward(const RnnProblem& p, int64_t b0, int64_t b1, const T* xw, const T* u,
                 const T* rb, const T* h0, const T* c0, T* hs, T* cs, T* acts);

// Backward through time of rows [b0, b1). gout: the cotangent of the
// outputs (B, T, H) by loop step, or of the last output only (B, H) when
// !sequences, or null; gh, gc (B, H) the cotangents of the final states, or
// null. Writes those rows of dxw (B, T, G H): the cotangents of each step's
// gate inputs, dh0 and dc0 (B, H) (dc0 null for cells without c). When
// rnn_grads_in_place(cell) (simple RNN, LSTM) the gates' cotangents go
// straight to dxw and hx (B, T, H) receives the state each row of dxw
// multiplied (dz, dhu null); else dz (T, B, G H) holds them by loop step
// first, dhu (T, B, G H), for the GRU (else null), those of h U + rb, and hx
// is null.
template <class T>
void rnn_backward_rows(const RnnProblem& p, int64_t b0, int64_t b1, const T* u, const T* hs,
                       const T* cs, const T* acts, const T* gout, bool sequences, const T* gh,
                       const T* gc, T* dz, T* dhu, T* dxw, T* hx, T* dh0, T* dc0);

// The weights' cotangents from rnn_backward_rows's results (all rows):
// columns [j0, j1) of du (H, G H) and of drb (G H, when not null). j0 and j1
// are multiples of H.
template <class T>
void rnn_backward_weights(const RnnProblem& p, int64_t j0, int64_t j1, const T* hs,
                          const T* acts, const T* dz, const T* dhu, const T* hx, const T* dxw,
                          T* du, T* drb);

}  // namespace tessera::kernels
