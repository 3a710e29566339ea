// attnlab.native's operators as one Python module (torch.utils.cpp_extension, native/build.py).

#include "common.h"

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  using namespace attnlab_native;
  m.def("batch_norm_relu_forward", &batch_norm_relu_forward,
        "batch norm (batch statistics) then ReLU: y, mean, invstd, var");
  m.def("batch_norm_relu_backward", &batch_norm_relu_backward, "its backward: dx, dweight, dbias");
  m.def("max_pool_forward", &max_pool_forward, "2x2 max pooling, stride 2, channels last");
  m.def("max_pool_backward", &max_pool_backward, "its backward: dx");
}
