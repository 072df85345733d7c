// NCCL communicator (see nccl.h). COMPILED, NOT YET RUN ON A GPU.
#include "parallel/backend/nccl.h"

#include <nccl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "framework/backend/cuda/runtime.h"
#include "framework/cuda.h"
#include "parallel/backend/mpi.h"
#include "parallel/backend/timeout.h"

namespace minidl::parallel::backend {
namespace {

// The entries minidl calls, from libnccl.so.<major> opened at first use.
struct Nccl {
  decltype(&ncclGetVersion) get_version;
  decltype(&ncclGetUniqueId) get_unique_id;
  decltype(&ncclCommInitRank) comm_init_rank;
  decltype(&ncclCommDestroy) comm_destroy;
  decltype(&ncclCommAbort) comm_abort;
  decltype(&ncclCommGetAsyncError) comm_get_async_error;
  decltype(&ncclGetErrorString) get_error_string;
  decltype(&ncclAllReduce) all_reduce;
  decltype(&ncclBroadcast) broadcast;
  decltype(&ncclAllGather) all_gather;
  decltype(&ncclReduceScatter) reduce_scatter;
  decltype(&ncclSend) send;
  decltype(&ncclRecv) recv;
  decltype(&ncclGroupStart) group_start;
  decltype(&ncclGroupEnd) group_end;
};

// The table, or null with *why set when the library cannot be opened.
const Nccl* nccl(std::string* why = nullptr) {
  static std::string failure;
  static const Nccl* table = []() -> const Nccl* {
    cuda::Library lib("libnccl.so." + std::to_string(NCCL_MAJOR));
    static Nccl t{};
    lib.get(t.get_version, "ncclGetVersion");
    lib.get(t.get_unique_id, "ncclGetUniqueId");
    lib.get(t.comm_init_rank, "ncclCommInitRank");
    lib.get(t.comm_destroy, "ncclCommDestroy");
    lib.get(t.comm_abort, "ncclCommAbort");
    lib.get(t.comm_get_async_error, "ncclCommGetAsyncError");
    lib.get(t.get_error_string, "ncclGetErrorString");
    lib.get(t.all_reduce, "ncclAllReduce");
    lib.get(t.broadcast, "ncclBroadcast");
    lib.get(t.all_gather, "ncclAllGather");
    lib.get(t.reduce_scatter, "ncclReduceScatter");
    lib.get(t.send, "ncclSend");
    lib.get(t.recv, "ncclRecv");
    lib.get(t.group_start, "ncclGroupStart");
    lib.get(t.group_end, "ncclGroupEnd");
    failure = lib.failure();
    return failure.empty() ? &t : nullptr;
  }();
  if (!table && why) *why = failure;
  return table;
}

// "parallel/backend/nccl.cpp" from the path the compiler was given
const char* short_path(const char* file) {
  const char* p = std::strstr(file, "parallel/backend/");
  return p ? p : file;
}

void check(ncclResult_t r, const char* call, const char* file, int line) {
  if (r == ncclSuccess) return;
  throw Error(cat(short_path(file), ":", line, ": ", call, ": NCCL error ", static_cast<int>(r),
                  " (", nccl()->get_error_string(r), ")"));
}

}  // namespace
}  // namespace minidl::parallel::backend

#define NCCL_CHECK(call) ::minidl::parallel::backend::check((call), #call, __FILE__, __LINE__)

namespace minidl::parallel::backend {
namespace {

ncclDataType_t nccl_type(ElemType t) {
  switch (t) {
    case ElemType::Float32:
      return ncclFloat32;
    case ElemType::Float64:
      return ncclFloat64;
    case ElemType::Int32:
      return ncclInt32;
    case ElemType::Int64:
      return ncclInt64;
  }
  return ncclFloat32;
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return ncclSum;
    case ReduceOp::Max:
      return ncclMax;
    case ReduceOp::Min:
      return ncclMin;
    case ReduceOp::Avg:
      return ncclAvg;
  }
  return ncclSum;
}

// An event recorded on a stream when an operation was queued; polled by the host.
struct Event {
  cudaEvent_t e = nullptr;
  Event() { CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming)); }
  ~Event() { CUDA_WARN(cudaEventDestroy(e)); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
};

class NcclCommunicator;

class NcclWork final : public Work {
 public:
  NcclWork(NcclCommunicator& c, const char* what) : comm_(c), what_(what) {}
  ~NcclWork() override;
  void wait() override;
  bool test() override;
  Event done;

 private:
  NcclCommunicator& comm_;
  const char* what_;
  bool finished_ = false;
};

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(Communicator& host, ncclComm_t comm, int device)
      : host_(host), comm_(comm), device_(device) {
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  ~NcclCommunicator() override {
    // parallel::finalize runs from an atexit handler registered before the
    // CUDA runtime's own, so at exit the runtime may be gone already: then
    // the communicator is left to the end of the process
    const cudaError_t alive = cudaStreamQuery(stream_);
    (void)cudaGetLastError();
    if (alive == cudaErrorCudartUnloading || alive == cudaErrorContextIsDestroyed) return;
    if (comm_) (void)nccl()->comm_destroy(comm_);
    CUDA_WARN(cudaStreamDestroy(stream_));
  }
  int rank() const override { return host_.rank(); }
  int size() const override { return host_.size(); }
  const char* backend() const override { return "nccl"; }

  void allreduce(void* data, size_t count, ElemType type, ReduceOp op) override {
    detail::check_reduce(type, op, "allreduce");
    blocking("allreduce", [&] {
      NCCL_CHECK(
          nccl()->all_reduce(data, data, count, nccl_type(type), nccl_op(op), comm_, stream_));
    });
  }
  std::unique_ptr<Work> allreduce_async(void* data, size_t count, ElemType type,
                                        ReduceOp op) override {
    detail::check_reduce(type, op, "allreduce_async");
    auto work = std::make_unique<NcclWork>(*this, "allreduce_async");
    queue(
        [&] {
          NCCL_CHECK(
              nccl()->all_reduce(data, data, count, nccl_type(type), nccl_op(op), comm_, stream_));
        },
        work->done);
    return work;
  }
  void broadcast(void* data, size_t nbytes, int root) override {
    blocking("broadcast", [&] {
      NCCL_CHECK(nccl()->broadcast(data, data, nbytes, ncclUint8, root, comm_, stream_));
    });
  }
  void allgather(const void* send, void* recv, size_t nbytes) override {
    blocking("allgather", [&] {
      NCCL_CHECK(nccl()->all_gather(send, recv, nbytes, ncclUint8, comm_, stream_));
    });
  }
  void reduce_scatter(const void* send, void* recv, size_t count, ElemType type,
                      ReduceOp op) override {
    detail::check_reduce(type, op, "reduce_scatter");
    blocking("reduce_scatter", [&] {
      NCCL_CHECK(nccl()->reduce_scatter(send, recv, count, nccl_type(type), nccl_op(op), comm_,
                                        stream_));
    });
  }
  // No tags in NCCL: a pair's messages match in the order they were sent.
  void send(const void* data, size_t nbytes, int dst, int /*tag*/) override {
    blocking("send",
             [&] { NCCL_CHECK(nccl()->send(data, nbytes, ncclUint8, dst, comm_, stream_)); });
  }
  void recv(void* data, size_t nbytes, int src, int /*tag*/) override {
    blocking("recv",
             [&] { NCCL_CHECK(nccl()->recv(data, nbytes, ncclUint8, src, comm_, stream_)); });
  }
  void barrier() override { host_.barrier(); }
  std::shared_ptr<Communicator> split(const std::vector<int>& ranks) override {
    return host_.split(ranks);  // a host communicator; its on_device opens its own NCCL
  }
  void abort(int exit_code) noexcept override {
    (void)nccl()->comm_abort(comm_);
    comm_ = nullptr;
    host_.abort(exit_code);
  }
  Communicator* on_device(Device d, bool open) override {
    return d == Device::CUDA ? this : host_.on_device(d, open);  // host memory: MPI
  }

  // Blocks until `done` has passed, polling NCCL's asynchronous errors; an
  // error or MINIDL_TIMEOUT ends the job (nothing else could wake this rank).
  void wait_for(const Event& done, const char* what) {
    const double limit = collective_timeout();
    const auto start = std::chrono::steady_clock::now();
    for (;;) {
      const cudaError_t e = cudaEventQuery(done.e);
      if (e == cudaSuccess) return;
      if (e != cudaErrorNotReady) CUDA_CHECK(e);
      (void)cudaGetLastError();  // not ready is not an error
      ncclResult_t async = ncclSuccess;
      NCCL_CHECK(nccl()->comm_get_async_error(comm_, &async));
      const double waited =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (async != ncclSuccess && async != ncclInProgress)
        fail(cat(what, " failed: NCCL error ", static_cast<int>(async), " (",
                 nccl()->get_error_string(async), ")"));
      if (limit > 0 && waited > limit)
        fail(cat(what, " has waited ", waited,
                 " s for the other ranks, longer than MINIDL_TIMEOUT=", limit, " s"));
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
  cudaStream_t compute() const { return cuda::stream(); }

 private:
  // Queues `op` on the communication stream after the compute stream's work
  // so far, and records `done` after it.
  template <class F>
  void queue(F&& op, const Event& done) {
    Event ready;
    CUDA_CHECK(cudaEventRecord(ready.e, compute()));
    CUDA_CHECK(cudaStreamWaitEvent(stream_, ready.e, 0));
    op();
    CUDA_CHECK(cudaEventRecord(done.e, stream_));
  }
  template <class F>
  void blocking(const char* what, F&& op) {
    Event done;
    queue(op, done);
    CUDA_CHECK(cudaStreamWaitEvent(compute(), done.e, 0));
    wait_for(done, what);
  }
  [[noreturn]] void fail(const std::string& message) {
    std::fprintf(stderr, "minidl: rank %d (NCCL, GPU %d): %s. Ending the job.\n", host_.rank(),
                 device_, message.c_str());
    std::fflush(stderr);
    (void)nccl()->comm_abort(comm_);
    comm_ = nullptr;
    mpi_abort(1);
  }

  Communicator& host_;
  ncclComm_t comm_;
  int device_;
  cudaStream_t stream_ = nullptr;
};

NcclWork::~NcclWork() {
  try {
    wait();
  } catch (const std::exception& e) {  // nowhere to go from a destructor
    std::fprintf(stderr, "minidl: warning: %s: %s\n", what_, e.what());
  }
}
void NcclWork::wait() {
  if (finished_) return;
  CUDA_CHECK(cudaStreamWaitEvent(comm_.compute(), done.e, 0));
  comm_.wait_for(done, what_);
  finished_ = true;
}
bool NcclWork::test() {
  if (finished_) return true;
  const cudaError_t e = cudaEventQuery(done.e);
  if (e == cudaErrorNotReady) {
    (void)cudaGetLastError();
    return false;
  }
  wait();  // done (or failed: wait reports it)
  return true;
}

uint64_t host_id() {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (const char* p = name; *p; ++p) h = (h ^ static_cast<unsigned char>(*p)) * 1099511628211ull;
  return h;
}

}  // namespace

std::unique_ptr<Communicator> open_nccl(Communicator& host, std::string* why) {
  // 1. What each rank can do; 2. agreement (an allgather); 3. the NCCL communicator.
  struct Fact {
    uint64_t host = 0;
    int32_t device = -1;
    int32_t problem = 0;  // 0: fine; 1: no libnccl; 2: no CUDA device
  } mine;
  mine.host = host_id();
  std::string my_failure;
  if (!nccl(&my_failure)) {
    mine.problem = 1;
  } else if (minidl::cuda::device_count() == 0) {
    mine.problem = 2;
  } else {
    mine.device = minidl::cuda::device();  // the GPU this rank's tensors are on
  }
  std::vector<Fact> all(host.size());
  host.allgather(&mine, all.data(), sizeof(Fact));
  for (int r = 0; r < host.size(); ++r) {
    if (all[r].problem == 1) {
      *why = r == host.rank() ? my_failure : cat("rank ", r, " cannot open NCCL's library");
      return nullptr;
    }
    if (all[r].problem == 2) {
      *why = cat("rank ", r, " sees no CUDA device");
      return nullptr;
    }
    for (int q = 0; q < r; ++q)
      if (all[q].host == all[r].host && all[q].device == all[r].device) {
        *why = cat("NCCL cannot run ranks ", q, " and ", r, " on one GPU (", all[r].device, ")");
        return nullptr;
      }
  }
  CUDA_CHECK(cudaSetDevice(mine.device));
  ncclUniqueId id;
  if (host.rank() == 0) NCCL_CHECK(nccl()->get_unique_id(&id));
  host.broadcast(&id, sizeof id, 0);
  ncclComm_t comm = nullptr;
  NCCL_CHECK(nccl()->comm_init_rank(&comm, host.size(), id, host.rank()));
  return std::make_unique<NcclCommunicator>(host, comm, mine.device);
}

}  // namespace minidl::parallel::backend
