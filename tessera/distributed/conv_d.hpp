// The geometry of conv1d_d, the 1-d convolution of an array tiled along time
// (tessera/distributed/conv_d.cpp): which outputs each locality computes, which input
// steps those outputs read, and where the halo (the steps read beyond a
// locality's own part) comes from. Pure functions of the tiling, the same on
// every locality, so each one knows what to send and what to receive without
// asking (and tests can check the plans of many localities in one process).
//
// The rule: output j belongs to the locality that owns input step j * stride
// (its anchor). Windows are those of conv1d: output j reads steps
// j * stride - pad_lo + i * dilation for i < kernel_size, zeros outside [0, n).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace tessera::distributed::detail {

// Time steps [start, stop).
struct Steps {
  int64_t start = 0, stop = 0;

  int64_t size() const { return std::max<int64_t>(stop - start, 0); }
  bool empty() const { return stop <= start; }
  bool operator==(const Steps&) const = default;
  // "[3, 7)"
  std::string str() const;
};

// The intersection of two step ranges (empty when they do not meet).
Steps intersect(Steps a, Steps b);

// A conv1d along an input of `steps` steps, as the local conv1d computes it.
struct ConvSteps {
  int64_t steps = 0, kernel_size = 1, stride = 1, dilation = 1;
  std::string padding = "valid";
  int64_t effective = 1;  // dilation * (kernel_size - 1) + 1
  int64_t out = 0;        // output steps
  int64_t pad_lo = 0;     // zeros before step 0 (after the end: whatever the last window needs)

  // Steps a locality reads before its first anchor and after its last one.
  int64_t halo_before() const { return pad_lo; }
  int64_t halo_after() const { return effective - 1 - pad_lo; }
  // The steps read by outputs [first, last), not clipped to the input.
  Steps window(Steps outputs) const;
  // "kernel_size=3, stride=1, padding='same', dilation=2"
  std::string settings() const;
};

// The geometry of conv1d(x, w, stride, padding, dilation) for `steps` input
// steps. Throws ValueError naming `op` for an unknown padding or a 'valid'
// window longer than the input.
ConvSteps conv_steps(int64_t steps, int64_t kernel_size, int64_t stride, const std::string& padding,
                     int64_t dilation, const char* op);

// How the work of a conv1d_d of an array tiled along time is shared out.
struct TimePlan {
  // The tiles already hold their halos (spans overlap): no exchange.
  bool overlapped = false;
  // Per locality: the input steps it owns (a partition of [0, n)).
  std::vector<Steps> owned;
  // Per locality: its output steps (a partition of [0, out)).
  std::vector<Steps> outputs;
  // Per locality: the input steps its outputs read, within [0, n) (empty
  // without outputs), and the zeros they read beyond the ends of the input.
  std::vector<Steps> reads;
  std::vector<int64_t> pad_before, pad_after;
};

// The plan for tiles holding steps `tiles[r]` (locality r's time span).
// Spans that partition the steps are owned as they are and the halos are
// exchanged; overlapping spans are an overlapped tiling, whose owned parts are
// recovered from the overlaps (each must then hold the halo of its outputs).
// Throws ValueError naming `op` for steps in no span or too small overlaps.
TimePlan plan_time(const std::vector<Steps>& tiles, const ConvSteps& g, const char* op);

// The spans of overlap_d: every non-empty owned part widened by the halo of
// `g` on both sides, within [0, n). plan_time gives these back the parts they
// were made from.
std::vector<Steps> halo_steps(const std::vector<Steps>& owned, const ConvSteps& g);

}  // namespace tessera::distributed::detail
