// tests/framework/test_torch_norm.cpp's PyTorch reference cases on the CUDA device (the emulator
// in test_cuda_on_cpu; skipped with the rest of the suite where none is).
#define MINIDL_REFERENCE_ON_CUDA
#include "framework/test_torch_norm.cpp"
