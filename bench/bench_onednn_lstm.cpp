// One LSTM layer of the keras-io bidirectional LSTM (batch 32, 100 steps, 128
// features, 64 units, float32, one thread): tessera's recurrent kernels (the
// input projection, then per step oneDNN's sgemm and the gates, batch blocks
// of 16 rows; backward rows, dx and the weights' products) raced against
// oneDNN's own whole-sequence LSTM primitives (lstm_forward in training mode,
// lstm_backward) of the libdnnl tessera links, on blocks of 16 rows and on the
// whole batch. Median of 7 runs of 10 calls each, milliseconds of this
// process's CPU time per call (on a machine shared with other jobs the CPU
// time moves far less than the wall time).
//
//   cmake --build build --target bench_onednn_lstm && build/bench/bench_onednn_lstm
#include <oneapi/dnnl/dnnl.hpp>
#include <omp.h>

#include <algorithm>
#include <ctime>
#include <cstdio>
#include <cstring>
#include <functional>
#include <vector>

#include "tessera/kernels/recurrent.hpp"

namespace {

constexpr int64_t kBatch = 32, kSteps = 100, kFeatures = 128, kUnits = 64, kGates = 4;

double cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) * 1e-6;
}

double median_ms(const std::function<void()>& f) {
  std::vector<double> runs;
  f();
  for (int r = 0; r < 7; ++r) {
    const double t0 = cpu_ms();
    for (int i = 0; i < 10; ++i) f();
    runs.push_back((cpu_ms() - t0) / 10);
  }
  std::sort(runs.begin(), runs.end());
  return runs[3];
}

std::vector<float> filled(int64_t n, float scale) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = scale * static_cast<float>((i * 7919) % 13 - 6) / 6.0f;
  return v;
}

void race_tessera() {
  namespace kr = tessera::kernels;
  const int64_t B = kBatch, S = kSteps, F = kFeatures, H = kUnits, GH = kGates * kUnits;
  kr::RnnProblem p{};
  p.cell = kr::RnnCell::lstm;
  p.batch = B;
  p.steps = S;
  p.units = H;
  const auto x = filled(B * S * F, 1.0f), k = filled(F * GH, 0.1f), u = filled(H * GH, 0.1f);
  const auto gout = filled(B * S * H, 0.5f);
  std::vector<float> xw(B * S * GH), hs((S + 1) * B * H), cs((S + 1) * B * H),
      acts(S * B * kr::rnn_act_width(p.cell) * H);
  const int64_t rows = 16;
  auto forward = [&] {
    for (int64_t b0 = 0; b0 < B; b0 += rows) {
      kr::rnn_matmul(false, false, rows * S, GH, F, x.data() + b0 * S * F, F, k.data(), GH, 0.0f,
                     xw.data() + b0 * S * GH, GH);
      kr::rnn_forward<float>(p, b0, b0 + rows, xw.data() + b0 * S * GH, u.data(), nullptr,
                             nullptr, nullptr, hs.data(), cs.data(), acts.data());
    }
  };
  std::vector<float> dxw(B * S * GH), hx(B * S * H), dh0(B * H), dc0(B * H), dx(B * S * F),
      dk(F * GH), du(H * GH), kt(GH * F);
  auto backward = [&] {
    for (int64_t b0 = 0; b0 < B; b0 += rows) {
      kr::rnn_backward_rows<float>(p, b0, b0 + rows, u.data(), hs.data(), cs.data(), acts.data(),
                                   gout.data(), true, nullptr, nullptr, nullptr, nullptr,
                                   dxw.data(), hx.data(), dh0.data(), dc0.data());
      kr::rnn_matmul(false, false, rows * S, F, GH, dxw.data() + b0 * S * GH, GH, kt.data(), F,
                     0.0f, dx.data() + b0 * S * F, F);
    }
    for (int64_t j0 = 0; j0 < GH; j0 += H) {
      kr::rnn_backward_weights<float>(p, j0, j0 + H, hs.data(), acts.data(), nullptr, nullptr,
                                      hx.data(), dxw.data(), du.data(), nullptr);
      kr::rnn_matmul(true, false, F, H, B * S, x.data(), F, dxw.data() + j0, GH, 0.0f,
                     dk.data() + j0, GH);
    }
  };
  std::printf("tessera kernels (blocks of 16 rows)   forward %7.3f ms  backward %7.3f ms\n",
              median_ms(forward), median_ms(backward));
}

void race_onednn(int64_t n, int64_t blocks) {
  using namespace dnnl;
  using tag = memory::format_tag;
  const int64_t T = kSteps, C = kFeatures, H = kUnits;
  engine eng(engine::kind::cpu, 0);
  stream s(eng);
  auto md = [](memory::dims d, tag t) { return memory::desc(d, memory::data_type::f32, t); };
  const memory::dims src{T, n, C}, iter{1, 1, n, H}, wl{1, 1, C, 4, H}, wi{1, 1, H, 4, H},
      bias{1, 1, 4, H}, dst{T, n, H};
  lstm_forward::desc fd(prop_kind::forward_training, rnn_direction::unidirectional_left2right,
                        md(src, tag::tnc), md(iter, tag::ldnc), md(iter, tag::ldnc),
                        md(wl, tag::any), md(wi, tag::any), md(bias, tag::ldgo),
                        md(dst, tag::tnc), md(iter, tag::ldnc), md(iter, tag::ldnc));
  lstm_forward::primitive_desc fpd(fd, eng);
  lstm_backward::desc bd(prop_kind::backward, rnn_direction::unidirectional_left2right,
                         md(src, tag::tnc), md(iter, tag::ldnc), md(iter, tag::ldnc),
                         md(wl, tag::any), md(wi, tag::any), md(bias, tag::ldgo),
                         md(dst, tag::tnc), md(iter, tag::ldnc), md(iter, tag::ldnc),
                         md(src, tag::tnc), md(iter, tag::ldnc), md(iter, tag::ldnc),
                         md(wl, tag::any), md(wi, tag::any), md(bias, tag::ldgo),
                         md(dst, tag::tnc), md(iter, tag::ldnc), md(iter, tag::ldnc));
  lstm_backward::primitive_desc bpd(bd, eng, fpd);
  auto mem = [&](const memory::desc& d) {
    memory m(d, eng);
    std::memset(m.get_data_handle(), 0, d.get_size());
    return m;
  };
  memory x = mem(fpd.src_layer_desc()), h0 = mem(fpd.src_iter_desc()),
         c0 = mem(fpd.src_iter_c_desc()), w = mem(fpd.weights_layer_desc()),
         wr = mem(fpd.weights_iter_desc()), b = mem(fpd.bias_desc()),
         y = mem(fpd.dst_layer_desc()), hn = mem(fpd.dst_iter_desc()),
         cn = mem(fpd.dst_iter_c_desc()), ws = mem(fpd.workspace_desc()),
         wb = mem(bpd.weights_layer_desc()), wrb = mem(bpd.weights_iter_desc()),
         dx = mem(bpd.diff_src_layer_desc()), dh0 = mem(bpd.diff_src_iter_desc()),
         dc0 = mem(bpd.diff_src_iter_c_desc()), dw = mem(bpd.diff_weights_layer_desc()),
         dwr = mem(bpd.diff_weights_iter_desc()), db = mem(bpd.diff_bias_desc()),
         dy = mem(bpd.diff_dst_layer_desc()), dhn = mem(bpd.diff_dst_iter_desc()),
         dcn = mem(bpd.diff_dst_iter_c_desc());
  const auto xs = filled(T * n * C, 1.0f);
  std::memcpy(x.get_data_handle(), xs.data(), sizeof(float) * xs.size());
  lstm_forward fwd(fpd);
  lstm_backward bwd(bpd);
  auto forward = [&] {
    for (int64_t i = 0; i < blocks; ++i) {
      fwd.execute(s, {{DNNL_ARG_SRC_LAYER, x}, {DNNL_ARG_SRC_ITER, h0}, {DNNL_ARG_SRC_ITER_C, c0},
                      {DNNL_ARG_WEIGHTS_LAYER, w}, {DNNL_ARG_WEIGHTS_ITER, wr},
                      {DNNL_ARG_BIAS, b}, {DNNL_ARG_DST_LAYER, y}, {DNNL_ARG_DST_ITER, hn},
                      {DNNL_ARG_DST_ITER_C, cn}, {DNNL_ARG_WORKSPACE, ws}});
    }
  };
  auto backward = [&] {
    for (int64_t i = 0; i < blocks; ++i) {
      bwd.execute(s, {{DNNL_ARG_SRC_LAYER, x}, {DNNL_ARG_SRC_ITER, h0},
                      {DNNL_ARG_SRC_ITER_C, c0}, {DNNL_ARG_WEIGHTS_LAYER, wb},
                      {DNNL_ARG_WEIGHTS_ITER, wrb}, {DNNL_ARG_BIAS, b},
                      {DNNL_ARG_DST_LAYER, y}, {DNNL_ARG_DST_ITER, hn},
                      {DNNL_ARG_DST_ITER_C, cn}, {DNNL_ARG_WORKSPACE, ws},
                      {DNNL_ARG_DIFF_SRC_LAYER, dx}, {DNNL_ARG_DIFF_SRC_ITER, dh0},
                      {DNNL_ARG_DIFF_SRC_ITER_C, dc0}, {DNNL_ARG_DIFF_WEIGHTS_LAYER, dw},
                      {DNNL_ARG_DIFF_WEIGHTS_ITER, dwr}, {DNNL_ARG_DIFF_BIAS, db},
                      {DNNL_ARG_DIFF_DST_LAYER, dy}, {DNNL_ARG_DIFF_DST_ITER, dhn},
                      {DNNL_ARG_DIFF_DST_ITER_C, dcn}});
    }
  };
  std::printf("oneDNN lstm (%s, %lld x %lld rows)  forward %7.3f ms  backward %7.3f ms\n",
              fpd.impl_info_str(), static_cast<long long>(blocks), static_cast<long long>(n),
              median_ms(forward), median_ms(backward));
}

}  // namespace

int main() {
  omp_set_num_threads(1);
  std::printf("one LSTM layer: batch %lld, %lld steps, %lld features, %lld units; 1 thread; "
              "oneDNN %d.%d\n",
              static_cast<long long>(kBatch), static_cast<long long>(kSteps),
              static_cast<long long>(kFeatures), static_cast<long long>(kUnits),
              dnnl_version()->major, dnnl_version()->minor);
  race_tessera();
  race_onednn(16, kBatch / 16);
  race_onednn(kBatch, 1);
  return 0;
}
