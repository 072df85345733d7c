// tests/nn/test_torch_rnn.cpp's PyTorch reference cases on the CUDA device (the emulator
// in test_cuda_on_cpu; skipped with the rest of the suite where none is).
#define MINIDL_REFERENCE_ON_CUDA
#include "nn/test_torch_rnn.cpp"
