// Stands in for cuBLAS's cublas_v2.h in the CUDA-on-CPU emulator: the types
// and the declarations runtime.h takes its entries' types from. The entries
// themselves are runtime.cpp's, on OpenBLAS.
#pragma once
#include <cstdint>

#include "cuda_runtime.h"

using cublasHandle_t = struct cublasContext*;
enum cublasStatus_t { CUBLAS_STATUS_SUCCESS = 0, CUBLAS_STATUS_INVALID_VALUE = 7 };
enum cublasOperation_t { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };
enum cublasMath_t { CUBLAS_DEFAULT_MATH = 0, CUBLAS_TF32_TENSOR_OP_MATH = 3 };

cublasStatus_t cublasCreate_v2(cublasHandle_t* handle);
cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream);
cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode);
cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t handle, void* workspace, size_t bytes);
cublasStatus_t cublasSgemmStridedBatched_64(cublasHandle_t handle, cublasOperation_t transa,
                                            cublasOperation_t transb, int64_t m, int64_t n,
                                            int64_t k, const float* alpha, const float* a,
                                            int64_t lda, long long stride_a, const float* b,
                                            int64_t ldb, long long stride_b, const float* beta,
                                            float* c, int64_t ldc, long long stride_c,
                                            int64_t batch);
const char* cublasGetStatusName(cublasStatus_t status);
const char* cublasGetStatusString(cublasStatus_t status);
