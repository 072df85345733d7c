// tests/optim/test_optim_reference.cpp's PyTorch reference trajectories on the CUDA device
// (the emulator in test_cuda_on_cpu; skipped with the rest of the suite where none is).
#define MINIDL_REFERENCE_ON_CUDA
#include "optim/test_optim_reference.cpp"
