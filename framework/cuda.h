// The CUDA-only API: which GPU, TF32, how convolutions run, and the GPU's
// queue. Implemented in framework/backend/cuda/ when minidl is built with
// CUDA, and by the stub in framework/backend/no_cuda/ otherwise (there every
// call is answered as on a machine without a GPU). CUDA graphs:
// framework/cuda_graph.h; memory: memory_stats(Device::CUDA) (tensor.h).
#pragma once
#include <string>
#include <vector>

#include "framework/device.h"

namespace minidl {

namespace cuda {
// float32 GEMM and convolution on CUDA may use TF32 tensor cores (10-bit
// mantissa inputs) when allowed; off by default, as in PyTorch. No effect on
// the CPU or in a build without CUDA.
void set_allow_tf32(bool allow);
bool allow_tf32();

// How float32 convolutions run on CUDA, per shape and pass (forward, input
// gradient, weight gradient), like PyTorch's cudnn.benchmark:
//   Auto (default)  the first call outside a CUDA graph capture times
//                   minidl's im2col + cuBLAS, its direct kernels (small
//                   windows: C/groups*KH*KW and OC/groups*KH*KW at most 1024)
//                   and cuDNN's deterministic algorithms, and keeps the
//                   fastest; a shape first met inside a capture keeps direct
//                   where it applies, else im2col
//   Im2col          im2col + cuBLAS always
//   Direct          the direct kernels where they apply, else im2col
//   Cudnn           cuDNN (its heuristic's first deterministic algorithm)
//                   wherever its descriptors can hold the shape
// Every path is deterministic; they agree up to rounding. cuDNN 9
// (libcudnn.so.9) is opened at first use. Where it cannot be, Auto chooses as
// inside a capture and Cudnn throws. No effect on the CPU.
enum class ConvAlgorithm { Auto, Im2col, Cudnn, Direct };
void set_conv_algorithm(ConvAlgorithm algorithm);
ConvAlgorithm conv_algorithm();
// One line per choice made so far in this process, e.g. "forward
// x[64,1,28,28] w[6,1,5,5] stride 1 pad 0: cudnn algo 1 (im2col 21.0 us,
// cudnn 9.8 us)"; empty without CUDA.
std::vector<std::string> conv_choices();

// Whether CUDA tensors can be made here (device_available(Device::CUDA)).
bool is_available();
// The number of GPUs this process can use (0 without CUDA or a GPU).
int device_count();
// Waits until the GPU has done all the work queued so far (nothing without one).
void synchronize();
// Which GPU this process's CUDA tensors live on: one per process, as with one
// rank per GPU. Default 0; parallel::init() picks the local rank modulo
// device_count() when MPI starts several ranks on a host. Fixed at the first
// CUDA tensor: set_device before it, or with the index already in use; else
// it throws, as does an index that is not < device_count().
void set_device(int index);
int device();  // the GPU in use, or the one the first CUDA tensor will use
// GPU index % device_count() for the first CUDA tensor, unless set_device
// was called or the GPU is fixed (what parallel::init() calls; it makes no
// CUDA call, so a CPU-only run never starts the driver for it).
void prefer_device(int index);
}  // namespace cuda

}  // namespace minidl
