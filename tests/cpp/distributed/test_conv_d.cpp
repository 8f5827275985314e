// conv1d_d in one process: the plans of many localities against the whole
// conv1d (each locality simulated from the whole array: what it reads, what it
// computes, where its input gradient goes), and the primitives on one
// locality (where a tiling is the whole array) against conv1d, with gradients
// against finite differences. The exchanges themselves run under mpirun in
// tests/distributed/conv_d.py.
#include <gtest/gtest.h>

#include <random>

#include "tessera/distributed/conv_d.hpp"
#include "tessera/lang/program.hpp"
#include "test_util.hpp"

namespace tessera::distributed::detail {
void PrintTo(const Steps& s, std::ostream* os) { *os << s.str(); }
}  // namespace tessera::distributed::detail

namespace tessera::test {
namespace {

using distributed::detail::ConvSteps;
using distributed::detail::Steps;
using distributed::detail::TimePlan;

Array random_array(Shape shape, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  Array a = Array::zeros(DType::float64, shape);
  for (int64_t i = 0; i < a.size(); ++i) a.data<double>()[i] = u(gen);
  return a;
}

Value shape_value(const Shape& s) {
  List l;
  for (int64_t d : s) l.emplace_back(d);
  return Value(std::move(l));
}

// Steps [start, stop) of a (batch, steps, channels) array, with zero steps around.
Array steps_of(const Array& a, Steps s, int64_t before, int64_t after) {
  const int64_t b = a.dim(0), c = a.dim(2);
  Array out = Array::zeros(DType::float64, {b, before + s.size() + after, c});
  for (int64_t i = 0; i < b; ++i) {
    for (int64_t t = 0; t < s.size(); ++t) {
      for (int64_t k = 0; k < c; ++k) {
        out.data<double>()[(i * out.dim(1) + before + t) * c + k] =
            a.data<double>()[(i * a.dim(1) + s.start + t) * c + k];
      }
    }
  }
  return out;
}

void add_steps_into(Array& dst, Steps s, const Array& src, int64_t from) {
  const int64_t b = dst.dim(0), c = dst.dim(2);
  for (int64_t i = 0; i < b; ++i) {
    for (int64_t t = 0; t < s.size(); ++t) {
      for (int64_t k = 0; k < c; ++k) {
        dst.data<double>()[(i * dst.dim(1) + s.start + t) * c + k] +=
            src.data<double>()[(i * src.dim(1) + from + t) * c + k];
      }
    }
  }
}

::testing::AssertionResult close(const Array& got, const Array& want) {
  if (got.shape() != want.shape()) {
    return ::testing::AssertionFailure() << "shape " << shape_str(got.shape()) << " != " << shape_str(want.shape());
  }
  for (int64_t i = 0; i < got.size(); ++i) {
    double g = got.get_double(i), w = want.get_double(i);
    if (std::fabs(g - w) > 1e-12 + 1e-12 * std::fabs(w)) {
      return ::testing::AssertionFailure() << "element " << i << ": " << g << " != " << w;
    }
  }
  return ::testing::AssertionSuccess();
}

// Time tilings of n steps over m localities: even, uneven with empty tiles,
// and cut points from a seed.
std::vector<std::vector<Steps>> tilings(int64_t n, int m, uint32_t seed) {
  std::vector<std::vector<Steps>> out;
  std::vector<Steps> even;
  for (int r = 0; r < m; ++r) {
    int64_t a = n * r / m, b = n * (r + 1) / m;
    even.push_back({a, b});
  }
  out.push_back(even);
  if (m > 1) {
    // Everything on the last locality but one step on the first.
    std::vector<Steps> lopsided(m, Steps{});
    lopsided[0] = {0, std::min<int64_t>(1, n)};
    lopsided[m - 1] = {std::min<int64_t>(1, n), n};
    out.push_back(lopsided);
    // Tiles in reverse locality order, one empty in the middle.
    std::vector<Steps> reversed(m, Steps{});
    int64_t at = 0;
    for (int r = m - 1; r >= 0; --r) {
      if (r == m / 2) continue;
      int64_t len = r == 0 ? n - at : std::min<int64_t>(n - at, 1 + r % 3);
      reversed[r] = {at, at + len};
      at += len;
    }
    out.push_back(reversed);
    std::mt19937 gen(seed);
    std::vector<int64_t> cuts{0, n};
    for (int r = 1; r < m; ++r) cuts.push_back(std::uniform_int_distribution<int64_t>(0, n)(gen));
    std::sort(cuts.begin(), cuts.end());
    std::vector<Steps> random;
    for (int r = 0; r < m; ++r) random.push_back({cuts[r], cuts[r + 1]});
    out.push_back(random);
  }
  return out;
}

// Simulates every locality of `plan` and checks the gathered result and the
// gradients against the whole conv1d.
void check_plan(const TimePlan& plan, const ConvSteps& g, const Array& x, const Array& w, const Array& gy) {
  const Value s(g.stride), d(g.dilation), valid("valid");
  const Value pad(g.padding);
  Array y = call("conv1d", {Value(x), Value(w), s, pad, d}).as_array();
  Array dx = call("conv1d_grad_input", {Value(gy), Value(w), shape_value(x.shape()), s, pad, d}).as_array();
  Array dw = call("conv1d_grad_weight", {Value(gy), Value(x), shape_value(w.shape()), s, pad, d}).as_array();
  ASSERT_EQ(y.dim(1), g.out);

  // Outputs partition [0, out) and owned parts partition [0, n).
  std::vector<int> out_owner(g.out, -1), step_owner(g.steps, -1);
  for (size_t r = 0; r < plan.owned.size(); ++r) {
    for (int64_t j = plan.outputs[r].start; j < plan.outputs[r].stop; ++j) {
      ASSERT_EQ(out_owner[j], -1) << "output " << j << " twice";
      out_owner[j] = static_cast<int>(r);
    }
    for (int64_t t = plan.owned[r].start; t < plan.owned[r].stop; ++t) {
      ASSERT_EQ(step_owner[t], -1) << "step " << t << " owned twice";
      step_owner[t] = static_cast<int>(r);
    }
  }
  for (int64_t j = 0; j < g.out; ++j) ASSERT_NE(out_owner[j], -1) << "output " << j << " unowned";
  for (int64_t t = 0; t < g.steps; ++t) ASSERT_NE(step_owner[t], -1) << "step " << t << " unowned";

  Array got_y = Array::zeros(DType::float64, y.shape());
  Array got_dx = Array::zeros(DType::float64, x.shape());
  Array got_dw = Array::zeros(DType::float64, w.shape());
  for (size_t r = 0; r < plan.owned.size(); ++r) {
    const Steps o = plan.outputs[r];
    if (o.empty()) {
      EXPECT_TRUE(plan.reads[r].empty());
      continue;
    }
    Array window = steps_of(x, plan.reads[r], plan.pad_before[r], plan.pad_after[r]);
    Array part = call("conv1d", {Value(window), Value(w), s, valid, d}).as_array();
    ASSERT_EQ(part.dim(1), o.size());
    add_steps_into(got_y, o, part, 0);
    Array g_part = steps_of(gy, o, 0, 0);
    Array dwin =
        call("conv1d_grad_input", {Value(g_part), Value(w), shape_value(window.shape()), s, valid, d}).as_array();
    add_steps_into(got_dx, plan.reads[r], dwin, plan.pad_before[r]);
    Array dw_part =
        call("conv1d_grad_weight", {Value(g_part), Value(window), shape_value(w.shape()), s, valid, d}).as_array();
    for (int64_t i = 0; i < dw.size(); ++i) got_dw.data<double>()[i] += dw_part.data<double>()[i];
  }
  EXPECT_TRUE(close(got_y, y));
  EXPECT_TRUE(close(got_dx, dx));
  EXPECT_TRUE(close(got_dw, dw));
}

TEST(ConvD, PlansOfManyLocalitiesMatchTheWholeConvolution) {
  int plans = 0, overlapped_plans = 0;
  for (int64_t n : {1, 2, 7, 13}) {
    Array x = random_array({2, n, 3}, static_cast<uint32_t>(n));
    for (int64_t k : {1, 3, 5}) {
      Array w = random_array({k, 3, 2}, static_cast<uint32_t>(100 + k));
      for (int64_t dil : {1, 2, 3}) {
        for (const char* pad : {"valid", "same", "causal"}) {
          for (int64_t stride : {1, 2, 3}) {
            if (std::string(pad) == "valid" && dil * (k - 1) + 1 > n) {
              EXPECT_TRUE(throws_with<std::invalid_argument>(
                  [&] { distributed::detail::conv_steps(n, k, stride, pad, dil, "conv1d_d"); },
                  "is larger than the input"));
              continue;
            }
            ConvSteps g = distributed::detail::conv_steps(n, k, stride, pad, dil, "conv1d_d");
            Array gy = random_array({2, g.out, 2}, static_cast<uint32_t>(7 * n + k));
            for (int m : {1, 2, 3, 4, 5}) {
              for (const auto& tiles : tilings(n, m, static_cast<uint32_t>(n * 31 + m))) {
                SCOPED_TRACE(::testing::Message() << "n=" << n << " " << g.settings() << " localities=" << m
                                                  << " first tile " << tiles[0].str());
                TimePlan plan = distributed::detail::plan_time(tiles, g, "conv1d_d");
                ASSERT_FALSE(plan.overlapped);
                check_plan(plan, g, x, w, gy);
                ++plans;
                // The overlapped tiling of the same parts: the same work, no exchange.
                std::vector<Steps> widened = distributed::detail::halo_steps(plan.owned, g);
                TimePlan over = distributed::detail::plan_time(widened, g, "conv1d_d");
                int whole_spans = 0;
                for (const Steps& s : widened) whole_spans += s.start == 0 && s.stop == n ? 1 : 0;
                if (over.overlapped) {
                  ++overlapped_plans;
                  check_plan(over, g, x, w, gy);
                  // The parts recovered are the original ones, unless two spans are
                  // the whole array (then nothing tells where the cut between them was).
                  if (whole_spans < 2) {
                    EXPECT_EQ(over.owned, plan.owned);
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  EXPECT_GT(plans, 2000);
  EXPECT_GT(overlapped_plans, 1000);
}

TEST(ConvD, PlanErrorsNameTheSteps) {
  ConvSteps g = distributed::detail::conv_steps(10, 3, 1, "same", 2, "conv1d_d");
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { distributed::detail::plan_time({{0, 4}, {5, 10}}, g, "conv1d_d"); },
      "[conv1d_d] the time spans of x do not cover its 10 steps: steps [4, 5) are in no locality's span"));
  EXPECT_TRUE(throws_with<std::invalid_argument>([&] { distributed::detail::plan_time({{0, 4}, {2, 9}}, g, "conv1d_d"); },
                                                 "steps [9, 10) are in no locality's span"));
  // Overlapping by one step where the kernel reads two on each side.
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { distributed::detail::plan_time({{0, 6}, {5, 10}}, g, "conv1d_d"); },
      "[conv1d_d] x has overlapping time spans, but they do not hold the halo this convolution (kernel_size=3, "
      "stride=1, padding='same', dilation=2) needs: locality 0 holds steps [0, 6) and its outputs [0, 7) read "
      "steps [0, 9); make the tiling with overlap_d(x, kernel_size=3, stride=1, padding='same', dilation=2)"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { distributed::detail::conv_steps(10, 3, 1, "full", 1, "conv1d_d"); },
      "[conv1d_d] padding must be 'valid', 'same' or 'causal', got 'full'"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { distributed::detail::conv_steps(4, 3, 1, "valid", 2, "conv1d_d"); },
      "[conv1d_d] kernel of effective size 5 (size 3, dilation 2) is larger than the input (4 steps) with padding "
      "'valid'"));
}

// A tiled array of one locality: the whole array.
Value whole(const Array& a, std::string tiling = "pages") {
  TiledArray t;
  t.tile = a;
  t.shape = a.shape();
  t.spans = {full_span(a.shape())};
  t.tiling = std::move(tiling);
  return Value(std::move(t));
}

TEST(ConvD, OneLocalityIsConv1d) {
  Array x = random_array({3, 9, 2}, 1), w = random_array({3, 2, 4}, 2);
  for (const char* pad : {"valid", "same", "causal"}) {
    for (int64_t stride : {1, 2}) {
      std::vector<Value> settings{Value(stride), Value(pad), Value(int64_t{2})};
      std::vector<Value> args{whole(x), Value(w)};
      args.insert(args.end(), settings.begin(), settings.end());
      Value y = call("conv1d_d", args);
      ASSERT_TRUE(y.is_tiled());
      const TiledArray& t = y.as_tiled();
      Array want = call("conv1d", {Value(x), Value(w), settings[0], settings[1], settings[2]}).as_array();
      EXPECT_TRUE(close(t.tile, want)) << pad;
      EXPECT_EQ(t.shape, want.shape());
      EXPECT_EQ(t.spans, std::vector<Span>{full_span(want.shape())});
      EXPECT_EQ(t.tiling, "pages");
      // overlap_d has nothing to widen with one locality.
      Value o = call("overlap_d", {whole(x), Value(int64_t{3}), settings[0], settings[1], settings[2]});
      EXPECT_TRUE(o.equals(whole(x)));
    }
  }
  // float32 stays float32 (as conv1d).
  Value y32 = call("conv1d_d", {whole(x.astype(DType::float32)), Value(w.astype(DType::float32))});
  EXPECT_EQ(y32.as_tiled().dtype(), DType::float32);
}

TEST(ConvD, GradientsThroughTheLanguageMatchConv1d) {
  Array x = random_array({2, 8, 3}, 3), w = random_array({3, 3, 2}, 4);
  Program p(
      "define(f, x, w, r, sum(local_tile(conv1d_d(x, w, padding=\"same\", dilation=2)) * r))\n"
      "define(h, x, w, r, sum(conv1d(x, w, padding=\"same\", dilation=2) * r))\n"
      "define(go, x, w, r, xt, list(value_and_grad(f, [0, 1])(xt, w, r), value_and_grad(h, [0, 1])(x, w, r)))\n"
      "go",
      "grad.tsl");
  Array r = random_array({2, 8, 2}, 5);
  Value out = p.run({Value(x), Value(w), Value(r), whole(x)});
  const List& dist_vg = out.as_list()[0].as_list();
  const List& local_vg = out.as_list()[1].as_list();
  EXPECT_NEAR(dist_vg[0].as_array().item(), local_vg[0].as_array().item(), 1e-12);
  const Value& dx = dist_vg[1].as_list()[0];
  ASSERT_TRUE(dx.is_tiled());
  EXPECT_TRUE(dx.as_tiled().same_tiling(whole(x).as_tiled()));
  EXPECT_TRUE(close(dx.as_tiled().tile, local_vg[1].as_list()[0].as_array()));
  EXPECT_TRUE(close(dist_vg[1].as_list()[1].as_array(), local_vg[1].as_list()[1].as_array()));
}

// Central finite differences of a scalar program of (x tiled, w) at one
// locality, for the rules of conv1d_d, overlap_d, local_tile and with_tile.
TEST(ConvD, GradientsMatchCentralDifferences) {
  const double h = 1e-6;
  const std::vector<std::string> bodies = {
      "local_tile(conv1d_d(x, w, stride=2, padding=\"causal\", dilation=2))",
      "local_tile(conv1d_d(overlap_d(x, 3, padding=\"same\"), w, padding=\"same\"))",
      "local_tile(conv1d_d(with_tile(x, local_tile(x) * local_tile(x)), w))",
  };
  Array x = random_array({2, 7, 3}, 6), w = random_array({3, 3, 2}, 7);
  for (const std::string& body : bodies) {
    SCOPED_TRACE(body);
    // sum(y * weights) so that every output element has its own weight.
    std::string f_text = "define(f, x, w, block(define(y, " + body +
                         "), sum(y * reshape(arange(size(y)) * 0.37 + 0.5, shape(y)))))\n";
    Program f(f_text + "f", "f.tsl");
    Program g(f_text + "grad(f, [0, 1])", "g.tsl");
    Value grads = g.run({whole(x), Value(w)});
    const Array dx = grads.as_list()[0].as_tiled().tile, dw = grads.as_list()[1].as_array();
    auto numeric = [&](Array xs, Array ws) { return f.run({whole(xs), Value(ws)}).as_array().item(); };
    for (int64_t k = 0; k < x.size(); ++k) {
      Array xp = x.copy(), xm = x.copy();
      xp.data<double>()[k] += h;
      xm.data<double>()[k] -= h;
      double want = (numeric(xp, w) - numeric(xm, w)) / (2 * h);
      EXPECT_NEAR(dx.get_double(k), want, 1e-6 + 1e-6 * std::fabs(want)) << "dx[" << k << "]";
    }
    for (int64_t k = 0; k < w.size(); ++k) {
      Array wp = w.copy(), wm = w.copy();
      wp.data<double>()[k] += h;
      wm.data<double>()[k] -= h;
      double want = (numeric(x, wp) - numeric(x, wm)) / (2 * h);
      EXPECT_NEAR(dw.get_double(k), want, 1e-6 + 1e-6 * std::fabs(want)) << "dw[" << k << "]";
    }
  }
}

TEST(ConvD, ArgumentErrors) {
  Array x = random_array({2, 6, 3}, 9), w = random_array({3, 3, 2}, 10);
  EXPECT_TRUE(throws_with<TypeError>([&] { call("conv1d_d", {Value(x), Value(w)}); },
                                     "[conv1d_d] argument 'x' must be a tiled array (for a plain array use conv1d), "
                                     "got float64 array of shape (2, 6, 3)"));
  EXPECT_TRUE(throws_with<TypeError>([&] { call("conv1d_d", {whole(x), whole(w)}); },
                                     "[conv1d_d] argument 'w' must be a plain array (the same on every locality)"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { call("conv1d_d", {whole(x), Value(random_array({3, 4, 2}, 1))}); },
      "[conv1d_d] x has 3 channels but the kernel expects 4"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { call("conv1d_d", {whole(random_array({6, 3}, 1)), Value(w)}); },
      "[conv1d_d] x must be 3-d (batch, steps, channels), got tiled float64 array of shape (6, 3)"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { call("conv1d_d", {whole(x), Value(w), Value(int64_t{0})}); },
      "[conv1d_d] argument 'stride' must be a positive integer, got 0"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { call("conv1d_d", {whole(x), Value(w), Value(int64_t{1}), Value("full")}); },
      "[conv1d_d] padding must be 'valid', 'same' or 'causal', got 'full'"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { call("conv1d_d", {whole(x), Value(w), Value(int64_t{1}), Value("valid"), Value(int64_t{3})}); },
      "[conv1d_d] kernel of effective size 7 (size 3, dilation 3) is larger than the input (6 steps)"));
  // A span that leaves out channels (made without check_spans).
  TiledArray part;
  part.tile = random_array({2, 6, 1}, 1);
  part.shape = {2, 6, 3};
  part.spans = {Span{{0, 0, 0}, {2, 6, 1}}};
  EXPECT_TRUE(throws_with<std::invalid_argument>([&] { call("conv1d_d", {Value(part), Value(w)}); },
                                                 "[conv1d_d] x must not be tiled along its channels (axis 2): "
                                                 "locality 0 holds [0:2, 0:6, 0:1] of shape (2, 6, 3)"));
  // A tiled array made for more localities than this program runs on.
  TiledArray other = whole(x).as_tiled();
  other.spans = {other.spans[0], other.spans[0]};
  EXPECT_TRUE(throws_with<std::invalid_argument>([&] { call("conv1d_d", {Value(other), Value(w)}); },
                                                 "[conv1d_d] argument 'x' is tiled for locality 0 of 2, but this is "
                                                 "locality 0 of 1"));
  // The cotangent must be tiled like the result.
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { call("conv1d_d_grad_input", {Value(random_array({2, 4, 2}, 1)), Value(w), whole(x)}); },
      "[conv1d_d_grad_input] g must be tiled like the result of conv1d_d: shape (2, 4, 2) with spans [0:2, 0:4, 0:2]; "
      "got float64 array of shape (2, 4, 2)"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { call("with_tile", {whole(x), Value(random_array({2, 5, 3}, 1))}); },
      "[with_tile] tile has shape (2, 5, 3) but this locality's tile of x (span [0:2, 0:6, 0:3]) has shape (2, 6, 3)"));
  EXPECT_TRUE(throws_with<TypeError>([&] { call("local_tile", {Value(x)}); },
                                     "[local_tile] argument 'x' must be a tiled array, got float64 array"));
}

TEST(ConvD, AutodiffHelpersTakeTiledCotangents) {
  Array a = random_array({2, 3, 1}, 11), b = random_array({2, 3, 1}, 12);
  Value sum = call("grad_accumulate", {whole(a), whole(b)});
  ASSERT_TRUE(sum.is_tiled());
  Array want = call("add", {Value(a), Value(b)}).as_array();
  EXPECT_TRUE(close(sum.as_tiled().tile, want));
  EXPECT_TRUE(call("grad_accumulate", {Value(), whole(a)}).equals(whole(a)));
  EXPECT_TRUE(throws_with<std::invalid_argument>([&] { call("grad_accumulate", {whole(a), Value(b)}); },
                                                 "[grad] cannot add the cotangents tiled float64 array"));
  EXPECT_TRUE(call("unbroadcast", {whole(a), whole(b)}).equals(whole(a)));
  Value cast = call("unbroadcast", {whole(a), whole(b.astype(DType::float32))});
  EXPECT_EQ(cast.as_tiled().dtype(), DType::float32);
  EXPECT_TRUE(throws_with<std::invalid_argument>([&] { call("unbroadcast", {Value(a), whole(b)}); },
                                                 "[grad] the cotangent of tiled float64 array of shape (2, 3, 1), "
                                                 "pages over 1 locality must be tiled like it, got float64 array"));
  // A plain x broadcast against a tiled whole: the cotangent summed back to x
  // (over every locality's tile: tests/distributed/tiled_grad.py).
  Value plain = call("unbroadcast", {whole(a), Value(random_array({3, 1}, 13).astype(DType::float32))});
  ASSERT_TRUE(plain.is_array());
  EXPECT_EQ(plain.as_array().dtype(), DType::float32);
  Array want_sum = call("sum", {Value(a), Value(int64_t{0})}).as_array().astype(DType::float32);
  EXPECT_TRUE(close(plain.as_array().astype(DType::float64), want_sum.astype(DType::float64)));
}

}  // namespace
}  // namespace tessera::test
