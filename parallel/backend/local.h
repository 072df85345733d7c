// The local backend: a world of one process, no MPI. allreduce leaves the
// buffer as it is, broadcast and barrier do nothing, allgather copies, and a
// send to oneself is kept until the matching recv (a recv with nothing sent
// throws instead of waiting forever). Every rank argument must be 0.
#pragma once
#include <map>
#include <memory>
#include <vector>

#include "parallel/communicator.h"

namespace minidl::parallel::backend {

class LocalCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  const char* backend() const override { return "local"; }
  void allreduce(void* data, size_t count, ElemType type, ReduceOp op) override;
  std::unique_ptr<Work> allreduce_async(void* data, size_t count, ElemType type,
                                        ReduceOp op) override;
  void broadcast(void* data, size_t nbytes, int root) override;
  void allgather(const void* send, void* recv, size_t nbytes) override;
  void reduce_scatter(const void* send, void* recv, size_t count, ElemType type,
                      ReduceOp op) override;
  void send(const void* data, size_t nbytes, int dst, int tag) override;
  void recv(void* data, size_t nbytes, int src, int tag) override;
  void barrier() override {}
  std::shared_ptr<Communicator> split(const std::vector<int>& ranks) override;
  void abort(int exit_code) noexcept override;
  using Communicator::allgather;  // the Tensor overloads
  using Communicator::allreduce;
  using Communicator::allreduce_async;
  using Communicator::broadcast;
  using Communicator::reduce_scatter;
  using Communicator::recv;
  using Communicator::send;

 private:
  std::multimap<int, std::vector<char>> mailbox_;  // tag -> messages sent to self, in order
};

}  // namespace minidl::parallel::backend
