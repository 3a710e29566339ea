// What the operators of attnlab.native share: bfloat16 and float32 loads and stores through
// float, and a dispatch on a tensor's dtype to the storage type T (uint16_t: bfloat16).

#pragma once

#include <torch/extension.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace attnlab_native {

inline float load(const float* p, int64_t i) { return p[i]; }
inline float load(const uint16_t* p, int64_t i) {  // bfloat16: the top half of a float
  uint32_t bits = uint32_t(p[i]) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
inline void store(float* p, int64_t i, float v) { p[i] = v; }
inline void store(uint16_t* p, int64_t i, float v) {  // round to nearest even, as torch does
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  uint32_t rounded = (bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16;
  p[i] = (v != v) ? uint16_t(0x7FC0) : uint16_t(rounded);
}

#define DISPATCH(x, CALL)                                                                      \
  if ((x).scalar_type() == at::kBFloat16) {                                                    \
    using T = uint16_t;                                                                        \
    CALL;                                                                                      \
  } else {                                                                                     \
    using T = float;                                                                           \
    CALL;                                                                                      \
  }

// The operators (batch_norm_relu.cpp, max_pool.cpp), bound to Python in bindings.cpp.
std::vector<torch::Tensor> batch_norm_relu_forward(const torch::Tensor& x,
                                                   const torch::Tensor& weight,
                                                   const torch::Tensor& bias, double eps);
std::vector<torch::Tensor> batch_norm_relu_backward(const torch::Tensor& dy,
                                                    const torch::Tensor& x,
                                                    const torch::Tensor& weight,
                                                    const torch::Tensor& bias,
                                                    const torch::Tensor& mean,
                                                    const torch::Tensor& invstd);
torch::Tensor max_pool_forward(const torch::Tensor& x);
torch::Tensor max_pool_backward(const torch::Tensor& dy, const torch::Tensor& x);

}  // namespace attnlab_native
