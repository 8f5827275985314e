// The recurrent family: the time loop of a SimpleRNN, LSTM or GRU layer as one
// primitive (rnn_sequence) and its backward through time (rnn_sequence_grad).
// tessera.nn's recurrent layers call it for Keras's default activations
// (python/tessera/nn/layers/recurrent.py); other cases unroll the loop.
#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/kernels/nn.hpp"
#include "tessera/kernels/recurrent.hpp"
#include "tessera/primitives/elementwise_ops.hpp"
#include "tessera/primitives/registry.hpp"
#include "tessera/runtime/parallel.hpp"

namespace tessera {

namespace {

namespace kr = kernels;

// Rows of the batch per task: blocks of rows are independent through all
// steps, so they run side by side; a fixed size keeps each row's arithmetic
// (its matrix products' shapes) the same for any thread count.
constexpr int64_t kRnnRows = 16;

// Estimated nanoseconds of one block of `rows` rows (per step: the recurrent
// product at ~0.02 ns per multiply-add pair, the gates at ~2 ns per value).
double rnn_block_ns(const kr::RnnProblem& p, int64_t rows) {
  const double gh = static_cast<double>(kr::rnn_gates(p.cell) * p.units);
  return static_cast<double>(p.steps * rows) * gh * (0.04 * p.units + 2.0);
}

// Runs body(b0, b1) over the batch's blocks of rows in parallel: blocks are
// independent through all steps, so each runs the whole sequence with no
// synchronisation between steps.
void rnn_for_rows(const kr::RnnProblem& p, const std::function<void(int64_t, int64_t)>& body) {
  const int64_t blocks = (p.batch + kRnnRows - 1) / kRnnRows;
  parallel_for(blocks, rnn_block_ns(p, kRnnRows), [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) body(c * kRnnRows, std::min(p.batch, (c + 1) * kRnnRows));
  });
}

// At most this many partial sums of the weights' cotangents (groups of
// blocks of rows) in rnn_backward_in_place: fixed, so that the sums' order
// does not depend on the thread count; enough groups for 16 threads.
constexpr int64_t kRnnWeightGroups = 16;

// The backward of the cells whose gate cotangents go straight into dxw (simple
// RNN, LSTM), in one parallel loop: each group of consecutive blocks of rows
// runs through time (block_backward), then adds its rows' products to its own
// partial weight cotangents (du += hx^T dxw, dkernel += x^T dxw, dbias +=
// dxw's rows) while those rows are still in its core's cache, instead of a
// second loop reading every row from the other cores. The partials are then
// summed in group order (group 0 written straight into the outputs).
template <class T>
void rnn_backward_in_place(const kr::RnnProblem& p, int64_t F, const T* x, const T* dxw,
                           const T* hx, const std::function<void(int64_t, int64_t)>& block_backward,
                           T* du, T* dkernel, T* dbias) {
  const int64_t B = p.batch, S = p.steps, H = p.units, GH = kr::rnn_gates(p.cell) * H;
  const int64_t rows = kRnnRows;
  const int64_t blocks = (B + rows - 1) / rows;
  if (blocks == 0) {  // an empty batch: no rows, zero cotangents
    std::fill(du, du + H * GH, T(0));
    std::fill(dkernel, dkernel + F * GH, T(0));
    if (dbias) std::fill(dbias, dbias + GH, T(0));
    return;
  }
  const int64_t per_group = (blocks + kRnnWeightGroups - 1) / kRnnWeightGroups;
  const int64_t groups = (blocks + per_group - 1) / per_group;
  const int64_t part = (H + F + 1) * GH;  // du, dkernel, dbias
  std::unique_ptr<T[]> partials(new T[(groups - 1) * part]);
  const double group_ns =
      rnn_block_ns(p, rows * per_group) +
      static_cast<double>(rows * per_group * S * GH) * static_cast<double>(2 * F + H) * 0.02;
  parallel_for(groups, group_ns, [&](int64_t g0, int64_t g1) {
    for (int64_t g = g0; g < g1; ++g) {
      T* gu = g == 0 ? du : partials.get() + (g - 1) * part;
      T* gk = g == 0 ? dkernel : gu + H * GH;
      T* gb = g == 0 ? dbias : gu + (H + F) * GH;
      for (int64_t c = g * per_group; c < std::min(blocks, (g + 1) * per_group); ++c) {
        const int64_t b0 = c * rows, b1 = std::min(B, b0 + rows), n = (b1 - b0) * S;
        block_backward(b0, b1);
        const T beta = c == g * per_group ? T(0) : T(1);
        const T* d = dxw + b0 * S * GH;
        kr::rnn_matmul(true, false, H, GH, n, hx + b0 * S * H, H, d, GH, beta, gu, GH);
        kr::rnn_matmul(true, false, F, GH, n, x + b0 * S * F, F, d, GH, beta, gk, GH);
        if (gb) {
          if (beta == T(0)) std::fill(gb, gb + GH, T(0));
          for (int64_t r = 0; r < n; ++r) {
            for (int64_t j = 0; j < GH; ++j) gb[j] += d[r * GH + j];
          }
        }
      }
    }
  });
  for (int64_t g = 1; g < groups; ++g) {
    const T* gu = partials.get() + (g - 1) * part;
    for (int64_t i = 0; i < H * GH; ++i) du[i] += gu[i];
    for (int64_t i = 0; i < F * GH; ++i) dkernel[i] += gu[H * GH + i];
    if (dbias) {
      for (int64_t j = 0; j < GH; ++j) dbias[j] += gu[(H + F) * GH + j];
    }
  }
}

kr::RnnCell rnn_cell_of(Args& a, size_t i) {
  const std::string& name = a.string(i);
  if (name == "simple_rnn") return kr::RnnCell::simple;
  if (name == "lstm") return kr::RnnCell::lstm;
  if (name == "gru") return kr::RnnCell::gru;
  if (name == "gru_reset_before") return kr::RnnCell::gru_before;
  a.value_error(i, error_message("must be \"simple_rnn\", \"lstm\", \"gru\" or "
                                 "\"gru_reset_before\", got \"",
                                 name, "\""));
}

// The arguments both primitives check alike, converted to the compute dtype.
struct RnnInputs {
  kr::RnnProblem problem{};
  DType dtype = DType::float32;
  int64_t features = 0;
  Array x, kernel, u;
  std::optional<Array> bias, rb, h0, c0, mask;
};

// The data of an optional array, or null.
template <class T>
const T* rnn_data(const std::optional<Array>& x) {
  return x ? x->data<T>() : nullptr;
}
template <class T>
T* rnn_data(std::optional<Array>& x) {
  return x ? x->data<T>() : nullptr;
}

// Argument `i` as an array of `shape` in dtype `dt`, or nothing for nil.
std::optional<Array> rnn_optional(Args& a, size_t i, const Shape& shape, DType dt) {
  if (a.is_nil(i)) return std::nullopt;
  Array v = cast_array(a.array(i), dt);
  if (v.shape() != shape) {
    a.value_error(i, error_message("must have shape ", shape_str(shape), ", got ",
                                   shape_str(v.shape())));
  }
  return v;
}

// cell (argument 0), then from argument `first` on: x, kernel,
// recurrent_kernel, bias, recurrent_bias, h0, c0, mask, go_backwards, ...,
// zero_output_for_mask (the last).
RnnInputs rnn_inputs(Args& a, size_t first) {
  RnnInputs in;
  kr::RnnProblem& p = in.problem;
  p.cell = rnn_cell_of(a, 0);
  const int64_t g = kr::rnn_gates(p.cell);
  in.x = a.array(first);
  in.kernel = a.array(first + 1);
  in.u = a.array(first + 2);
  in.dtype = promote(promote(kr::float_dtype(in.x.dtype()), kr::float_dtype(in.u.dtype())),
                     kr::float_dtype(in.kernel.dtype()));
  if (in.dtype != DType::float32 && in.dtype != DType::float64) in.dtype = DType::float32;
  in.x = cast_array(in.x, in.dtype);
  in.kernel = cast_array(in.kernel, in.dtype);
  in.u = cast_array(in.u, in.dtype);
  if (in.u.ndim() != 2 || in.u.dim(1) != g * in.u.dim(0) || in.u.dim(0) == 0) {
    a.value_error(first + 2, error_message("must be (units, ", g, " * units) for cell \"",
                                           a.string(0), "\", got shape ",
                                           shape_str(in.u.shape())));
  }
  p.units = in.u.dim(0);
  const int64_t gh = g * p.units;
  if (in.x.ndim() != 3 || in.x.dim(1) == 0) {
    a.value_error(first, error_message("must be (batch, timesteps, features) with at least one "
                                       "timestep, got shape ",
                                       shape_str(in.x.shape())));
  }
  p.batch = in.x.dim(0);
  p.steps = in.x.dim(1);
  in.features = in.x.dim(2);
  if (in.kernel.shape() != Shape{in.features, gh}) {
    a.value_error(first + 1, error_message("must be (features, ", g, " * units) ",
                                           shape_str(Shape{in.features, gh}), " for x of shape ",
                                           shape_str(in.x.shape()), " and ", p.units,
                                           " units, got shape ", shape_str(in.kernel.shape())));
  }
  const Shape state{p.batch, p.units};
  in.bias = rnn_optional(a, first + 3, {gh}, in.dtype);
  if (!a.is_nil(first + 4) && p.cell != kr::RnnCell::gru) {
    a.value_error(first + 4, "is only for cell \"gru\" (reset_after), must be nil");
  }
  in.rb = rnn_optional(a, first + 4, {gh}, in.dtype);
  in.h0 = rnn_optional(a, first + 5, state, in.dtype);
  if (!a.is_nil(first + 6) && p.cell != kr::RnnCell::lstm) {
    a.value_error(first + 6, "is only for cell \"lstm\", must be nil");
  }
  in.c0 = rnn_optional(a, first + 6, state, in.dtype);
  if (!a.is_nil(first + 7)) {
    in.mask = a.array(first + 7).astype(DType::bool_);
    if (in.mask->shape() != Shape{p.batch, p.steps}) {
      a.value_error(first + 7, error_message("must have shape (batch, timesteps) ",
                                             shape_str(Shape{p.batch, p.steps}), ", got ",
                                             shape_str(in.mask->shape())));
    }
    p.mask = reinterpret_cast<const uint8_t*>(in.mask->data<bool>());
  }
  p.go_backwards = a.boolean(first + 8);
  p.zero_output_for_mask = a.boolean(a.size() - 1);
  return in;
}

template <class T>
Value rnn_sequence_typed(RnnInputs& in, bool sequences) {
  const kr::RnnProblem& p = in.problem;
  const int64_t B = p.batch, S = p.steps, H = p.units, F = in.features;
  const int64_t GH = kr::rnn_gates(p.cell) * H;
  const DType dt = in.dtype;
  const bool lstm = p.cell == kr::RnnCell::lstm;
  Array hs(dt, {S + 1, B, H});
  Array cs = lstm ? Array(dt, {S + 1, B, H}) : Array();
  Array acts(dt, {S, B, kr::rnn_act_width(p.cell) * H});
  Array out = sequences ? Array(dt, {B, S, H}) : Array(dt, {B, H});
  // Outputs by loop step: the states after each step, zeros at masked steps
  // with zero_output_for_mask.
  auto output_row = [&](int64_t k, int64_t b, T* dst) {
    const int64_t t = p.go_backwards ? S - 1 - k : k;
    if (p.zero_output_for_mask && p.mask && !p.mask[b * S + t]) {
      std::fill(dst, dst + H, T(0));
    } else {
      std::copy_n(hs.data<T>() + ((k + 1) * B + b) * H, H, dst);
    }
  };
  rnn_for_rows(p, [&](int64_t b0, int64_t b1) {
    // The block's input projection x @ kernel + bias, all steps in one product
    // (every value written by it: no initialisation).
    const int64_t rows = (b1 - b0) * S;
    std::unique_ptr<T[]> xw(new T[rows * GH]);
    kr::rnn_matmul(false, false, rows, GH, F, in.x.data<T>() + b0 * S * F, F,
                   in.kernel.data<T>(), GH, T(0), xw.get(), GH);
    if (in.bias) {
      const T* b = in.bias->data<T>();
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t j = 0; j < GH; ++j) xw[r * GH + j] += b[j];
      }
    }
    kr::rnn_forward<T>(p, b0, b1, xw.get(), in.u.data<T>(), rnn_data<T>(in.rb),
                       rnn_data<T>(in.h0), rnn_data<T>(in.c0), hs.data<T>(),
                       lstm ? cs.data<T>() : nullptr, acts.data<T>());
    // The block's rows of the outputs, in the same task (not after the loop,
    // on one thread).
    for (int64_t b = b0; b < b1; ++b) {
      if (sequences) {
        for (int64_t k = 0; k < S; ++k) output_row(k, b, out.data<T>() + (b * S + k) * H);
      } else {
        output_row(S - 1, b, out.data<T>() + b * H);
      }
    }
  });
  Array h(dt, {B, H});
  std::copy_n(hs.data<T>() + S * B * H, B * H, h.data<T>());
  Value c;
  if (lstm) {
    Array cl(dt, {B, H});
    std::copy_n(cs.data<T>() + S * B * H, B * H, cl.data<T>());
    c = Value(std::move(cl));
  }
  return Value(List{Value(std::move(out)), Value(std::move(h)), std::move(c),
                    Value(List{Value(std::move(hs)), lstm ? Value(std::move(cs)) : Value(),
                               Value(std::move(acts))})});
}

// rnn_sequence(cell, x, kernel, recurrent_kernel, bias, recurrent_bias, h0, c0,
//              mask, go_backwards, return_sequences, zero_output_for_mask)
Value eval_rnn_sequence(Args& a) {
  RnnInputs in = rnn_inputs(a, 1);
  const bool sequences = a.boolean(10);
  if (in.dtype == DType::float64) return rnn_sequence_typed<double>(in, sequences);
  return rnn_sequence_typed<float>(in, sequences);
}

// Element i of a list argument as an array of `shape` in dtype dt, or
// nothing for nil (no cotangent reached it).
std::optional<Array> rnn_item(Args& a, size_t arg, const List& l, size_t i, const Shape& shape,
                              DType dt, const char* what) {
  if (i >= l.size() || l[i].is_nil()) return std::nullopt;
  if (!l[i].is_array()) {
    a.value_error(arg, error_message("item ", i, " (", what, ") must be an array or nil"));
  }
  Array v = cast_array(l[i].as_array(), dt);
  if (v.shape() != shape) {
    if (v.size() == 1) return Array::full(dt, shape, v.get_double(0));
    a.value_error(arg, error_message("item ", i, " (", what, ") must have shape ",
                                     shape_str(shape), ", got ", shape_str(v.shape())));
  }
  return v.is_contiguous() ? v : v.copy();
}

template <class T>
Value rnn_grad_typed(Args& a, RnnInputs& in, const List& g, const List& tape, bool sequences) {
  const kr::RnnProblem& p = in.problem;
  const int64_t B = p.batch, S = p.steps, H = p.units, F = in.features;
  const int64_t GH = kr::rnn_gates(p.cell) * H;
  const DType dt = in.dtype;
  const bool lstm = p.cell == kr::RnnCell::lstm;
  const Shape state{B, H};
  const Shape out_shape = sequences ? Shape{B, S, H} : state;
  std::optional<Array> gout = rnn_item(a, 1, g, 0, out_shape, dt, "the output's cotangent");
  std::optional<Array> gh = rnn_item(a, 1, g, 1, state, dt, "the final h's cotangent");
  std::optional<Array> gc;
  if (lstm) gc = rnn_item(a, 1, g, 2, state, dt, "the final c's cotangent");
  std::optional<Array> hs = rnn_item(a, 2, tape, 0, {S + 1, B, H}, dt, "the states");
  std::optional<Array> cs;
  if (lstm) cs = rnn_item(a, 2, tape, 1, {S + 1, B, H}, dt, "the cell states");
  std::optional<Array> acts =
      rnn_item(a, 2, tape, 2, {S, B, kr::rnn_act_width(p.cell) * H}, dt, "the gates");
  if (!hs || !acts || (lstm && !cs)) {
    a.value_error(2, "must be rnn_sequence's result for these arguments (its tape differs)");
  }
  Array dx(dt, {B, S, F}), dkernel(dt, {F, GH}), du(dt, {H, GH}), dh0(dt, state);
  Array dxw(dt, {B, S, GH});
  // The gates' cotangents by loop step (dz) only for the GRUs; the simple RNN
  // and the LSTM write them in dxw and keep the states in dxw's row order (hx).
  const bool in_place = kr::rnn_grads_in_place(p.cell);
  std::optional<Array> dbias, drb, dc0, dhu, dz, hx;
  if (in_place) {
    hx = Array(dt, {B, S, H});
  } else {
    dz = Array(dt, {S, B, GH});
  }
  if (in.bias) dbias = Array(dt, {GH});
  if (in.rb) drb = Array(dt, {GH});
  if (lstm) dc0 = Array(dt, state);
  if (p.cell == kr::RnnCell::gru) dhu = Array(dt, {S, B, GH});
  // kernel^T (G H, features): dx's product reads it untransposed (faster).
  std::vector<T> kt(GH * F);
  const T* kd = in.kernel.data<T>();
  for (int64_t r = 0; r < F; ++r) {
    for (int64_t j = 0; j < GH; ++j) kt[j * F + r] = kd[r * GH + j];
  }
  // Block [b0, b1) through time, then its inputs' cotangents dx = dxw kernel^T.
  auto block_backward = [&](int64_t b0, int64_t b1) {
    kr::rnn_backward_rows<T>(p, b0, b1, in.u.data<T>(), rnn_data<T>(hs), rnn_data<T>(cs),
                             rnn_data<T>(acts), rnn_data<T>(gout), sequences, rnn_data<T>(gh),
                             rnn_data<T>(gc), rnn_data<T>(dz), rnn_data<T>(dhu), dxw.data<T>(),
                             rnn_data<T>(hx), dh0.data<T>(), rnn_data<T>(dc0));
    kr::rnn_matmul(false, false, (b1 - b0) * S, F, GH, dxw.data<T>() + b0 * S * GH, GH,
                   kt.data(), F, T(0), dx.data<T>() + b0 * S * F, F);
  };
  if (in_place) {
    rnn_backward_in_place<T>(p, F, in.x.data<T>(), dxw.data<T>(), rnn_data<T>(hx), block_backward,
                             du.data<T>(), dkernel.data<T>(), rnn_data<T>(dbias));
  } else {
    rnn_for_rows(p, block_backward);
    // The weights' cotangents by blocks of units columns (one per gate), each
    // one product over every (step, row) pair: the GRUs' gate cotangents are
    // by loop step, so a block's rows are not contiguous in them.
    const int64_t gates = kr::rnn_gates(p.cell);
    const double block_ns = static_cast<double>(S * B * H) * static_cast<double>(H + F) * 0.04;
    parallel_for(gates, block_ns, [&](int64_t c0, int64_t c1) {
      const int64_t j0 = c0 * H, j1 = c1 * H;
      kr::rnn_backward_weights<T>(p, j0, j1, rnn_data<T>(hs), rnn_data<T>(acts), rnn_data<T>(dz),
                                  rnn_data<T>(dhu), rnn_data<T>(hx), dxw.data<T>(), du.data<T>(),
                                  rnn_data<T>(drb));
      kr::rnn_matmul(true, false, F, j1 - j0, B * S, in.x.data<T>(), F, dxw.data<T>() + j0, GH,
                     T(0), dkernel.data<T>() + j0, GH);
      if (dbias) {
        T* db = dbias->data<T>();
        const T* d = dxw.data<T>();
        std::fill(db + j0, db + j1, T(0));
        for (int64_t r = 0; r < B * S; ++r) {
          for (int64_t j = j0; j < j1; ++j) db[j] += d[r * GH + j];
        }
      }
    });
  }
  auto opt = [](std::optional<Array>& v) { return v ? Value(std::move(*v)) : Value(); };
  return Value(List{Value(std::move(dx)), Value(std::move(dkernel)), Value(std::move(du)),
                    opt(dbias), opt(drb), Value(std::move(dh0)), opt(dc0)});
}

// rnn_sequence_grad(cell, g, out, x, kernel, recurrent_kernel, bias, recurrent_bias,
//                   h0, c0, mask, go_backwards, return_sequences, zero_output_for_mask)
Value eval_rnn_sequence_grad(Args& a) {
  if (!a[1].is_list()) a.type_error(1, "a list (the cotangents of rnn_sequence's result)");
  if (!a[2].is_list() || a[2].as_list().size() != 4 || !a[2].as_list()[3].is_list()) {
    a.type_error(2, "rnn_sequence's result, list(output, h, c, tape)");
  }
  const List& tape = a[2].as_list()[3].as_list();
  RnnInputs in = rnn_inputs(a, 3);
  const bool sequences = a.boolean(12);
  const List& g = a[1].as_list();
  if (in.dtype == DType::float64) return rnn_grad_typed<double>(a, in, g, tape, sequences);
  return rnn_grad_typed<float>(a, in, g, tape, sequences);
}

std::vector<Param> rnn_params(std::vector<Param> head) {
  for (Param p : {Param{"x"}, Param{"kernel"}, Param{"recurrent_kernel"}, opt("bias", Value()),
                  opt("recurrent_bias", Value()), opt("h0", Value()), opt("c0", Value()),
                  opt("mask", Value()), opt("go_backwards", Value(false)),
                  opt("return_sequences", Value(true)),
                  opt("zero_output_for_mask", Value(false))}) {
    head.push_back(std::move(p));
  }
  return head;
}

const std::string kRnnGradCall =
    "rnn_sequence_grad(cell, g, out, x, kernel, recurrent_kernel, bias, recurrent_bias, h0, c0, "
    "mask, go_backwards, return_sequences, zero_output_for_mask)";

const bool registered_recurrent = register_primitives({
    {.name = "rnn_sequence",
     .family = "nn",
     .params = rnn_params({{"cell"}}),
     .help = "A recurrent layer's time loop (Keras's SimpleRNN, LSTM, GRU with tanh and "
             "sigmoid) in one call: cell \"simple_rnn\", \"lstm\" (gates i, f, c, o), \"gru\" "
             "(z, r, h~; reset after the recurrent product, recurrent_bias added to it) or "
             "\"gru_reset_before\". x (batch, timesteps, features), kernel (features, gates * "
             "units), recurrent_kernel (units, gates * units), bias (gates * units) added to "
             "x @ kernel. h0 and c0 (batch, units) start the states (nil: zeros); mask (batch, "
             "timesteps): a false step keeps the states and outputs the previous output (zeros "
             "with zero_output_for_mask); go_backwards reads the steps last to first. Returns "
             "list(output, h, c, tape): the outputs by loop step (batch, timesteps, units), or "
             "the last (batch, units) when not return_sequences; the final states (c nil but "
             "for lstm); what the backward reads. Differentiable in x, the kernels, the biases, "
             "h0 and c0.",
     .eval = eval_rnn_sequence,
     .ns_per_element = 50.0,
     .grads = {"", "common[0]", "common[1]", "common[2]", "common[3]", "common[4]", "common[5]",
               "common[6]", "", "", "", ""},
     .grad_common = kRnnGradCall},
    {.name = "rnn_sequence_grad",
     .family = "nn",
     .params = rnn_params({{"cell"}, {"g"}, {"out"}}),
     .help = "Backward through time of rnn_sequence: g is the list of cotangents of its "
             "result (nil where none), out its result, the other arguments rnn_sequence's. "
             "Returns list(dx, dkernel, drecurrent_kernel, dbias, drecurrent_bias, dh0, dc0) "
             "(nil for a bias not given, and dc0 but for lstm).",
     .eval = eval_rnn_sequence_grad,
     .ns_per_element = 100.0},
});

}  // namespace

}  // namespace tessera
