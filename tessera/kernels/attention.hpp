// Scaled dot-product attention of one block (one batch element and head):
// softmax(scale * q @ k^T) @ v and its backward, with the scores of a band of
// query rows kept in cache (computed, normalised and consumed while they are
// hot) instead of written out as a (tq, tk) tensor and read back by separate
// scale, softmax and product passes. The backward recomputes the scores
// rather than reading them. Single-threaded, like every kernel; the caller
// runs blocks side by side. The order of every sum depends on the shapes
// alone, so results do not depend on the thread count.
#pragma once

#include <cstdint>

namespace tessera::kernels {

// One block's sizes: q (tq, d), k (tk, d), v (tk, dv), each with contiguous
// rows ldq, ldk, ldv elements apart (a head's rows inside a (tokens, heads,
// features) array), and the cotangent g (tq, dv) of the backward rows ldg
// apart; results are C-contiguous. causal: query row i attends to keys
// j <= i only (Keras's causal mask).
struct AttentionShape {
  int64_t tq = 0, tk = 0, d = 0, dv = 0;
  int64_t ldq = 0, ldk = 0, ldv = 0, ldg = 0;
  bool causal = false;
};

// out (tq, dv) = softmax(scale * q @ k^T, rows) @ v. With `probs` (tq * tk
// elements) the probabilities are left there for attention_backward, each
// band of rows [r0, r1) at probs + r0 * tk as a (rows, band keys) block.
template <class T>
void attention_forward(const AttentionShape& s, T scale, const T* q, const T* k, const T* v,
                       T* out, T* probs = nullptr);

// The cotangents of q, k and v from g, the cotangent of out (tq, dv); with
// `probs` (as attention_forward left them) the scores are not recomputed.
template <class T>
void attention_backward(const AttentionShape& s, T scale, const T* q, const T* k, const T* v,
                        const T* g, T* dq, T* dk, T* dv, const T* probs = nullptr);

// Estimated nanoseconds of one block's forward (backward: about 2.5 times).
double attention_block_ns(const AttentionShape& s);

}  // namespace tessera::kernels
