// Convolution and pooling kernels over channels-last data: 1-d (N, W, C) with
// kernels (K, C_in / groups, C_out), 2-d (N, H, W, C) with kernels
// (KH, KW, C_in / groups, C_out).
//
// Grouped convolution (Keras's `groups`): the channels fall into `groups`
// equal blocks; output channel o reads only the input channels of block
// o / (C_out / groups). Depthwise convolution is groups = C_in.
//
// float32 runs through oneDNN (convolution_forward / _backward_data /
// _backward_weights, pooling_forward / _backward) on the caller's buffers with
// the format tags nwc/wio and nhwc/hwio, so nothing is transposed. oneDNN on
// CPU has no float64 convolution or pooling, so float64 (and any float32 case
// oneDNN declines) runs through direct loops written here.
//
// Every kernel is single-threaded (oneDNN is held to one OpenMP thread on the
// calling thread) and knows nothing of the runtime: primitives/conv.cpp cuts
// the batch into tiles. Primitive descriptors are cached per shape and
// parameters in a small thread-safe cache, since creating them is costly.
#pragma once

#include <array>
#include <cstdint>

#include "tessera/core/dtype.hpp"

namespace tessera::kernels {

// The geometry of one convolution or pooling call. Spatial extents are given
// per spatial dimension ([0] only for 1-d; [0] = height, [1] = width for 2-d).
// For pooling, channels_out == channels_in and `kernel` is the pool size.
// groups divides channels_in and channels_out (the primitives check it).
struct ConvShape {
  int spatial = 1;  // 1 or 2
  int64_t batch = 0, channels_in = 0, channels_out = 0, groups = 1;
  std::array<int64_t, 2> in{1, 1}, kernel{1, 1}, out{1, 1};
  std::array<int64_t, 2> stride{1, 1}, dilation{1, 1}, pad_lo{0, 0}, pad_hi{0, 0};

  int64_t in_size() const;      // elements of one sample of the input
  int64_t out_size() const;     // elements of one sample of the output
  int64_t weight_size() const;  // elements of the convolution kernel (grouped)
};

// y = conv(x, w) for `batch` samples; y is fully written. dt: float32/float64.
void conv_forward(DType dt, const ConvShape& s, const void* x, const void* w, void* y);

// dx = gradient of sum(conv(x, w) * g) with respect to x (fully written).
void conv_backward_data(DType dt, const ConvShape& s, const void* g, const void* w, void* dx);

// dw = gradient of sum(conv(x, w) * g) with respect to w over the `batch`
// samples (fully written, not accumulated).
void conv_backward_weights(DType dt, const ConvShape& s, const void* x, const void* g,
                           void* dw);

enum class PoolKind { max, average };

// Max pooling ignores padding; average pooling divides by the number of
// elements of the window inside the input (padding excluded, as Keras).
void pool_forward(DType dt, PoolKind kind, const ConvShape& s, const void* x, void* y);

// dx of sum(pool(x) * g) (fully written): max sends each g to the first
// maximum of its window (row-major order), average spreads it evenly.
void pool_backward(DType dt, PoolKind kind, const ConvShape& s, const void* x, const void* g,
                   void* dx);

// Number of kernel calls oneDNN has executed since the process started (the
// float32 path; tests use it to check that oneDNN, not the loops, ran).
uint64_t onednn_calls();

}  // namespace tessera::kernels
