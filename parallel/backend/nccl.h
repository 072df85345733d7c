// The NCCL backend: the CUDA side of an MPI communicator (built only with
// MINIDL_CUDA and NCCL's header; see CMakeLists.txt). COMPILED, NOT YET RUN:
// no GPU was at hand when it was written, so no test has exercised it; the
// tests run CUDA tensors through the MPI backend's host staging instead.
//
// MpiCommunicator::on_device(CUDA) calls open_nccl() at the first collective
// on a CUDA tensor; the Tensor operations then hand NCCL device pointers:
// - libnccl.so.2 is opened then (dlopen), not linked, as cuBLAS is
//   (framework/backend/cuda/context.cpp): a CPU-only run of a CUDA build
//   never loads it;
// - each rank uses its tensors' GPU, cuda::device() (parallel::init gives
//   rank r of a host GPU r % device count); rank 0's ncclGetUniqueId
//   goes to the others by an MPI broadcast, then ncclCommInitRank;
// - operations run on a communication stream of their own, ordered after the
//   compute stream's work by an event; a blocking one makes the compute
//   stream wait for it and the host wait until it is done, an async one
//   (allreduce_async) does both in Work::wait(), so later compute overlaps it;
// - Avg is ncclAvg; send/recv are ncclSend/ncclRecv (NCCL has no tags: a
//   pair's messages match in order, and a recv cannot check the length);
// - while the host waits it polls ncclCommGetAsyncError: an NCCL error, or a
//   wait longer than MINIDL_TIMEOUT seconds, prints what failed, aborts the
//   NCCL communicator (ncclCommAbort) and ends the job (MPI_Abort), never
//   hangs;
// - every NCCL call is checked: a failure throws minidl::Error with
//   file:line, the call and ncclGetErrorString.
// Where NCCL cannot run, open_nccl returns null on every rank (they agree by
// an allgather) and says why: libnccl.so.2 missing, no CUDA device visible,
// or two ranks of one host on one GPU (NCCL refuses duplicate devices); the
// caller then stages through host memory and says so once.
#pragma once
#include <memory>
#include <string>

#include "parallel/communicator.h"

namespace minidl::parallel::backend {

// Collective over `host` (every rank calls it; MPI underneath). Null, with
// *why set, when NCCL cannot run on some rank.
std::unique_ptr<Communicator> open_nccl(Communicator& host, std::string* why);

}  // namespace minidl::parallel::backend
