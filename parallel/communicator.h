// Communicator: the collective and point-to-point operations every parallel
// wrapper is written against. Backends live beneath it in parallel/backend/:
// `local` (a world of one, no MPI at all), `mpi` (Open MPI) and, in a CUDA
// build, `nccl` (the device side of an MPI communicator, see on_device()).
// Nothing outside parallel/backend/ includes <mpi.h>.
//
// Conventions for every operation:
// - Collectives (allreduce, broadcast, allgather, reduce_scatter, barrier,
//   split) are called by every member of the communicator, in the same order,
//   with the same counts (and root). A mismatch is undefined behaviour in MPI
//   (usually a hang or a truncation error), which the collective timeout
//   (backend/timeout.h) turns into an error naming the ranks.
// - Raw buffers are contiguous CPU memory (a communicator from on_device(d):
//   d's memory). Raw-buffer overloads take an element count and an ElemType
//   (float32, float64, int32, int64); data-movement operations take a byte
//   count. Tensor overloads work in place on the tensor's storage (a Tensor
//   is a handle, so they take const Tensor&), on any device: a tensor on a
//   device goes through on_device()'s communicator where the backend has one
//   (NCCL for CUDA), else through host staging: copied into a pinned host
//   buffer, communicated, copied back (announced once, see on_device()).
// - Errors throw minidl::Error naming the operation, the failing call,
//   file:line and the rank (see MINIDL_MPI_CHECK in backend/mpi.cpp).
// - Calls come from one thread at a time (MPI_THREAD_SERIALIZED).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "framework/tensor.h"

namespace minidl::parallel {

// Avg: the sum divided by size(), for float32 and float64 only (NCCL's ncclAvg).
enum class ReduceOp { Sum, Max, Min, Avg };
const char* reduce_op_name(ReduceOp op);  // "sum", "max", "min", "avg"

// Element types of raw reduction buffers (float64 exists only here: Tensor has none).
enum class ElemType { Float32, Float64, Int32, Int64 };
const char* elem_type_name(ElemType t);  // "float32", ...
size_t elem_type_size(ElemType t);

template <class T> struct elem_type_of;
template <> struct elem_type_of<float> { static constexpr ElemType value = ElemType::Float32; };
template <> struct elem_type_of<double> { static constexpr ElemType value = ElemType::Float64; };
template <> struct elem_type_of<int32_t> { static constexpr ElemType value = ElemType::Int32; };
template <> struct elem_type_of<int64_t> { static constexpr ElemType value = ElemType::Int64; };

// A communication in flight (from allreduce_async). The buffer must stay alive
// and untouched until wait() returns or test() returns true; the Tensor
// overload keeps its tensor alive itself. Destroying an unfinished Work waits
// for it. MPI progresses a request only inside MPI calls, so calling test()
// now and then (e.g. from autograd's grad-ready hooks) helps it along.
class Work {
 public:
  virtual ~Work() = default;
  virtual void wait() = 0;  // blocks until done; throws minidl::Error on failure
  virtual bool test() = 0;  // true once done (wait() then returns at once)
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  // This process's rank in [0, size()); -1 on a rank that is not a member
  // of a group made by new_group (every operation on it throws).
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const char* backend() const = 0;  // "local", "mpi", ...

  // ---- raw buffers ----
  // data[i] = op over ranks of data[i], for i < count, in place.
  virtual void allreduce(void* data, size_t count, ElemType type, ReduceOp op) = 0;
  // The same, non-blocking: returns at once; the result is in data after wait().
  // A data-parallel wrapper starts one per gradient bucket from grad-ready
  // hooks while backward still runs, then waits for all before the update.
  virtual std::unique_ptr<Work> allreduce_async(void* data, size_t count, ElemType type,
                                                ReduceOp op) = 0;
  // Copies root's nbytes at data to every rank's data.
  virtual void broadcast(void* data, size_t nbytes, int root) = 0;
  // recv[r * nbytes, (r + 1) * nbytes) = rank r's send[0, nbytes); recv holds size() * nbytes.
  virtual void allgather(const void* send, void* recv, size_t nbytes) = 0;
  // recv[i] = op over ranks q of q's send[rank() * count + i], for i < count:
  // send holds size() * count elements, and each rank gets its block reduced.
  virtual void reduce_scatter(const void* send, void* recv, size_t count, ElemType type,
                              ReduceOp op) = 0;
  // Blocking point-to-point; a message matches on (source, tag); tag >= 0.
  // recv throws when the message's length differs from nbytes.
  virtual void send(const void* data, size_t nbytes, int dst, int tag) = 0;
  virtual void recv(void* data, size_t nbytes, int src, int tag) = 0;
  virtual void barrier() = 0;
  // Collective over this communicator: a sub-communicator of `ranks` (ranks
  // of this communicator, no duplicates), whose rank i is ranks[i]. Non-members
  // get an object whose rank() is -1 and whose operations throw.
  virtual std::shared_ptr<Communicator> split(const std::vector<int>& ranks) = 0;
  // Ends the whole job at once (MPI_Abort); used by the std::terminate handler.
  virtual void abort(int exit_code) noexcept = 0;

  // ---- device memory ----
  // The communicator over the same ranks whose raw operations take pointers
  // into `d`'s memory: this one for the CPU; for another device the
  // backend's (the MPI backend's is NCCL in a CUDA build, where NCCL can run),
  // or null: Tensor operations on `d` then stage through host memory, and the
  // backend says so once on world rank 0's stderr, e.g.
  //   minidl: MPI backend: CUDA tensors are staged through host memory (no NCCL in this build)
  // `open`: the caller is a collective (every rank of this communicator
  // calls it now), so the backend may set its device side up (itself a
  // collective); a point-to-point caller passes false and gets only what is
  // already set up.
  virtual Communicator* on_device(Device d, bool open);

  // ---- typed and Tensor conveniences (built on the raw operations) ----
  template <class T>
  void allreduce(T* data, size_t count, ReduceOp op = ReduceOp::Sum) {
    allreduce(static_cast<void*>(data), count, elem_type_of<T>::value, op);
  }
  // In place on t (float32, int32 or int64; float16 throws: cast to float32 first).
  void allreduce(const Tensor& t, ReduceOp op = ReduceOp::Sum);
  std::unique_ptr<Work> allreduce_async(const Tensor& t, ReduceOp op = ReduceOp::Sum);
  // In place: every rank's t becomes root's t (any dtype; same shape on all ranks).
  void broadcast(const Tensor& t, int root);
  // Root's string on every rank (its length goes first, so lengths may differ).
  std::string broadcast(std::string text, int root);
  // Collective: checks that every rank holds the same `facts` (name, value),
  // e.g. {{"batch size", "64"}, {"steps per epoch", "125"}}, before the ranks
  // rely on agreeing. On a difference EVERY rank throws the same minidl::Error
  // naming the first rank that differs from rank 0 and both values:
  //   "<who>: rank 1 has batch size 32 where rank 0 has 64; ..."
  using Facts = std::vector<std::pair<std::string, std::string>>;
  void check_same(const std::string& who, const Facts& facts);
  // Returns [size(), *t.shape()]: row r is rank r's t (any dtype; same shape on all ranks).
  Tensor allgather(const Tensor& t);
  // t [size(), *rest] -> [*rest]: op over ranks of their t[rank()] (dtypes as
  // allreduce's; same shape on all ranks). allgather's inverse in shape.
  Tensor reduce_scatter(const Tensor& t, ReduceOp op = ReduceOp::Sum);
  void send(const Tensor& t, int dst, int tag = 0);
  void recv(const Tensor& t, int src, int tag = 0);  // into t; shape and dtype as sent
};

namespace detail {
// Throws unless `op` applies to `type` (Avg needs a float type).
void check_reduce(ElemType type, ReduceOp op, const char* call);
// Throws unless `ranks` is a non-empty list of distinct ranks in [0, size).
void check_group_ranks(const std::vector<int>& ranks, int size);
// The object split() hands to a rank outside `ranks`: rank() is -1, size() is
// ranks.size(), and every operation throws an Error naming this rank and the group.
std::shared_ptr<Communicator> non_member(std::vector<int> ranks, int parent_rank);
}  // namespace detail

}  // namespace minidl::parallel
