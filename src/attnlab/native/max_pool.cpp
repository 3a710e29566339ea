// 2x2 max pooling, stride 2, on a CPU, for channels-last activations: x (N, H, W, C) ->
// y (N, H / 2, W / 2, C), an odd last row or column dropped, as F.max_pool2d(x, 2).
//
// PyTorch's forward writes an int64 index per output, and its backward zeroes dx before it
// scatters dy into it. Here a window's four values are taken in F.max_pool2d's order ((0, 0),
// (0, 1), (1, 0), (1, 1)) and by its rule (the first maximum, or the last NaN); the backward
// pass finds the same one again from x (nothing else is kept) and writes each element of dx
// once: dy at it (-0 as +0, as PyTorch's 0 + dy), 0 at the window's other three and at a
// dropped row or column. (A bfloat16 NaN is written as 0x7FC0, c10's NaN; PyTorch's vectorised
// conversions may write other NaN bits.)

#include "common.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <vector>

namespace attnlab_native {

namespace {

// Which of a window's four values F.max_pool2d keeps: 0, 1, 2 or 3, as a float (selects in
// float lanes only: the compiler vectorises the loop that calls it).
inline float window_argmax(float v0, float v1, float v2, float v3) {
  float best = v0, at = 0.f;
  bool take = v1 > best || v1 != v1;
  best = take ? v1 : best;
  at = take ? 1.f : at;
  take = v2 > best || v2 != v2;
  best = take ? v2 : best;
  at = take ? 2.f : at;
  take = v3 > best || v3 != v3;
  return take ? 3.f : at;
}

template <typename T>
void forward_impl(const T* x, T* y, int64_t N, int64_t H, int64_t W, int64_t C) {
  const int64_t Ho = H / 2, Wo = W / 2;
  at::parallel_for(0, N * Ho, 16, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {  // output row r: (n, i)
      const int64_t n = r / Ho, i = r % Ho;
      for (int64_t j = 0; j < Wo; ++j) {
        const T* __restrict__ p0 = x + ((n * H + 2 * i) * W + 2 * j) * C;  // (0, 0)
        const T* __restrict__ p1 = p0 + C;                                  // (0, 1)
        const T* __restrict__ p2 = p0 + W * C;                              // (1, 0)
        const T* __restrict__ p3 = p2 + C;                                  // (1, 1)
        T* __restrict__ out = y + (r * Wo + j) * C;
        for (int64_t c = 0; c < C; ++c) {
          float v1 = load(p1, c), v2 = load(p2, c), v3 = load(p3, c), best = load(p0, c);
          best = v1 > best || v1 != v1 ? v1 : best;
          best = v2 > best || v2 != v2 ? v2 : best;
          best = v3 > best || v3 != v3 ? v3 : best;
          store(out, c, best);
        }
      }
    }
  });
}

template <typename T>
void backward_impl(const T* dy, const T* x, T* dx, int64_t N, int64_t H, int64_t W, int64_t C) {
  const int64_t Ho = H / 2, Wo = W / 2;
  const T zero{};  // +0 in both storage types
  at::parallel_for(0, N * H, 16, [&](int64_t begin, int64_t end) {
    const int64_t channels = C;  // a local: the stores below cannot change it
    std::vector<float> window(C);  // per channel, which of the window's four is the maximum
    float* __restrict__ at = window.data();
    for (int64_t r = begin; r < end; ++r) {  // row r of x: (n, h)
      const int64_t n = r / H, h = r % H, i = h / 2;
      T* __restrict__ row = dx + r * W * C;
      if (i >= Ho) {  // a dropped last row
        std::fill(row, row + W * C, zero);
        continue;
      }
      const T* top = x + (n * H + 2 * i) * W * C;  // the window's first row
      const float first = float((h % 2) * 2);      // this row's slots: 0 and 1, or 2 and 3
      for (int64_t j = 0; j < Wo; ++j) {
        const T* __restrict__ p0 = top + 2 * j * C;
        const T* __restrict__ p1 = p0 + C;
        const T* __restrict__ p2 = p0 + W * C;
        const T* __restrict__ p3 = p2 + C;
        const T* __restrict__ g = dy + ((n * Ho + i) * Wo + j) * C;
        T* __restrict__ left = row + 2 * j * C;  // (h, 2j)
        T* __restrict__ right = left + C;        // (h, 2j + 1)
        for (int64_t c = 0; c < channels; ++c)
          at[c] = window_argmax(load(p0, c), load(p1, c), load(p2, c), load(p3, c));
        for (int64_t c = 0; c < channels; ++c) {  // dy at the window's maximum, else +0
          float dy_c = load(g, c) + 0.f;  // -0 as +0, as PyTorch's zeroed dx plus dy gives
          store(left, c, at[c] == first ? dy_c : 0.f);
          store(right, c, at[c] == first + 1.f ? dy_c : 0.f);
        }
      }
      std::fill(row + 2 * Wo * C, row + W * C, zero);  // a dropped last column
    }
  });
}

void check(const torch::Tensor& x) {
  TORCH_CHECK(x.dim() == 4 && x.is_contiguous() && x.device().is_cpu(),
              "x: expected a contiguous (N, H, W, C) CPU tensor");
  TORCH_CHECK(x.scalar_type() == at::kFloat || x.scalar_type() == at::kBFloat16,
              "x: expected float32 or bfloat16, got ", x.scalar_type());
  TORCH_CHECK(x.size(1) >= 2 && x.size(2) >= 2, "x: expected H and W >= 2");
}

}  // namespace

torch::Tensor max_pool_forward(const torch::Tensor& x) {
  check(x);
  const int64_t N = x.size(0), H = x.size(1), W = x.size(2), C = x.size(3);
  auto y = torch::empty({N, H / 2, W / 2, C}, x.options());
  DISPATCH(x, forward_impl(static_cast<const T*>(x.data_ptr()), static_cast<T*>(y.data_ptr()),
                           N, H, W, C));
  return y;
}

torch::Tensor max_pool_backward(const torch::Tensor& dy, const torch::Tensor& x) {
  check(x);
  const int64_t N = x.size(0), H = x.size(1), W = x.size(2), C = x.size(3);
  TORCH_CHECK(dy.is_contiguous() && dy.scalar_type() == x.scalar_type() &&
                  dy.sizes() == torch::IntArrayRef({N, H / 2, W / 2, C}),
              "dy: expected a contiguous (N, H / 2, W / 2, C) tensor of x's dtype");
  auto dx = torch::empty_like(x);
  DISPATCH(x, backward_impl(static_cast<const T*>(dy.data_ptr()),
                            static_cast<const T*>(x.data_ptr()), static_cast<T*>(dx.data_ptr()),
                            N, H, W, C));
  return dx;
}

}  // namespace attnlab_native
