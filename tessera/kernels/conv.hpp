// Convolution and pooling kernels over channels-last data: 1-d (N, W, C) with
// kernels (K, C_in / groups, C_out), 2-d (N, H, W, C) with kernels
// (KH, KW, C_in / groups, C_out), 3-d (N, D, H, W, C) with kernels
// (KD, KH, KW, C_in / groups, C_out).
//
// Grouped convolution (Keras's `groups`): the channels fall into `groups`
// equal blocks; output channel o reads only the input channels of block
// o / (C_out / groups). Depthwise convolution is groups = C_in.
//
// float32 runs through oneDNN (convolution_forward / _backward_data /
// _backward_weights, pooling_forward / _backward) on the caller's buffers with
// the format tags nwc/wio, nhwc/hwio and ndhwc/dhwio, so the data is not transposed
// (Winograd, below, excepted). oneDNN on CPU has no float64 convolution or
// pooling, so float64 (and any float32 case oneDNN declines) runs through
// direct loops written here.
//
// Every kernel is single-threaded (oneDNN is held to one OpenMP thread on the
// calling thread) and knows nothing of the runtime: primitives/conv.cpp cuts
// the batch into chunks. Primitive descriptors are cached per shape and
// parameters in a small thread-safe cache, since creating them is costly. The
// kernel is laid out for oneDNN once per evaluation (ConvWeights), and weight
// gradients are summed over the chunks in oneDNN's layout and converted once
// (ConvWeightGradient).
//
// 3x3 stride-1 convolutions whose channels are multiples of 16 run oneDNN's
// Winograd F(4x4, 3x3) on AVX-512 CPUs, on channel-blocked copies of each
// chunk's data (see set_conv_winograd).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "tessera/core/dtype.hpp"

namespace tessera::kernels {

// The geometry of one convolution or pooling call. Spatial extents are given
// per spatial dimension, the first `spatial` entries read ([0] only for 1-d;
// [0] = height, [1] = width for 2-d; [0] = depth, [1] = height, [2] = width
// for 3-d). For pooling, channels_out == channels_in and `kernel` is the pool
// size. groups divides channels_in and channels_out (the primitives check it).
struct ConvShape {
  using Extents = std::array<int64_t, 3>;
  int spatial = 1;  // 1, 2 or 3
  int64_t batch = 0, channels_in = 0, channels_out = 0, groups = 1;
  Extents in{1, 1, 1}, kernel{1, 1, 1}, out{1, 1, 1};
  Extents stride{1, 1, 1}, dilation{1, 1, 1}, pad_lo{0, 0, 0}, pad_hi{0, 0, 0};

  int64_t in_size() const;      // elements of one sample of the input
  int64_t out_size() const;     // elements of one sample of the output
  int64_t weight_size() const;  // elements of the convolution kernel (grouped)
};

// The pass that reads a kernel laid out by ConvWeights.
enum class ConvPass { forward, backward_data };

// Winograd for eligible float32 convolutions: on by default; TESSERA_CONV_WINOGRAD=0
// turns it off at start. Its rounding error is about twice the direct
// algorithm's (1.4e-6 of the largest output against 0.7e-6 for 32 input
// channels, 2.4e-6 for 128); either way results do not depend on the thread
// count (chunks depend on the shapes only).
void set_conv_winograd(bool on);
bool conv_winograd();

// Whether float32 convolutions of shape s (any batch) run Winograd: enabled,
// supported by the CPU, 3x3 kernel, stride and dilation 1, no groups, channels
// multiples of 16.
bool uses_winograd(DType dt, const ConvShape& s);

// Samples per kernel call the implementation for s works best with (Winograd
// wants enough tiles per call but its transformed data within the caches), or
// 0 when the caller's cost model should decide.
int64_t preferred_chunk_samples(DType dt, const ConvShape& s);

// The kernel w of a convolution laid out once for every chunk of one
// evaluation of `pass`, for chunks of shape `chunk`; a
// chunk of another batch size whose implementation wants another layout
// reorders for itself. w must outlive this object.
class ConvWeights {
 public:
  ConvWeights(DType dt, ConvPass pass, const ConvShape& chunk, const void* w);
  const void* user() const { return user_; }

  struct Packed;  // oneDNN's layout and a buffer holding w in it
  const Packed* packed() const { return packed_.get(); }

 private:
  const void* user_;
  std::shared_ptr<const Packed> packed_;  // nullptr: chunks read w itself
};

// y = conv(x, w) for `batch` samples; y is fully written. dt: float32/float64.
void conv_forward(DType dt, const ConvShape& s, const void* x, const ConvWeights& w, void* y);

// dx = gradient of sum(conv(x, w) * g) with respect to x (fully written).
void conv_backward_data(DType dt, const ConvShape& s, const void* g, const ConvWeights& w,
                        void* dx);

// The gradient of sum(conv(x, w) * g) with respect to w over a batch cut into
// `chunks` chunks: add_chunk computes one chunk's partial sum (in oneDNN's
// layout for float32; distinct chunks may run on different threads at once),
// finish adds the partials in chunk order and writes dw in the caller's layout.
class ConvWeightGradient {
 public:
  ConvWeightGradient(DType dt, const ConvShape& s, int64_t chunks);
  ~ConvWeightGradient();
  ConvWeightGradient(const ConvWeightGradient&) = delete;
  ConvWeightGradient& operator=(const ConvWeightGradient&) = delete;

  // Chunk `index` of the batch: `part` samples of x and g.
  void add_chunk(int64_t index, const ConvShape& part, const void* x, const void* g);
  // add_chunk, and dx of the chunk's samples (as conv_backward_data with w,
  // laid out for chunks of this size) in the same call: g is read (and laid
  // out for Winograd) once for both gradients, while it is in cache.
  void add_chunk_and_data(int64_t index, const ConvShape& part, const void* x, const void* g,
                          const ConvWeights* w, void* dx);
  // dw (fully written); every chunk must have been added. The partials are
  // added element range by element range (each in chunk order, so the bits do
  // not depend on how the ranges are cut): `ranges`, when given, runs
  // body(begin, end) over [0, n) as it likes (the caller's threads), else
  // one range runs here.
  using Ranges =
      std::function<void(int64_t n, const std::function<void(int64_t, int64_t)>& body)>;
  void finish(void* dw, const Ranges& ranges = nullptr);

  struct Partial;

 private:
  DType dt_;
  ConvShape shape_;
  std::vector<std::unique_ptr<Partial>> partials_;
};

enum class PoolKind { max, average };

// Max pooling ignores padding; average pooling divides by the number of
// elements of the window inside the input (padding excluded, as Keras).
void pool_forward(DType dt, PoolKind kind, const ConvShape& s, const void* x, void* y);

// dx of sum(pool(x) * g) (fully written): max sends each g to the first
// maximum of its window (row-major order), average spreads it evenly.
void pool_backward(DType dt, PoolKind kind, const ConvShape& s, const void* x, const void* g,
                   void* dx);

// y[window] = c at the first maximum of x's window (row-major, as pool_backward):
// max pooling's forward derivative in the direction c, the adjoint of its
// backward (second-order gradients). y is shaped as the pooling's output.
void max_pool_select(DType dt, const ConvShape& s, const void* x, const void* c, void* y);

// Number of kernel calls oneDNN has executed since the process started (the
// float32 path; tests use it to check that oneDNN, not the loops, ran).
uint64_t onednn_calls();

// Number of those calls that ran Winograd (tests check which algorithm ran).
uint64_t winograd_calls();

}  // namespace tessera::kernels
