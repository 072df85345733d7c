#include "parallel/backend/local.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace minidl::parallel::backend {

static void check_self(int r, const char* op, const char* what) {
  MINIDL_CHECK(r == 0, op, ": ", what, " ", r, " does not exist in a world of one process ",
               "(local backend; start the program under mpirun for more ranks)");
}

void LocalCommunicator::allreduce(void* data, size_t count, ElemType type, ReduceOp op) {
  detail::check_reduce(type, op, "allreduce");
  MINIDL_CHECK(data || count == 0, "allreduce: null buffer for ", count, " elements");
}

namespace {
struct DoneWork final : Work {
  void wait() override {}
  bool test() override { return true; }
};
}  // namespace

std::unique_ptr<Work> LocalCommunicator::allreduce_async(void* data, size_t count, ElemType type,
                                                         ReduceOp op) {
  allreduce(data, count, type, op);
  return std::make_unique<DoneWork>();
}

void LocalCommunicator::broadcast(void*, size_t, int root) { check_self(root, "broadcast", "root"); }

void LocalCommunicator::allgather(const void* send, void* recv, size_t nbytes) {
  if (send != recv && nbytes) std::memmove(recv, send, nbytes);
}

void LocalCommunicator::reduce_scatter(const void* send, void* recv, size_t count, ElemType type,
                                       ReduceOp op) {
  detail::check_reduce(type, op, "reduce_scatter");
  allgather(send, recv, count * elem_type_size(type));  // a world of one: a copy
}

void LocalCommunicator::send(const void* data, size_t nbytes, int dst, int tag) {
  check_self(dst, "send", "destination rank");
  MINIDL_CHECK(tag >= 0, "send: tag must be >= 0, got ", tag);
  const char* p = static_cast<const char*>(data);
  mailbox_.emplace(tag, std::vector<char>(p, p + nbytes));
}

void LocalCommunicator::recv(void* data, size_t nbytes, int src, int tag) {
  check_self(src, "recv", "source rank");
  auto it = mailbox_.lower_bound(tag);  // the oldest message with this tag
  MINIDL_CHECK(it != mailbox_.end() && it->first == tag, "recv: no message with tag ", tag,
               " was sent to rank 0; in a world of one this recv would wait forever");
  MINIDL_CHECK(it->second.size() == nbytes, "recv: expected ", nbytes, " bytes from rank 0 (tag ",
               tag, "), got a message of ", it->second.size(), " bytes");
  if (nbytes) std::memcpy(data, it->second.data(), nbytes);
  mailbox_.erase(it);
}

std::shared_ptr<Communicator> LocalCommunicator::split(const std::vector<int>& ranks) {
  detail::check_group_ranks(ranks, 1);
  return std::make_shared<LocalCommunicator>();
}

void LocalCommunicator::abort(int exit_code) noexcept {
  std::fflush(nullptr);
  std::_Exit(exit_code);
}

}  // namespace minidl::parallel::backend
