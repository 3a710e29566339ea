// Batch normalisation followed by ReLU, in training, on a CPU: one operator forward and one
// backward, for channels-last activations (N, H, W, C) seen as rows of C (M = N * H * W rows).
//
// PyTorch runs the pair as four operators (native_batch_norm, relu_, threshold_backward,
// native_batch_norm_backward), and on bfloat16 channels-last tensors each of them is compute
// bound far below the memory's rate. Here, per element:
//   forward   one pass for the statistics, one that writes y = max((x - mean) * scale + bias, 0);
//   backward  one pass for the two sums, one that writes dx.
// Nothing but the input is kept for the backward pass: ReLU's mask is recomputed from x.
//
// Numerics: the statistics are sums over chunks of CHUNK rows (each about its own first row):
// in float over GROUP rows, then in double, then over the chunks in double. The chunks are
// fixed, so the result does not depend on the number of threads. The backward's sums likewise.
//
// Shapes: x, y, dy, dx (M, C), contiguous; weight, bias, mean, invstd, var (C,) float32.

#include "common.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace attnlab_native {

namespace {

constexpr int64_t CHUNK = 256;  // rows per partial sum (in double)
constexpr int64_t GROUP = 8;    // rows summed in float before they are added to it

// g, or +0 where z <= 0 (whatever g, NaN included: threshold_backward's rule).
inline float relu_grad(float z, float g) { return z <= 0.f ? 0.f : g; }

inline int64_t chunks(int64_t rows) { return (rows + CHUNK - 1) / CHUNK; }

// Per chunk k of rows: sums[k] = sum of (x - x[first row of k]), squares[k] likewise.
template <typename T>
void chunk_sums(const T* x, int64_t M, int64_t C, double* sums, double* squares) {
  at::parallel_for(0, chunks(M), 1, [&](int64_t begin, int64_t end) {
    std::vector<float> group(2 * C);  // float sums of GROUP rows, added to the double ones
    float* __restrict__ gs = group.data();
    float* __restrict__ gs2 = gs + C;
    for (int64_t k = begin; k < end; ++k) {
      double* __restrict__ s = sums + k * C;
      double* __restrict__ s2 = squares + k * C;
      const T* __restrict__ first = x + k * CHUNK * C;
      for (int64_t c = 0; c < C; ++c) s[c] = s2[c] = 0.0;
      const int64_t stop = std::min(M, (k + 1) * CHUNK);
      for (int64_t m0 = k * CHUNK; m0 < stop; m0 += GROUP) {
        for (int64_t c = 0; c < C; ++c) gs[c] = gs2[c] = 0.f;
        for (int64_t m = m0; m < std::min(stop, m0 + GROUP); ++m) {
          const T* __restrict__ row = x + m * C;
          for (int64_t c = 0; c < C; ++c) {
            float d = load(row, c) - load(first, c);
            gs[c] += d;
            gs2[c] += d * d;
          }
        }
        for (int64_t c = 0; c < C; ++c) {
          s[c] += gs[c];
          s2[c] += gs2[c];
        }
      }
    }
  });
}

template <typename T>
void forward_impl(const T* x, T* y, int64_t M, int64_t C, const float* weight,
                  const float* bias, double eps, float* mean, float* invstd, float* var) {
  const int64_t K = chunks(M);
  std::vector<double> sums(K * C), squares(K * C);
  chunk_sums(x, M, C, sums.data(), squares.data());
  // Merged in double, chunk k's rows being x0 (its first row) + d:
  //   sum(x) = sum_k n_k x0 + s_k;  sum((x - mu)^2) = sum_k q_k + 2 (x0 - mu) s_k + n_k (x0 - mu)^2
  std::vector<double> total(C, 0.0), m2(C, 0.0);
  for (int64_t k = 0; k < K; ++k) {
    const double n = double(std::min(M, (k + 1) * CHUNK) - k * CHUNK);
    const T* first = x + k * CHUNK * C;
    for (int64_t c = 0; c < C; ++c) total[c] += n * load(first, c) + sums[k * C + c];
  }
  for (int64_t c = 0; c < C; ++c) total[c] /= double(M);  // the mean
  for (int64_t k = 0; k < K; ++k) {
    const double n = double(std::min(M, (k + 1) * CHUNK) - k * CHUNK);
    const T* first = x + k * CHUNK * C;
    for (int64_t c = 0; c < C; ++c) {
      double shift = load(first, c) - total[c];
      m2[c] += squares[k * C + c] + 2.0 * shift * sums[k * C + c] + n * shift * shift;
    }
  }
  std::vector<float> scale(C);
  for (int64_t c = 0; c < C; ++c) {
    double v = std::max(m2[c], 0.0) / double(M);
    mean[c] = float(total[c]);
    var[c] = float(v);
    invstd[c] = float(1.0 / std::sqrt(v + eps));
    scale[c] = weight[c] * invstd[c];
  }
  at::parallel_for(0, M, 256, [&](int64_t begin, int64_t end) {
    const float* __restrict__ a = scale.data();
    const float* __restrict__ mu = mean;
    for (int64_t m = begin; m < end; ++m) {
      const T* __restrict__ in = x + m * C;
      T* __restrict__ out = y + m * C;
      for (int64_t c = 0; c < C; ++c) {
        float z = (load(in, c) - mu[c]) * a[c] + bias[c];
        store(out, c, z <= 0.f ? 0.f : z);  // NaN stays NaN, as in torch.relu
      }
    }
  });
}

// dz = dy where (x - mean) * scale + bias > 0, else 0 (ReLU's backward, its mask recomputed);
// dx = scale * (dz - mean(dz) - xhat * mean(dz * xhat)), xhat = (x - mean) * invstd;
// dweight = sum(dz * xhat), dbias = sum(dz).
template <typename T>
void backward_impl(const T* dy, const T* x, T* dx, int64_t M, int64_t C, const float* weight,
                   const float* bias, const float* mean, const float* invstd, float* dweight,
                   float* dbias) {
  std::vector<float> scale(C);
  for (int64_t c = 0; c < C; ++c) scale[c] = weight[c] * invstd[c];
  const int64_t K = chunks(M);
  std::vector<double> partial(K * C * 2);  // per chunk: sum(dz), then sum(dz * (x - mean))
  at::parallel_for(0, K, 1, [&](int64_t begin, int64_t end) {
    const float* __restrict__ a = scale.data();
    const float* __restrict__ mu = mean;
    std::vector<float> group(2 * C);  // float sums of GROUP rows, added to the double ones
    float* __restrict__ gs = group.data();
    float* __restrict__ gsx = gs + C;
    for (int64_t k = begin; k < end; ++k) {
      double* __restrict__ s = partial.data() + k * C * 2;
      double* __restrict__ sx = s + C;
      for (int64_t c = 0; c < C; ++c) s[c] = sx[c] = 0.0;
      const int64_t stop = std::min(M, (k + 1) * CHUNK);
      for (int64_t m0 = k * CHUNK; m0 < stop; m0 += GROUP) {
        for (int64_t c = 0; c < C; ++c) gs[c] = gsx[c] = 0.f;
        for (int64_t m = m0; m < std::min(stop, m0 + GROUP); ++m) {
          const T* __restrict__ xr = x + m * C;
          const T* __restrict__ gr = dy + m * C;
          // omp simd: without it GCC leaves this loop scalar for float32 (its report: "no
          // vectype" for a float load) and the float32 backward runs 2.6x slower
#pragma omp simd
          for (int64_t c = 0; c < C; ++c) {
            float xv = load(xr, c), centred = xv - mu[c];
            float dz = relu_grad(centred * a[c] + bias[c], load(gr, c));
            gs[c] += dz;
            gsx[c] += dz * centred;
          }
        }
        for (int64_t c = 0; c < C; ++c) {
          s[c] += gs[c];
          sx[c] += gsx[c];
        }
      }
    }
  });
  // dx = A * dz + B * (x - mean) + D per channel (about the mean: where it is far from 0,
  // B * x and D would be large and cancel)
  std::vector<double> sums(C, 0.0), sums_x(C, 0.0);
  for (int64_t k = 0; k < K; ++k) {
    for (int64_t c = 0; c < C; ++c) {
      sums[c] += partial[k * C * 2 + c];
      sums_x[c] += partial[k * C * 2 + C + c];
    }
  }
  std::vector<float> A(C), B(C), D(C);
  for (int64_t c = 0; c < C; ++c) {
    double is = invstd[c];
    dbias[c] = float(sums[c]);
    dweight[c] = float(sums_x[c] * is);
    A[c] = scale[c];
    B[c] = float(-double(scale[c]) * is * is * sums_x[c] / M);
    D[c] = float(-double(scale[c]) * sums[c] / M);
  }
  at::parallel_for(0, M, 256, [&](int64_t begin, int64_t end) {
    const float* __restrict__ a = scale.data();
    const float* __restrict__ mu = mean;
    const float* __restrict__ pa = A.data();
    const float* __restrict__ pb = B.data();
    const float* __restrict__ pd = D.data();
    for (int64_t m = begin; m < end; ++m) {
      const T* __restrict__ xr = x + m * C;
      const T* __restrict__ gr = dy + m * C;
      T* __restrict__ out = dx + m * C;
      for (int64_t c = 0; c < C; ++c) {
        float centred = load(xr, c) - mu[c];
        float dz = relu_grad(centred * a[c] + bias[c], load(gr, c));
        store(out, c, pa[c] * dz + pb[c] * centred + pd[c]);
      }
    }
  });
}

void check(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) {
  TORCH_CHECK(x.dim() == 2 && x.is_contiguous() && x.device().is_cpu(),
              "x: expected a contiguous (M, C) CPU tensor");
  TORCH_CHECK(x.scalar_type() == at::kFloat || x.scalar_type() == at::kBFloat16,
              "x: expected float32 or bfloat16, got ", x.scalar_type());
  TORCH_CHECK(x.size(0) > 1, "x: expected more than one value per channel");
  for (const auto* t : {&weight, &bias})
    TORCH_CHECK(t->scalar_type() == at::kFloat && t->is_contiguous() && t->numel() == x.size(1),
                "weight, bias: expected contiguous float32 tensors of C = ", x.size(1), " values");
}

}  // namespace

std::vector<torch::Tensor> batch_norm_relu_forward(const torch::Tensor& x,
                                                   const torch::Tensor& weight,
                                                   const torch::Tensor& bias, double eps) {
  check(x, weight, bias);
  const int64_t M = x.size(0), C = x.size(1);
  auto y = torch::empty_like(x);
  auto mean = torch::empty({C}, weight.options()), invstd = torch::empty_like(mean),
       var = torch::empty_like(mean);
  DISPATCH(x, forward_impl(static_cast<const T*>(x.data_ptr()), static_cast<T*>(y.data_ptr()),
                           M, C, weight.data_ptr<float>(), bias.data_ptr<float>(), eps,
                           mean.data_ptr<float>(), invstd.data_ptr<float>(),
                           var.data_ptr<float>()));
  return {y, mean, invstd, var};
}

std::vector<torch::Tensor> batch_norm_relu_backward(const torch::Tensor& dy,
                                                    const torch::Tensor& x,
                                                    const torch::Tensor& weight,
                                                    const torch::Tensor& bias,
                                                    const torch::Tensor& mean,
                                                    const torch::Tensor& invstd) {
  check(x, weight, bias);
  TORCH_CHECK(dy.sizes() == x.sizes() && dy.scalar_type() == x.scalar_type() && dy.is_contiguous(),
              "dy: expected a contiguous tensor of x's shape and dtype");
  const int64_t M = x.size(0), C = x.size(1);
  auto dx = torch::empty_like(x);
  auto dweight = torch::empty_like(weight), dbias = torch::empty_like(weight);
  DISPATCH(x, backward_impl(static_cast<const T*>(dy.data_ptr()),
                            static_cast<const T*>(x.data_ptr()), static_cast<T*>(dx.data_ptr()),
                            M, C, weight.data_ptr<float>(), bias.data_ptr<float>(),
                            mean.data_ptr<float>(), invstd.data_ptr<float>(),
                            dweight.data_ptr<float>(), dbias.data_ptr<float>()));
  return {dx, dweight, dbias};
}

}  // namespace attnlab_native
