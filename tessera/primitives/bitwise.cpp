// Bitwise operations on integer and bool arrays: bitwise_and, bitwise_or,
// bitwise_xor, bitwise_not (invert), left_shift, right_shift. The translator
// maps Python's & | ^ ~ << >> onto them, so ints get NumPy's bitwise meaning
// and bools the logical one (the two coincide on bools).
#include <cstdint>
#include <string>
#include <type_traits>

#include "tessera/core/error.hpp"
#include "tessera/kernels/elementwise.hpp"
#include "tessera/primitives/registry.hpp"
#include "tessera/runtime/parallel.hpp"

namespace tessera {

namespace {

enum class BitOp { and_, or_, xor_, lshift, rshift };

constexpr double kBitNs = 0.3;

bool is_shift(BitOp op) { return op == BitOp::lshift || op == BitOp::rshift; }

// NumPy's shifts: a count outside [0, 64) shifts every bit out (0, or -1 for
// a negative number shifted right), instead of C++'s undefined behaviour.
int64_t shift_left(int64_t a, int64_t b) {
  if (b < 0 || b >= 64) return 0;
  return static_cast<int64_t>(static_cast<uint64_t>(a) << b);
}
int64_t shift_right(int64_t a, int64_t b) {
  if (b < 0 || b >= 64) return a < 0 ? -1 : 0;
  return a >> b;
}

int64_t apply(BitOp op, int64_t a, int64_t b) {
  switch (op) {
    case BitOp::and_: return a & b;
    case BitOp::or_: return a | b;
    case BitOp::xor_: return a ^ b;
    case BitOp::lshift: return shift_left(a, b);
    case BitOp::rshift: return shift_right(a, b);
  }
  return 0;
}

// One operation on T (bool or int64), chosen at compile time so that the
// loops below vectorise (bools are 0 or 1, so & | ^ of them stay 0 or 1).
template <BitOp Op, typename T>
T apply_typed(T a, T b) {
  if constexpr (Op == BitOp::and_) {
    return static_cast<T>(a & b);
  } else if constexpr (Op == BitOp::or_) {
    return static_cast<T>(a | b);
  } else if constexpr (Op == BitOp::xor_) {
    return static_cast<T>(a ^ b);
  } else if constexpr (Op == BitOp::lshift) {
    return static_cast<T>(shift_left(a, b));
  } else {
    return static_cast<T>(shift_right(a, b));
  }
}

// A run of `len` elements with the operands' strides (in elements); the
// contiguous and scalar-operand cases get loops of their own.
template <BitOp Op, typename T>
void bit_run(const T* px, int64_t sx, const T* py, int64_t sy, T* po, int64_t len) {
  if (sx == 1 && sy == 1) {
    for (int64_t i = 0; i < len; ++i) po[i] = apply_typed<Op, T>(px[i], py[i]);
  } else if (sx == 1 && sy == 0) {
    const T y = *py;
    for (int64_t i = 0; i < len; ++i) po[i] = apply_typed<Op, T>(px[i], y);
  } else if (sx == 0 && sy == 1) {
    const T x = *px;
    for (int64_t i = 0; i < len; ++i) po[i] = apply_typed<Op, T>(x, py[i]);
  } else {
    for (int64_t i = 0; i < len; ++i) po[i] = apply_typed<Op, T>(px[i * sx], py[i * sy]);
  }
}

// Calls f with std::integral_constant<BitOp, op>.
template <typename F>
void with_bit_op(BitOp op, F&& f) {
  switch (op) {
    case BitOp::and_: return f(std::integral_constant<BitOp, BitOp::and_>{});
    case BitOp::or_: return f(std::integral_constant<BitOp, BitOp::or_>{});
    case BitOp::xor_: return f(std::integral_constant<BitOp, BitOp::xor_>{});
    case BitOp::lshift: return f(std::integral_constant<BitOp, BitOp::lshift>{});
    case BitOp::rshift: return f(std::integral_constant<BitOp, BitOp::rshift>{});
  }
}

// Bool or int64 only: floats have no bits to combine (NumPy's TypeError).
void check_integral(const Args& a, size_t i, DType dt) {
  if (dt == DType::bool_ || dt == DType::int64) return;
  throw TypeError(error_message("[", a.op(), "] not supported for ", dtype_name(dt),
                                " operands (only integer and bool): got ", a[i].describe()));
}

// Two Python-like scalars: Python's own operators (ints stay ints, bools
// stay bools for & | ^; a negative shift count is a ValueError and an
// overflowing left shift an OverflowError, as Python ints do not wrap).
Value scalar_bitwise(const Args& a, BitOp op) {
  const Value& x = a[0];
  const Value& y = a[1];
  if (x.is_bool() && y.is_bool() && !is_shift(op)) {
    return Value(static_cast<bool>(apply(op, x.as_bool(), y.as_bool())));
  }
  int64_t u = x.is_bool() ? x.as_bool() : x.as_int();
  int64_t v = y.is_bool() ? y.as_bool() : y.as_int();
  if (is_shift(op)) {
    if (v < 0) {
      throw std::invalid_argument(error_message("[", a.op(), "] negative shift count: ", v));
    }
    if (op == BitOp::lshift) {
      int64_t r = shift_left(u, v);
      if (v >= 64 ? u != 0 : shift_right(r, v) != u) {
        // Python's int would grow: its OverflowError, as for + - * (elementwise_ops.cpp).
        throw std::overflow_error(error_message(
            "[", a.op(), "] integer overflow: ", u, " << ", v,
            " does not fit in int64 (Python would give a big integer; tessera's ints are int64)"));
      }
      return Value(r);
    }
  }
  return Value(apply(op, u, v));
}

Value eval_bitwise(Args& a, BitOp op) {
  for (size_t i = 0; i < 2; ++i) {
    if (!a[i].is_numeric()) a.type_error(i, "an integer or bool array or scalar");
  }
  bool x_scalar = a[0].is_scalar(), y_scalar = a[1].is_scalar();
  if (x_scalar && y_scalar && !a[0].is_float() && !a[1].is_float()) return scalar_bitwise(a, op);
  Array x = a.array(0), y = a.array(1);
  check_integral(a, 0, x.dtype());
  check_integral(a, 1, y.dtype());
  // NEP 50: a Python int next to a bool array gives the default int; two bool
  // operands stay bool.
  bool both_bool = x.dtype() == DType::bool_ && y.dtype() == DType::bool_;
  if (both_bool && is_shift(op)) {
    throw TypeError(error_message("[", a.op(), "] shifting bool arrays gives int8 in NumPy, a "
                                  "dtype tessera does not have: got ",
                                  a[0].describe(), " and ", a[1].describe(),
                                  "; convert with astype('int64') first"));
  }
  DType out_dtype = both_bool ? DType::bool_ : DType::int64;
  Array xi = x.astype(out_dtype), yi = y.astype(out_dtype);
  auto bc = kernels::make_broadcast<2>({xi.shape(), yi.shape()}, a.op());
  Array out(out_dtype, bc.out_shape);
  if (bc.size == 0) return out;
  with_bit_op(op, [&](auto op_c) {
    constexpr BitOp kOp = decltype(op_c)::value;
    auto run = [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* px0 = xi.data<T>();
      const T* py0 = yi.data<T>();
      T* po0 = out.data<T>();
      parallel_for(bc.size, kBitNs, [&](int64_t begin, int64_t end) {
        kernels::for_each_run(bc, begin, end, [&](auto off, int64_t pos, int64_t len, auto inner) {
          bit_run<kOp>(px0 + off[0], inner[0], py0 + off[1], inner[1], po0 + pos, len);
        });
      });
    };
    if (out_dtype == DType::bool_) {
      run(TypeTag<bool>{});
    } else {
      run(TypeTag<int64_t>{});
    }
  });
  return out;
}

// ~x: logical not on bools, two's complement on ints (NumPy's invert).
Value eval_invert(Args& a) {
  const Value& v = a[0];
  if (v.is_bool()) return Value(!v.as_bool());
  if (v.is_int()) return Value(~v.as_int());
  if (!v.is_numeric()) a.type_error(0, "an integer or bool array or scalar");
  Array x = a.array(0);
  check_integral(a, 0, x.dtype());
  Array out(x.dtype(), x.shape());
  if (x.dtype() == DType::bool_) {
    const bool* px = x.data<bool>();
    bool* po = out.data<bool>();
    for (int64_t i = 0; i < x.size(); ++i) po[i] = !px[i];
  } else {
    const int64_t* px = x.data<int64_t>();
    int64_t* po = out.data<int64_t>();
    for (int64_t i = 0; i < x.size(); ++i) po[i] = ~px[i];
  }
  return out;
}

PrimitiveSpec binary_spec(const char* name, BitOp op, const char* what) {
  return {.name = name,
          .family = "bitwise",
          .params = {{"x"}, {"y"}},
          .help = std::string(what) + " Integer (int64) and bool operands only, with NumPy "
                  "broadcasting; a float is a TypeError.",
          .eval = [op](Args& a) -> Value { return eval_bitwise(a, op); },
          .ns_per_element = kBitNs,
          .grads = {"", ""}};
}

PrimitiveSpec invert_spec(const char* name) {
  return {.name = name,
          .family = "bitwise",
          .params = {{"x"}},
          .help = "Bitwise NOT, like numpy.invert (numpy.bitwise_not is the same function): "
                  "~x on int64 (two's complement, ~5 == -6), logical not on bool. A bool "
                  "scalar gives a bool as NumPy's np.bool_ does (Python's ~True is -2). "
                  "Floats are a TypeError.",
          .eval = eval_invert,
          .ns_per_element = kBitNs,
          .grads = {""}};
}

const bool registered_bitwise = register_primitives({
    binary_spec("bitwise_and", BitOp::and_,
                "x & y elementwise, like numpy.bitwise_and (logical and on bools)."),
    binary_spec("bitwise_or", BitOp::or_,
                "x | y elementwise, like numpy.bitwise_or (logical or on bools)."),
    binary_spec("bitwise_xor", BitOp::xor_,
                "x ^ y elementwise, like numpy.bitwise_xor (logical xor on bools)."),
    binary_spec("left_shift", BitOp::lshift,
                "x << y elementwise, like numpy.left_shift: bits shifted past bit 63 are "
                "lost (arrays wrap; a count outside [0, 64) gives 0). Two Python ints "
                "follow Python: a negative count is a ValueError, a result past int64 an "
                "OverflowError (Python's would be a big int). Bool "
                "arrays on both sides are a TypeError (NumPy gives int8)."),
    binary_spec("right_shift", BitOp::rshift,
                "x >> y elementwise, like numpy.right_shift (arithmetic: the sign is kept; "
                "a count outside [0, 64) gives 0 or -1). Bool arrays on both sides are a "
                "TypeError (NumPy gives int8)."),
    invert_spec("invert"),
    invert_spec("bitwise_not"),
});

}  // namespace

}  // namespace tessera
