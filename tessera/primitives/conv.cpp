// Convolution and pooling primitives (family "nn"), channels last as Keras:
// conv1d/2d/3d, max_pool1d/2d/3d, avg_pool1d/2d/3d, and the backward
// primitives their gradient rules call.
//
// Each primitive checks its arguments, works out the geometry (output size and
// padding), and cuts the batch into chunks of a fixed number of samples, run
// in parallel with parallel_for; every chunk is one single-threaded kernel
// call (oneDNN for float32, loops for float64). The chunk size depends only on
// the shapes (and whether Winograd is on), never on the thread count, so
// results are identical for any number of threads; weight gradients add the
// per-chunk partial sums in chunk order.
#include <algorithm>
#include <array>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/kernels/conv.hpp"
#include "tessera/primitives/batch_norm_grad.hpp"
#include "tessera/primitives/registry.hpp"
#include "tessera/runtime/parallel.hpp"

namespace tessera {

namespace {

using kernels::ConvShape;
using kernels::PoolKind;

enum class Padding { valid, same, causal };

// Work per chunk of samples: large enough that a kernel call dwarfs its
// overhead, small enough for many chunks on a big batch.
constexpr double kChunkMacs = 4.0e6;
// Weight gradients use larger chunks: every chunk adds a partial gradient of
// the whole kernel, which finish() sums. At 1.6e7 a 3x3 stride-2 convolution
// of 64 to 128 channels (7x7 out) made 32 partials of 74K values each; its
// conv2d_grads at batch 128 took 4.5 ms on 2 threads, 4.1 ms at 6.4e7.
constexpr double kWeightChunkMacs = 6.4e7;
constexpr double kPoolChunkVisits = 1.0e6;
// Chunks a batch is cut into at least when the kernel prefers large ones.
constexpr int64_t kMinChunks = 4;

// Float dtype of a result: float32 only if every operand is float32.
DType float_result(std::initializer_list<DType> dts) {
  DType r = DType::float32;
  for (DType d : dts) {
    if (d != DType::float32) r = DType::float64;
  }
  return r;
}

const char* spatial_names(int spatial) {
  return spatial == 1   ? "(batch, steps, channels)"
         : spatial == 2 ? "(batch, height, width, channels)"
                        : "(batch, depth, height, width, channels)";
}

// "conv1d", "conv2d" or "conv3d".
std::string conv_name(int spatial) { return "conv" + std::to_string(spatial) + "d"; }

std::string extent_str(const ConvShape& s, const ConvShape::Extents& v) {
  if (s.spatial == 1) return std::to_string(v[0]);
  std::string text = "(";
  for (int d = 0; d < s.spatial; ++d) text += (d ? ", " : "") + std::to_string(v[d]);
  return text + ")";
}

// A positive integer per spatial dimension: an int, or (2-d, 3-d) a list of
// 2 or 3.
ConvShape::Extents spatial_arg(const Args& a, size_t i, int spatial) {
  std::vector<int64_t> v;
  const Value& val = a[i];
  if (val.is_int() || val.is_bool() || (val.is_array() && val.as_array().ndim() == 0)) {
    v.assign(static_cast<size_t>(spatial), a.integer(i));
  } else if (val.is_list() || val.is_array()) {
    v = a.int_list(i);
    if (static_cast<int>(v.size()) != spatial) {
      a.value_error(i, error_message("must be an integer or a list of ", spatial,
                                     spatial == 1 ? " integer" : " integers", ", got ",
                                     val.str()));
    }
  } else {
    a.type_error(i, spatial == 1   ? "an integer"
                    : spatial == 2 ? "an integer or a list of 2 integers"
                                   : "an integer or a list of 3 integers");
  }
  for (int64_t x : v) {
    if (x < 1) a.value_error(i, error_message("must be a positive integer, got ", val.str()));
  }
  ConvShape::Extents e{1, 1, 1};
  std::copy(v.begin(), v.end(), e.begin());
  return e;
}

Padding padding_arg(const Args& a, size_t i, bool allow_causal) {
  const std::string& p = a.string(i);
  if (p == "valid") return Padding::valid;
  if (p == "same") return Padding::same;
  if (p == "causal" && allow_causal) return Padding::causal;
  throw std::invalid_argument(error_message(
      "[", a.op(), "] padding must be ",
      allow_causal ? "'valid', 'same' or 'causal'" : "'valid' or 'same'", ", got '", p, "'"));
}

// Output extent and padding of one spatial dimension of input `n` under a
// window of effective size `k` and stride `st`; false when 'valid' does not fit.
bool window_geometry(Padding p, int64_t n, int64_t k, int64_t st, int64_t& out, int64_t& lo,
                     int64_t& hi) {
  switch (p) {
    case Padding::valid:
      if (k > n) return false;
      out = (n - k) / st + 1;
      lo = hi = 0;
      return true;
    case Padding::same: {
      // TensorFlow's split: the odd element of the padding goes to the end.
      out = (n + st - 1) / st;
      int64_t total = std::max<int64_t>((out - 1) * st + k - n, 0);
      lo = total / 2;
      hi = total - lo;
      return true;
    }
    case Padding::causal:
      lo = k - 1;
      hi = 0;
      out = (n - 1) / st + 1;
      return true;
  }
  return false;
}

Shape data_shape(const ConvShape& s, bool output) {
  Shape sh{s.batch};
  for (int d = 0; d < s.spatial; ++d) sh.push_back(output ? s.out[d] : s.in[d]);
  sh.push_back(output ? s.channels_out : s.channels_in);
  return sh;
}

// Checks the input and kernel shapes of a convolution and works out its
// geometry. `input_what` names the input in messages ("input" or "x_shape").
// The arguments stride, padding, dilation and groups follow each other from
// index `settings_i`.
ConvShape conv_geometry(const Args& a, int spatial, const Shape& x, const Shape& w,
                        size_t settings_i, const char* input_what) {
  const size_t stride_i = settings_i, padding_i = settings_i + 1, dilation_i = settings_i + 2,
               groups_i = settings_i + 3;
  const char* op = a.op();
  const size_t rank = static_cast<size_t>(spatial) + 2;
  if (x.size() != rank) {
    throw std::invalid_argument(error_message("[", op, "] ", input_what, " must be ", rank, "-d ",
                                              spatial_names(spatial), ", got shape ",
                                              shape_str(x)));
  }
  if (w.size() != rank) {
    throw std::invalid_argument(error_message(
        "[", op, "] kernel must be ", rank, "-d ",
        spatial == 1   ? "(kernel_size, in_channels, filters)"
        : spatial == 2 ? "(kernel_height, kernel_width, in_channels, filters)"
                       : "(kernel_depth, kernel_height, kernel_width, in_channels, filters)",
        ", got shape ", shape_str(w)));
  }
  for (int64_t d : w) {
    if (d < 1) {
      throw std::invalid_argument(error_message(
          "[", op, "] kernel dimensions must be positive, got shape ", shape_str(w)));
    }
  }
  for (int64_t d : x) {
    if (d < 0) {
      throw std::invalid_argument(
          error_message("[", op, "] ", input_what, " has a negative extent: ", shape_str(x)));
    }
  }
  const int64_t groups = a.integer(groups_i);
  if (groups < 1)
    a.value_error(groups_i, error_message("must be a positive integer, got ", groups));
  const int64_t channels = x[rank - 1], filters = w[rank - 1];
  if (groups == 1 && channels != w[rank - 2]) {
    throw std::invalid_argument(error_message(
        "[", op, "] input has ", channels, " channels but the kernel expects ", w[rank - 2],
        " (input shape ", shape_str(x), ", kernel shape ", shape_str(w), ")"));
  }
  if (channels % groups != 0) {
    throw std::invalid_argument(error_message("[", op, "] input channels (", channels,
                                              ") must be divisible by groups (", groups,
                                              "); input shape ", shape_str(x)));
  }
  if (filters % groups != 0) {
    throw std::invalid_argument(error_message("[", op, "] filters (", filters,
                                              ", the kernel's last dimension) must be divisible "
                                              "by groups (",
                                              groups, "); kernel shape ", shape_str(w)));
  }
  if (channels / groups != w[rank - 2]) {
    throw std::invalid_argument(
        error_message("[", op, "] input has ", channels, " channels in ", groups, " groups of ",
                      channels / groups, ", so the kernel's in_channels dimension must be ",
                      channels / groups, ", got ", w[rank - 2], " (input shape ", shape_str(x),
                      ", kernel shape ", shape_str(w), ")"));
  }
  ConvShape s;
  s.spatial = spatial;
  s.batch = x[0];
  s.channels_in = channels;
  s.channels_out = filters;
  s.groups = groups;
  s.stride = spatial_arg(a, stride_i, spatial);
  s.dilation = spatial_arg(a, dilation_i, spatial);
  const Padding pad = padding_arg(a, padding_i, spatial == 1);
  for (int d = 0; d < spatial; ++d) {
    s.in[d] = x[1 + d];
    s.kernel[d] = w[d];
    const int64_t effective = s.dilation[d] * (s.kernel[d] - 1) + 1;
    if (!window_geometry(pad, s.in[d], effective, s.stride[d], s.out[d], s.pad_lo[d],
                         s.pad_hi[d])) {
      throw std::invalid_argument(error_message(
          "[", op, "] kernel of effective size ", effective, " (size ", s.kernel[d],
          ", dilation ", s.dilation[d], ") is larger than the input (", s.in[d],
          spatial == 1 ? " steps" : d + 2 == spatial ? " rows" : d + 1 == spatial ? " columns"
                                                                               : " planes",
          ") with padding 'valid'"));
    }
  }
  return s;
}

// Pooling geometry: x, pool_size, strides (nil = pool_size), padding.
ConvShape pool_geometry(const Args& a, const Shape& x, int spatial, size_t pool_i,
                        size_t strides_i, size_t padding_i) {
  const char* op = a.op();
  const size_t rank = static_cast<size_t>(spatial) + 2;
  if (x.size() != rank) {
    throw std::invalid_argument(error_message("[", op, "] input must be ", rank, "-d ",
                                              spatial_names(spatial), ", got shape ",
                                              shape_str(x)));
  }
  ConvShape s;
  s.spatial = spatial;
  s.batch = x[0];
  s.channels_in = s.channels_out = x[rank - 1];
  s.kernel = spatial_arg(a, pool_i, spatial);
  s.stride = a.is_nil(strides_i) ? s.kernel : spatial_arg(a, strides_i, spatial);
  const Padding pad = padding_arg(a, padding_i, false);
  bool fits = true;
  for (int d = 0; d < spatial; ++d) {
    s.in[d] = x[1 + d];
    fits = window_geometry(pad, s.in[d], s.kernel[d], s.stride[d], s.out[d], s.pad_lo[d],
                           s.pad_hi[d]) && fits;
  }
  if (!fits) {
    throw std::invalid_argument(error_message(
        "[", op, "] pool_size ", extent_str(s, s.kernel), " is larger than the input ",
        extent_str(s, s.in), " with padding 'valid'"));
  }
  return s;
}

// The shape argument of a backward primitive (a list of ints or 1-d array).
Shape grad_shape_arg(const Args& a, size_t i) { return a.int_list(i); }

void check_grad_shape(const Args& a, const Array& g, const ConvShape& s) {
  Shape expected = data_shape(s, true);
  if (g.shape() != expected) {
    throw std::invalid_argument(
        error_message("[", a.op(), "] ", a.param_name(0), " has shape ", shape_str(g.shape()),
                      " but the forward result has shape ", shape_str(expected)));
  }
}

int64_t macs_per_sample(const ConvShape& s) {
  int64_t m = s.channels_in / s.groups * s.channels_out;
  for (int d = 0; d < s.spatial; ++d) m *= s.out[d] * s.kernel[d];
  return std::max<int64_t>(m, 1);
}

int64_t visits_per_sample(const ConvShape& s) {
  int64_t m = s.channels_in;
  for (int d = 0; d < s.spatial; ++d) m *= std::max(s.out[d], s.in[d]) * s.kernel[d];
  return std::max<int64_t>(m, 1);
}

double ns_per_mac(DType dt) { return dt == DType::float32 ? 0.05 : 0.3; }

// Runs body(chunk_index, shape_of_chunk, first_sample) over fixed chunks of
// `chunk` samples in parallel.
template <class Body>
void over_chunks(const ConvShape& s, int64_t chunk, double ns_per_sample, Body&& body) {
  const int64_t n = s.batch;
  if (n == 0) return;
  const int64_t chunks = (n + chunk - 1) / chunk;
  parallel_for(chunks, ns_per_sample * static_cast<double>(chunk),
               [&](int64_t begin, int64_t end) {
                 for (int64_t c = begin; c < end; ++c) {
                   ConvShape part = s;
                   part.batch = std::min(n, (c + 1) * chunk) - c * chunk;
                   body(c, part, c * chunk);
                 }
               });
}

int64_t chunk_samples(double per_chunk, int64_t per_sample, int64_t n) {
  const int64_t most = std::clamp<int64_t>(
      static_cast<int64_t>(per_chunk / static_cast<double>(per_sample)), 1,
      std::max<int64_t>(n, 1));
  // As many chunks as `most` samples each need, evened out (39, 39, 39, 11
  // would leave a thread idle while another works on twice the samples).
  const int64_t chunks = (n + most - 1) / most;
  return chunks > 1 ? (n + chunks - 1) / chunks : most;
}

char* at(Array& a, int64_t elements) {
  return static_cast<char*>(a.raw()) + elements * static_cast<int64_t>(dtype_size(a.dtype()));
}
const char* at(const Array& a, int64_t elements) {
  return static_cast<const char*>(a.raw()) +
         elements * static_cast<int64_t>(dtype_size(a.dtype()));
}

// Samples per kernel call: what the kernel's algorithm prefers (Winograd), or
// enough multiply-adds (`per_chunk`) to dwarf a call's overhead; at most a
// quarter of the batch when that still makes calls of kChunkMacs: with only
// one or two chunks, a worker that the machine's other processes slow down
// holds up the whole call.
int64_t conv_chunk(DType dt, const ConvShape& s, double per_chunk) {
  const int64_t quarter = std::max<int64_t>((s.batch + kMinChunks - 1) / kMinChunks, 1);
  const int64_t preferred = kernels::preferred_chunk_samples(dt, s);
  if (preferred > 0) {
    return std::clamp<int64_t>(std::min(preferred, quarter), 1, std::max<int64_t>(s.batch, 1));
  }
  const double macs = static_cast<double>(macs_per_sample(s));
  int64_t most = std::max<int64_t>(static_cast<int64_t>(per_chunk / macs), 1);
  if (static_cast<double>(quarter) * macs >= kChunkMacs) most = std::min(most, quarter);
  return chunk_samples(static_cast<double>(most), 1, s.batch);
}

// Runs a weight gradient's sum of partials over the runtime's threads.
kernels::ConvWeightGradient::Ranges parallel_ranges(double ns_per_element) {
  return [ns_per_element](int64_t n, const std::function<void(int64_t, int64_t)>& body) {
    parallel_for(n, ns_per_element, body);
  };
}

// Nanoseconds per element of that sum: one add per partial beyond the first.
double sum_ns(const ConvShape& s, int64_t chunk) {
  return 0.3 * static_cast<double>(std::max<int64_t>((s.batch + chunk - 1) / chunk - 1, 0));
}

ConvShape with_batch(ConvShape s, int64_t batch) {
  s.batch = batch;
  return s;
}

// bias (one value per filter) and relu applied to a chunk's output while it
// is still in cache (conv*_bias, conv*_bias_relu).
template <class T>
void bias_epilogue(T* y, const T* b, int64_t rows, int64_t channels, bool relu) {
  for (int64_t r = 0; r < rows; ++r, y += channels) {
    if (relu) {
      for (int64_t c = 0; c < channels; ++c) y[c] = std::max(y[c] + b[c], T(0));
    } else {
      for (int64_t c = 0; c < channels; ++c) y[c] += b[c];
    }
  }
}

// y = conv(x, w), then + bias and relu when given (bias: x's dtype, one
// value per filter).
Array conv_forward(const ConvShape& s, const Array& x, const Array& w, const char* op,
                   const Array* bias = nullptr, bool relu = false) {
  Shape shape = data_shape(s, true);
  shape_size(shape, op);
  Array y(x.dtype(), shape);
  const int64_t chunk = conv_chunk(x.dtype(), s, kChunkMacs);
  // The kernel is laid out for the implementation once, not per chunk.
  const kernels::ConvWeights packed(x.dtype(), kernels::ConvPass::forward, with_batch(s, chunk),
                                    w.raw());
  const int64_t positions = s.out_size() / std::max<int64_t>(s.channels_out, 1);
  over_chunks(s, chunk, ns_per_mac(x.dtype()) * macs_per_sample(s),
              [&](int64_t, const ConvShape& part, int64_t first) {
                char* out = at(y, first * s.out_size());
                kernels::conv_forward(x.dtype(), part, at(x, first * s.in_size()), packed, out);
                if (!bias) return;
                const int64_t rows = part.batch * positions;
                if (x.dtype() == DType::float32) {
                  bias_epilogue(reinterpret_cast<float*>(out), bias->data<float>(), rows,
                                s.channels_out, relu);
                } else {
                  bias_epilogue(reinterpret_cast<double*>(out), bias->data<double>(), rows,
                                s.channels_out, relu);
                }
              });
  return y;
}

Array conv_grad_input(const ConvShape& s, const Array& g, const Array& w, const char* op) {
  Shape shape = data_shape(s, false);
  shape_size(shape, op);
  Array dx(g.dtype(), shape);
  const int64_t chunk = conv_chunk(g.dtype(), s, kChunkMacs);
  const kernels::ConvWeights packed(g.dtype(), kernels::ConvPass::backward_data,
                                    with_batch(s, chunk), w.raw());
  over_chunks(s, chunk, ns_per_mac(g.dtype()) * macs_per_sample(s),
              [&](int64_t, const ConvShape& part, int64_t first) {
                kernels::conv_backward_data(g.dtype(), part, at(g, first * s.out_size()), packed,
                                            at(dx, first * s.in_size()));
              });
  return dx;
}

Array conv_grad_weight(const ConvShape& s, const Array& g, const Array& x, const Shape& w_shape) {
  const DType dt = g.dtype();
  Array dw = Array::zeros(dt, w_shape);
  if (s.batch == 0) return dw;
  const int64_t chunk = conv_chunk(dt, s, kWeightChunkMacs);
  // One partial gradient per chunk, added in chunk order by finish.
  kernels::ConvWeightGradient sum(dt, s, (s.batch + chunk - 1) / chunk);
  over_chunks(s, chunk, ns_per_mac(dt) * macs_per_sample(s),
              [&](int64_t c, const ConvShape& part, int64_t first) {
                sum.add_chunk(c, part, at(x, first * s.in_size()), at(g, first * s.out_size()));
              });
  sum.finish(dw.raw(), parallel_ranges(sum_ns(s, chunk)));
  return dw;
}

// Where a chunk of dy comes from: the chunk's index, its shape and its first
// sample give the chunk's dy (dy's dtype, part.batch * s.out_size() values:
// out_size is per sample).
using ChunkSource = std::function<const void*(int64_t, const ConvShape&, int64_t)>;

// Both gradients of a convolution in one pass over the batch: each chunk's
// data gradient and partial weight gradient are computed together, reading
// the chunk of dy once (laid out once for Winograd) while it is in cache.
List conv_grads(const ConvShape& s, DType dt, const ChunkSource& dy, const Array& x,
                const Array& w, const char* op) {
  Shape shape = data_shape(s, false);
  shape_size(shape, op);
  Array dx(dt, shape);
  Array dw = Array::zeros(dt, w.shape());
  if (s.batch > 0) {
    const int64_t chunk = conv_chunk(dt, s, kWeightChunkMacs);
    const kernels::ConvWeights packed(dt, kernels::ConvPass::backward_data, with_batch(s, chunk),
                                      w.raw());
    kernels::ConvWeightGradient sum(dt, s, (s.batch + chunk - 1) / chunk);
    over_chunks(s, chunk, 2.0 * ns_per_mac(dt) * macs_per_sample(s),
                [&](int64_t c, const ConvShape& part, int64_t first) {
                  sum.add_chunk_and_data(c, part, at(x, first * s.in_size()),
                                         dy(c, part, first), &packed,
                                         at(dx, first * s.in_size()));
                });
    sum.finish(dw.raw(), parallel_ranges(sum_ns(s, chunk)));
  }
  return List{Value(std::move(dx)), Value(std::move(dw))};
}

List conv_grads(const ConvShape& s, const Array& g, const Array& x, const Array& w,
                const char* op) {
  return conv_grads(
      s, g.dtype(),
      [&](int64_t, const ConvShape&, int64_t first) -> const void* {
        return at(g, first * s.out_size());
      },
      x, w, op);
}

// A buffer of each thread's for the chunk of dy it computes (conv*_grads_bn).
class ChunkBuffer {
 public:
  ChunkBuffer() = default;
  ChunkBuffer(const ChunkBuffer&) = delete;
  ChunkBuffer& operator=(const ChunkBuffer&) = delete;
  ~ChunkBuffer() { std::free(data_); }
  void* get(size_t bytes) {
    if (bytes > size_) {
      std::free(data_);
      data_ = nullptr;
      size_ = 0;
      const size_t rounded = (std::max<size_t>(bytes, 64) + 63) / 64 * 64;
      data_ = std::aligned_alloc(64, rounded);
      if (data_ == nullptr) throw std::bad_alloc();
      size_ = rounded;
    }
    return data_;
  }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

// conv1d / conv2d (x, w, stride(s), padding, dilation, groups).
Value conv_eval(Args& a, int spatial) {
  Array x0 = a.array(0), w0 = a.array(1);
  const DType dt = float_result({x0.dtype(), w0.dtype()});
  ConvShape s = conv_geometry(a, spatial, x0.shape(), w0.shape(), 2, "input");
  return conv_forward(s, x0.astype(dt), w0.astype(dt), a.op());
}

// conv*_bias(x, w, b, stride(s), padding, dilation, groups) and conv*_bias_relu.
Value conv_bias_eval(Args& a, int spatial, bool relu) {
  Array x0 = a.array(0), w0 = a.array(1), b0 = a.array(2);
  const DType dt = float_result({x0.dtype(), w0.dtype(), b0.dtype()});
  ConvShape s = conv_geometry(a, spatial, x0.shape(), w0.shape(), 3, "input");
  if (b0.ndim() != 1 || b0.size() != s.channels_out) {
    throw std::invalid_argument(error_message("[", a.op(), "] bias has shape ",
                                              shape_str(b0.shape()), " but the kernel has ",
                                              s.channels_out, " filters: expected (",
                                              s.channels_out, ",)"));
  }
  Array b = b0.astype(dt);
  return conv_forward(s, x0.astype(dt), w0.astype(dt), a.op(), &b, relu);
}

// conv*_grad_input(dy, w, x_shape, stride(s), padding, dilation, groups).
Value conv_grad_input_eval(Args& a, int spatial) {
  Array g0 = a.array(0), w0 = a.array(1);
  const DType dt = float_result({g0.dtype(), w0.dtype()});
  ConvShape s = conv_geometry(a, spatial, grad_shape_arg(a, 2), w0.shape(), 3, "x_shape");
  check_grad_shape(a, g0, s);
  return conv_grad_input(s, g0.astype(dt), w0.astype(dt), a.op());
}

// conv*_grad_weight(g, x, w_shape, stride(s), padding, dilation, groups).
Value conv_grad_weight_eval(Args& a, int spatial) {
  Array g0 = a.array(0), x0 = a.array(1);
  const DType dt = float_result({g0.dtype(), x0.dtype()});
  Shape w_shape = grad_shape_arg(a, 2);
  ConvShape s = conv_geometry(a, spatial, x0.shape(), w_shape, 3, "input");
  check_grad_shape(a, g0, s);
  return conv_grad_weight(s, g0.astype(dt), x0.astype(dt), w_shape);
}

// conv*_grads(dy, x, w, stride(s), padding, dilation, groups).
Value conv_grads_eval(Args& a, int spatial) {
  Array g0 = a.array(0), x0 = a.array(1), w0 = a.array(2);
  const DType dt = float_result({g0.dtype(), x0.dtype(), w0.dtype()});
  ConvShape s = conv_geometry(a, spatial, x0.shape(), w0.shape(), 3, "input");
  check_grad_shape(a, g0, s);
  return Value(conv_grads(s, g0.astype(dt), x0.astype(dt), w0.astype(dt), a.op()));
}

// conv*_grads_bn(bn, x, w, stride(s), padding, dilation, groups): conv*_grads
// of dy = batch_norm_grad(bn...), each chunk of dy computed into a buffer of
// the thread's and consumed by the convolution's backward while in cache.
Value conv_grads_bn_eval(Args& a, int spatial) {
  static const PrimitiveSpec* bn_spec = find_primitive("batch_norm_grad");
  if (!a[0].is_list() || bn_spec == nullptr ||
      a[0].as_list().size() != bn_spec->params.size()) {
    throw std::invalid_argument(error_message(
        "[", a.op(), "] bn must be the list of batch_norm_grad's ",
        bn_spec ? bn_spec->params.size() : 0,
        " arguments (g, x, gamma, mean, var, epsilon, training, stats, sums, y), got ",
        a[0].describe()));
  }
  const List& items = a[0].as_list();
  Args bn(*bn_spec, std::vector<Value>(items.begin(), items.end()));
  BatchNormGradRows dy = batch_norm_grad_rows(bn);
  Array x0 = a.array(1), w0 = a.array(2);
  const DType dt = float_result({dy.dtype, x0.dtype(), w0.dtype()});
  ConvShape s = conv_geometry(a, spatial, x0.shape(), w0.shape(), 3, "input");
  const Shape expected = data_shape(s, true);
  if (dy.shape != expected) {
    throw std::invalid_argument(error_message(
        "[", a.op(), "] the batch norm's input has shape ", shape_str(dy.shape),
        " but the convolution's output has shape ", shape_str(expected)));
  }
  Array x = x0.astype(dt), w = w0.astype(dt);
  const int64_t positions = s.out_size() / std::max<int64_t>(s.channels_out, 1);
  if (dy.dtype != dt || dy.rows * dy.channels == 0) {
    // dy in its own dtype, then converted (a float64 batch norm after a
    // float32 convolution): computed whole.
    Array whole(dy.dtype, dy.shape);
    if (dy.rows * dy.channels > 0) batch_norm_grad_all_rows(dy, whole.raw());
    return Value(conv_grads(s, whole.astype(dt), x, w, a.op()));
  }
  thread_local ChunkBuffer buffer;
  return Value(conv_grads(
      s, dt,
      [&](int64_t, const ConvShape& part, int64_t first) -> const void* {
        void* out =
            buffer.get(static_cast<size_t>(part.batch * s.out_size()) * dtype_size(dt));
        dy.compute(dy.g, first * positions, (first + part.batch) * positions, out);
        return out;
      },
      x, w, a.op()));
}

// max/avg_pool*(x, pool_size, strides, padding).
Value pool_eval(Args& a, int spatial, PoolKind kind) {
  Array x0 = a.array(0);
  const DType dt = float_result({x0.dtype()});
  ConvShape s = pool_geometry(a, x0.shape(), spatial, 1, 2, 3);
  Array x = x0.astype(dt);
  Shape shape = data_shape(s, true);
  shape_size(shape, a.op());
  Array y(dt, shape);
  const int64_t visits = visits_per_sample(s);
  over_chunks(s, chunk_samples(kPoolChunkVisits, visits, s.batch), 0.5 * visits,
              [&](int64_t, const ConvShape& part, int64_t first) {
                kernels::pool_forward(dt, kind, part, at(x, first * s.in_size()),
                                      at(y, first * s.out_size()));
              });
  return y;
}

// max/avg_pool*_grad(g, x, pool_size, strides, padding).
Value pool_grad_eval(Args& a, int spatial, PoolKind kind) {
  Array g0 = a.array(0), x0 = a.array(1);
  const DType dt = float_result({g0.dtype(), x0.dtype()});
  ConvShape s = pool_geometry(a, x0.shape(), spatial, 2, 3, 4);
  check_grad_shape(a, g0, s);
  Array g = g0.astype(dt), x = x0.astype(dt);
  Array dx(dt, x.shape());
  const int64_t visits = visits_per_sample(s);
  over_chunks(s, chunk_samples(kPoolChunkVisits, visits, s.batch), 1.0 * visits,
              [&](int64_t, const ConvShape& part, int64_t first) {
                kernels::pool_backward(dt, kind, part, at(x, first * s.in_size()),
                                       at(g, first * s.out_size()), at(dx, first * s.in_size()));
              });
  return dx;
}

// max_pool*_select(c, x, pool_size, strides, padding): c (shaped as x) at
// the first maximum of each of x's windows.
Value max_pool_select_eval(Args& a, int spatial) {
  Array c0 = a.array(0), x0 = a.array(1);
  const DType dt = float_result({c0.dtype(), x0.dtype()});
  ConvShape s = pool_geometry(a, x0.shape(), spatial, 2, 3, 4);
  if (c0.shape() != x0.shape()) {
    a.value_error(0, "must have x's shape " + shape_str(x0.shape()) + ", got " +
                         shape_str(c0.shape()));
  }
  Array c = c0.astype(dt), x = x0.astype(dt);
  Shape shape = data_shape(s, true);
  Array y(dt, shape);
  const int64_t visits = visits_per_sample(s);
  over_chunks(s, chunk_samples(kPoolChunkVisits, visits, s.batch), 0.5 * visits,
              [&](int64_t, const ConvShape& part, int64_t first) {
                kernels::max_pool_select(dt, part, at(x, first * s.in_size()),
                                         at(c, first * s.in_size()),
                                         at(y, first * s.out_size()));
              });
  return y;
}

const char* kDtypeNote =
    " float32 runs through oneDNN; float64 (which oneDNN does not support on CPU) through "
    "direct loops. Integer and bool inputs become float64; float32 stays float32 only when "
    "every array operand is float32. The batch is cut into fixed chunks run in parallel, so "
    "results do not depend on the thread count.";

std::string with_note(std::string text) { return text + kDtypeNote; }

Value str(const char* s) { return Value(std::string(s)); }

PrimitiveSpec pool_spec(const char* name, int spatial, PoolKind kind) {
  const bool max = kind == PoolKind::max;
  std::string dims = spatial_names(spatial);
  std::string grad = std::string(name) + "_grad(g, x, pool_size, strides, padding)";
  return PrimitiveSpec{
      .name = name,
      .family = "nn",
      .params = {{"x"}, opt("pool_size", Value(int64_t{2})), opt("strides", Value()),
                 opt("padding", str("valid"))},
      .help = with_note(
          std::string(max ? "Max" : "Average") + " pooling of x " + dims +
          " over windows of pool_size" +
          (spatial == 2   ? " (an int or [ph, pw])"
           : spatial == 3 ? " (an int or [pd, ph, pw])"
                          : "") +
          " moved by strides (nil: pool_size). padding 'valid' keeps whole windows only; "
          "'same' gives ceil(n / stride) outputs with TensorFlow's padding split" +
          (max ? " (padding never wins the max)." : ", averaging only the elements inside the "
                                                    "input (Keras).")),
      .eval = [spatial, kind](Args& a) -> Value { return pool_eval(a, spatial, kind); },
      .ns_per_element = 2.0,
      .grads = {grad, "", "", ""}};
}

PrimitiveSpec pool_grad_spec(const char* name, const char* forward, int spatial, PoolKind kind) {
  return PrimitiveSpec{
      .name = name,
      .family = "nn",
      .params = {{"g"}, {"x"}, opt("pool_size", Value(int64_t{2})), opt("strides", Value()),
                 opt("padding", str("valid"))},
      .help = with_note(std::string("Backward of ") + forward +
                        ": the gradient with respect to x of sum(" + forward +
                        "(x, ...) * g). " +
                        (kind == PoolKind::max
                             ? "Each g goes to the first maximum of its window (row-major)."
                             : "Each g is spread evenly over the input elements of its window.")),
      .eval = [spatial, kind](Args& a) -> Value { return pool_grad_eval(a, spatial, kind); },
      .ns_per_element = 2.0,
      // Both backwards are linear in g (second derivatives): average pooling's
      // adjoint is the pooling itself, max pooling's picks the adjoint at x's
      // maxima (max_pool*_select). Neither has a part in x: max pooling's
      // routing is piecewise constant in x (zero almost everywhere, as JAX).
      .grads = {std::string(forward) + (kind == PoolKind::max ? "_select" : "") +
                    "(adjoint, " + (kind == PoolKind::max ? "x, " : "") +
                    "pool_size, strides, padding)",
                "", "", "", ""}};
}

PrimitiveSpec max_pool_select_spec(const char* name, const char* forward, int spatial) {
  return PrimitiveSpec{
      .name = name,
      .family = "nn",
      .params = {{"c"}, {"x"}, opt("pool_size", Value(int64_t{2})), opt("strides", Value()),
                 opt("padding", str("valid"))},
      .help = std::string("c (shaped as x) taken where ") + forward +
              "(x, ...) takes its values: each window's first maximum (row-major), as " +
              forward + "_grad routes g. The derivative of " + forward +
              " in the direction c, the adjoint of " + forward +
              "_grad (second-order gradients); shaped as " + forward +
              "'s result. Integer and bool inputs become float64.",
      .eval = [spatial](Args& a) -> Value { return max_pool_select_eval(a, spatial); },
      .ns_per_element = 2.0,
      .grads = {std::string(forward) + "_grad(adjoint, x, pool_size, strides, padding)", "", "",
                "", ""}};
}

// The settings every convolution primitive takes after its arrays; conv1d
// names its stride "stride", conv2d and conv3d "strides", as Keras does.
std::vector<Param> conv_params(int spatial, std::vector<Param> head) {
  head.push_back(opt(spatial == 1 ? "stride" : "strides", Value(int64_t{1})));
  head.push_back(opt("padding", str("valid")));
  head.push_back(opt("dilation", Value(int64_t{1})));
  head.push_back(opt("groups", Value(int64_t{1})));
  return head;
}

// "stride, padding, dilation, groups" as the gradient rules pass them on.
std::string conv_settings(int spatial) {
  return std::string(spatial == 1 ? "stride" : "strides") + ", padding, dilation, groups";
}

const char* kGroupsNote =
    " groups (Keras's groups): channels and filters must both be divisible by it; the kernel's "
    "in_channels dimension is channels / groups, and output channel f reads only the input "
    "channels of group f // (filters / groups).";

PrimitiveSpec conv_spec(int spatial) {
  const std::string conv = conv_name(spatial);
  const std::string set = conv_settings(spatial);
  std::string help =
      spatial == 1
          ? "1-d convolution (cross-correlation, as Keras Conv1D, no bias) of x (batch, steps, "
            "channels) with kernel w (kernel_size, channels / groups, filters); result (batch, "
            "out_steps, filters). padding: 'valid' (no padding), 'same' (ceil(steps / stride) "
            "outputs, TensorFlow's padding split, the extra element at the end) or 'causal' "
            "(left padding (kernel_size - 1) * dilation: output t sees inputs up to t)."
          : "2-d convolution (cross-correlation, as Keras Conv2D, no bias) of x (batch, height, "
            "width, channels) with kernel w (kernel_height, kernel_width, channels / groups, "
            "filters); result (batch, out_height, out_width, filters). strides and dilation: an "
            "int or [vertical, horizontal]. padding: 'valid' or 'same' (ceil(n / stride) "
            "outputs, TensorFlow's padding split).";
  if (spatial == 3) {
    help =
        "3-d convolution (cross-correlation, as Keras Conv3D, no bias) of x (batch, depth, "
        "height, width, channels) with kernel w (kernel_depth, kernel_height, kernel_width, "
        "channels / groups, filters); result (batch, out_depth, out_height, out_width, "
        "filters). strides and dilation: an int or [depth, vertical, horizontal]. padding: "
        "'valid' or 'same' (ceil(n / stride) outputs, TensorFlow's padding split).";
  }
  help += kGroupsNote;
  if (spatial == 2) {
    help +=
        " A depthwise convolution (Keras DepthwiseConv2D, kernel (kh, kw, channels, m)) is "
        "conv2d with groups = channels and that kernel reshaped to (kh, kw, 1, channels * m): "
        "output channel c * m + j is input channel c under the kernel's [:, :, c, j]. float32 "
        "3x3 stride-1 convolutions with channels and filters multiples of 16 (and their "
        "gradients) run Winograd on AVX-512 CPUs: faster, with about twice the rounding error "
        "(tessera.set_conv_winograd(False) or TESSERA_CONV_WINOGRAD=0 turn it off).";
  }
  return PrimitiveSpec{
      .name = conv,
      .family = "nn",
      .params = conv_params(spatial, {{"x"}, {"w"}}),
      .help = with_note(help),
      .eval = [spatial](Args& a) -> Value { return conv_eval(a, spatial); },
      .ns_per_element = 20.0,
      .grads = {"if(is_nil(common), " + conv + "_grad_input(g, w, shape(x), " + set +
                    "), common[0])",
                "if(is_nil(common), " + conv + "_grad_weight(g, x, shape(w), " + set +
                    "), common[1])",
                "", "", "", ""},
      // Both gradients (the usual case) in one pass over the batch.
      .grad_common = conv + "_grads(g, x, w, " + set + ")",
      .grad_common_users = 2,
      // A batch norm after the convolution: its backward a chunk at a time
      // inside that pass (conv*_grads_bn).
      .grad_fusion_producer = "batch_norm_grad",
      .grad_fusion_common = conv + "_grads_bn(g, x, w, " + set + ")"};
}

// conv*_grads: both gradients of a convolution at once (what differentiating
// conv* with respect to x and w computes). Its rules are those of
// conv*_grad_input and conv*_grad_weight, for the cotangents of its two
// results (second derivatives).
PrimitiveSpec conv_grads_spec(int spatial) {
  const std::string conv = conv_name(spatial);
  const std::string set = conv_settings(spatial);
  std::string help = "Backward of " + conv + " for both the input and the kernel: [" + conv +
                     "_grad_input(dy, w, shape(x), ...), " + conv +
                     "_grad_weight(dy, x, shape(w), ...)] computed in one pass over the "
                     "batch (each chunk of dy is read once for both). groups: as in " +
                     conv + ".";
  const std::string gx = "getitem(g, 0)", gw = "getitem(g, 1)";
  return PrimitiveSpec{
      .name = conv + "_grads",
      .family = "nn",
      .params = conv_params(spatial, {{"dy"}, {"x"}, {"w"}}),
      .help = with_note(help),
      .eval = [spatial](Args& a) -> Value { return conv_grads_eval(a, spatial); },
      .ns_per_element = 40.0,
      .grads = {"grad_accumulate(if(is_nil(" + gx + "), nil, " + conv + "(" + gx + ", w, " + set +
                    ")), if(is_nil(" + gw + "), nil, " + conv + "(x, " + gw + ", " + set + ")))",
                "if(is_nil(" + gw + "), nil, " + conv + "_grad_input(dy, " + gw + ", shape(x), " +
                    set + "))",
                "if(is_nil(" + gx + "), nil, " + conv + "_grad_weight(dy, " + gx + ", shape(w), " +
                    set + "))",
                "", "", "", ""}};
}

// conv*_grads_bn: conv*_grads of a batch norm's backward, fused (what
// differentiating a convolution read only by a batch norm computes; autodiff
// writes it, see PrimitiveSpec::grad_fusion_producer). Not differentiable, as
// batch_norm_grad is not.
PrimitiveSpec conv_grads_bn_spec(int spatial) {
  const std::string conv = conv_name(spatial);
  std::string help =
      "Backward of " + conv + " followed by a batch norm, for the convolution's input and "
      "kernel: " + conv + "_grads(batch_norm_grad(bn...), x, w, ...), with bn the list of "
      "batch_norm_grad's arguments (g, x, gamma, mean, var, epsilon, training, stats, sums, y; "
      "its x is the convolution's output). The batch norm's backward is computed a chunk of "
      "samples at a time, each chunk going into the convolution's backward while in cache "
      "(never written out whole). Autodiff uses it where a convolution's output is read only "
      "by a batch norm.";
  return PrimitiveSpec{
      .name = conv + "_grads_bn",
      .family = "nn",
      .params = conv_params(spatial, {{"bn"}, {"x"}, {"w"}}),
      .help = with_note(help),
      .eval = [spatial](Args& a) -> Value { return conv_grads_bn_eval(a, spatial); },
      .ns_per_element = 40.0};
}

// conv*_grad_input is also the transposed convolution, so it has gradient
// rules of its own: it is linear in dy (its adjoint is the forward
// convolution) and in w.
PrimitiveSpec conv_grad_input_spec(int spatial) {
  const std::string conv = conv_name(spatial);
  const std::string set = conv_settings(spatial);
  std::string help = "Backward of " + conv;
  help += " for the input: the gradient with respect to x (of shape x_shape) of sum(" + conv;
  help += "(x, w, ...) * dy), dy having the shape of " + conv + "'s result. It is also the ";
  help += spatial == 1   ? "transposed convolution (Keras Conv1DTranspose, no bias) of dy "
                           "(in_channels channels) with a kernel (kernel_size, filters / groups, "
                           "in_channels)"
          : spatial == 2 ? "transposed convolution (Keras Conv2DTranspose, no bias) of dy "
                           "(in_channels channels) with a kernel (kernel_height, kernel_width, "
                           "filters / groups, in_channels)"
                         : "transposed convolution (Keras Conv3DTranspose, no bias) of dy "
                           "(in_channels channels) with a kernel (kernel_depth, kernel_height, "
                           "kernel_width, filters / groups, in_channels)";
  help += ", to the output shape x_shape, one of the shapes that " + conv;
  help +=
      " with these settings maps to dy's (Keras's output length for n inputs: n * stride + "
      "max(k - stride, 0) for 'valid', n * stride for 'same', with k = (kernel_size - 1) * "
      "dilation + 1). groups: as in ";
  help += conv + ".";
  return PrimitiveSpec{
      .name = conv + "_grad_input",
      .family = "nn",
      .params = conv_params(spatial, {{"dy"}, {"w"}, {"x_shape"}}),
      .help = with_note(help),
      .eval = [spatial](Args& a) -> Value { return conv_grad_input_eval(a, spatial); },
      .ns_per_element = 20.0,
      .grads = {conv + "(g, w, " + set + ")", conv + "_grad_weight(dy, g, shape(w), " + set + ")",
                "", "", "", "", ""}};
}

// conv*_grad_weight is bilinear in dy and x; its rules give second
// derivatives (a gradient of a gradient).
PrimitiveSpec conv_grad_weight_spec(int spatial) {
  const std::string conv = conv_name(spatial);
  const std::string set = conv_settings(spatial);
  std::string help = "Backward of " + conv;
  help += " for the kernel: the gradient with respect to w (of shape w_shape) of sum(" + conv;
  help += "(x, w, ...) * dy), summed over the batch in a fixed order. groups: as in " + conv + ".";
  return PrimitiveSpec{
      .name = conv + "_grad_weight",
      .family = "nn",
      .params = conv_params(spatial, {{"dy"}, {"x"}, {"w_shape"}}),
      .help = with_note(help),
      .eval = [spatial](Args& a) -> Value { return conv_grad_weight_eval(a, spatial); },
      .ns_per_element = 20.0,
      .grads = {conv + "(x, g, " + set + ")", conv + "_grad_input(dy, g, shape(x), " + set + ")",
                "", "", "", "", ""}};
}

// conv*_bias and conv*_bias_relu: the convolution, its bias and (for _relu)
// the rectifier in one pass: each chunk of samples gets its bias and relu
// while the convolution's output is still in cache, instead of two more
// passes over the whole activation (and two more arrays of its size).
PrimitiveSpec conv_bias_spec(int spatial, bool relu) {
  const std::string conv = conv_name(spatial);
  const std::string layer = "Conv" + std::to_string(spatial) + "D";
  const std::string set = conv_settings(spatial);
  const std::string gy = relu ? "common" : "g";
  PrimitiveSpec spec{
      .name = conv + (relu ? "_bias_relu" : "_bias"),
      .family = "nn",
      .params = conv_params(spatial, {{"x"}, {"w"}, {"b"}}),
      .help = (relu ? "relu(bias_add(" + conv + "(x, w, ...), b))" : "bias_add(" + conv +
                                                                          "(x, w, ...), b)") +
              " in one pass over the result, as a Keras " + layer + " layer with a bias" +
              (relu ? " and activation='relu'" : "") +
              " (tessera.nn's layers use it); b has one value per filter.",
      .eval = [spatial, relu](Args& a) -> Value { return conv_bias_eval(a, spatial, relu); },
      .ns_per_element = 20.0,
      .grads = {conv + "_grad_input(" + gy + ", w, shape(x), " + set + ")",
                conv + "_grad_weight(" + gy + ", x, shape(w), " + set + ")",
                "bias_add_grad(" + gy + ")", "", "", "", ""}};
  // The cotangent through the relu, computed once for the three rules.
  if (relu) spec.grad_common = "relu_grad(g, out)";
  return spec;
}

const bool registered_conv = register_primitives({
    conv_spec(1),
    conv_grad_input_spec(1),
    conv_grad_weight_spec(1),
    conv_grads_spec(1),
    conv_grads_bn_spec(1),
    conv_spec(2),
    conv_grad_input_spec(2),
    conv_grad_weight_spec(2),
    conv_grads_spec(2),
    conv_grads_bn_spec(2),
    conv_bias_spec(1, false),
    conv_bias_spec(1, true),
    conv_bias_spec(2, false),
    conv_bias_spec(2, true),
    conv_spec(3),
    conv_grad_input_spec(3),
    conv_grad_weight_spec(3),
    conv_grads_spec(3),
    conv_grads_bn_spec(3),
    conv_bias_spec(3, false),
    conv_bias_spec(3, true),
    pool_spec("max_pool1d", 1, PoolKind::max),
    pool_spec("avg_pool1d", 1, PoolKind::average),
    pool_spec("max_pool2d", 2, PoolKind::max),
    pool_spec("avg_pool2d", 2, PoolKind::average),
    pool_grad_spec("max_pool1d_grad", "max_pool1d", 1, PoolKind::max),
    max_pool_select_spec("max_pool1d_select", "max_pool1d", 1),
    pool_grad_spec("avg_pool1d_grad", "avg_pool1d", 1, PoolKind::average),
    pool_grad_spec("max_pool2d_grad", "max_pool2d", 2, PoolKind::max),
    max_pool_select_spec("max_pool2d_select", "max_pool2d", 2),
    pool_grad_spec("avg_pool2d_grad", "avg_pool2d", 2, PoolKind::average),
    pool_spec("max_pool3d", 3, PoolKind::max),
    pool_spec("avg_pool3d", 3, PoolKind::average),
    pool_grad_spec("max_pool3d_grad", "max_pool3d", 3, PoolKind::max),
    max_pool_select_spec("max_pool3d_select", "max_pool3d", 3),
    pool_grad_spec("avg_pool3d_grad", "avg_pool3d", 3, PoolKind::average),
});

}  // namespace

}  // namespace tessera
