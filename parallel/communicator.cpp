#include "parallel/communicator.h"

#include <algorithm>
#include <string>

namespace minidl::parallel {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Max: return "max";
    case ReduceOp::Min: return "min";
    case ReduceOp::Avg: return "avg";
  }
  return "?";
}

const char* elem_type_name(ElemType t) {
  switch (t) {
    case ElemType::Float32: return "float32";
    case ElemType::Float64: return "float64";
    case ElemType::Int32: return "int32";
    case ElemType::Int64: return "int64";
  }
  return "?";
}

size_t elem_type_size(ElemType t) {
  switch (t) {
    case ElemType::Float32: case ElemType::Int32: return 4;
    case ElemType::Float64: case ElemType::Int64: return 8;
  }
  return 0;
}

// ---- Tensor conveniences ----

static void check_cpu(const Tensor& t, const char* op) {
  MINIDL_CHECK(t.defined(), op, ": undefined tensor");
  MINIDL_CHECK(t.device() == Device::CPU, op, ": tensor ", t.shape(),
               " is not on the CPU (this backend moves CPU memory only)");
}

static ElemType reducible_type(const Tensor& t, const char* op) {
  check_cpu(t, op);
  switch (t.dtype()) {
    case kFloat32: return ElemType::Float32;
    case kInt32: return ElemType::Int32;
    case kInt64: return ElemType::Int64;
    case kFloat16: break;
  }
  throw Error(cat(op, ": tensor ", t.shape(), " is float16; a float16 reduction overflows and "
                  "loses precision, so cast it to float32 first (DistributedGradReducer does)"));
}

void Communicator::allreduce(const Tensor& t, ReduceOp op) {
  allreduce(t.raw_data(), t.numel(), reducible_type(t, "allreduce"), op);
}

namespace {
// Keeps the tensor whose storage the communication writes alive until it ends.
class TensorWork final : public Work {
 public:
  TensorWork(std::unique_ptr<Work> inner, Tensor t) : inner_(std::move(inner)), t_(std::move(t)) {}
  ~TensorWork() override { inner_.reset(); }  // waits before t_ is released
  void wait() override { inner_->wait(); }
  bool test() override { return inner_->test(); }

 private:
  std::unique_ptr<Work> inner_;
  Tensor t_;
};
}  // namespace

std::unique_ptr<Work> Communicator::allreduce_async(const Tensor& t, ReduceOp op) {
  auto inner = allreduce_async(t.raw_data(), t.numel(), reducible_type(t, "allreduce_async"), op);
  return std::make_unique<TensorWork>(std::move(inner), t);
}

void Communicator::broadcast(const Tensor& t, int root) {
  check_cpu(t, "broadcast");
  broadcast(t.raw_data(), t.nbytes(), root);
}

Tensor Communicator::allgather(const Tensor& t) {
  check_cpu(t, "allgather");
  Shape shape = t.shape();
  shape.insert(shape.begin(), size());
  Tensor out = Tensor::empty(shape, t.dtype());
  allgather(t.raw_data(), out.raw_data(), t.nbytes());
  return out;
}

void Communicator::send(const Tensor& t, int dst, int tag) {
  check_cpu(t, "send");
  send(t.raw_data(), t.nbytes(), dst, tag);
}

void Communicator::recv(const Tensor& t, int src, int tag) {
  check_cpu(t, "recv");
  recv(t.raw_data(), t.nbytes(), src, tag);
}

// ---- groups ----

namespace detail {

void check_reduce(ElemType type, ReduceOp op, const char* call) {
  MINIDL_CHECK(op != ReduceOp::Avg || type == ElemType::Float32 || type == ElemType::Float64,
               call, ": avg needs float32 or float64 elements, got ", elem_type_name(type),
               " (sum them, then divide)");
}

static std::string list(const std::vector<int>& ranks) {
  std::string s = "[";
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s + "]";
}

void check_group_ranks(const std::vector<int>& ranks, int size) {
  MINIDL_CHECK(!ranks.empty(), "new_group: expected at least one rank, got []");
  for (int r : ranks)
    MINIDL_CHECK(r >= 0 && r < size, "new_group: rank ", r, " in ", list(ranks),
                 " is out of range for a communicator of ", size, " ranks");
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  auto dup = std::adjacent_find(sorted.begin(), sorted.end());
  MINIDL_CHECK(dup == sorted.end(), "new_group: rank ", dup == sorted.end() ? 0 : *dup,
               " appears twice in ", list(ranks));
}

namespace {
class NonMember final : public Communicator {
 public:
  NonMember(std::vector<int> ranks, int parent_rank)
      : ranks_(std::move(ranks)), parent_rank_(parent_rank) {}
  int rank() const override { return -1; }
  int size() const override { return static_cast<int>(ranks_.size()); }
  const char* backend() const override { return "non-member"; }
  void allreduce(void*, size_t, ElemType, ReduceOp) override { fail("allreduce"); }
  std::unique_ptr<Work> allreduce_async(void*, size_t, ElemType, ReduceOp) override {
    fail("allreduce_async");
  }
  void broadcast(void*, size_t, int) override { fail("broadcast"); }
  void allgather(const void*, void*, size_t) override { fail("allgather"); }
  void send(const void*, size_t, int, int) override { fail("send"); }
  void recv(void*, size_t, int, int) override { fail("recv"); }
  void barrier() override { fail("barrier"); }
  std::shared_ptr<Communicator> split(const std::vector<int>&) override { fail("split"); }
  void abort(int) noexcept override {}

 private:
  [[noreturn]] void fail(const char* op) const {
    throw Error(cat(op, ": rank ", parent_rank_, " is not a member of the group of ranks ",
                    list(ranks_), " (from new_group); only its members may use it"));
  }
  std::vector<int> ranks_;
  int parent_rank_;
};
}  // namespace

std::shared_ptr<Communicator> non_member(std::vector<int> ranks, int parent_rank) {
  return std::make_shared<NonMember>(std::move(ranks), parent_rank);
}

}  // namespace detail
std::string Communicator::broadcast(std::string text, int root) {
  uint64_t n = text.size();
  broadcast(&n, sizeof n, root);
  text.resize(n);
  if (n) broadcast(text.data(), n, root);
  return text;
}

void Communicator::check_same(const std::string& who, const Facts& facts) {
  if (size() == 1) return;
  std::string mine;  // "name\0value\0" for each fact
  for (const auto& [name, value] : facts) mine += name + '\0' + value + '\0';
  const std::string root = broadcast(mine, 0);
  int64_t first = mine == root ? size() : rank();  // the first rank that differs
  allreduce(&first, 1, ReduceOp::Min);
  if (first == size()) return;
  std::string what;  // that rank's first differing fact, told to every rank
  if (rank() == first) {
    std::vector<std::string> fields;  // rank 0's names and values, alternating
    for (size_t at = 0; at < root.size();) {
      const size_t end = root.find('\0', at);
      fields.push_back(root.substr(at, end - at));
      at = end + 1;
    }
    for (size_t i = 0; i < facts.size() && what.empty(); ++i) {
      const auto& [name, value] = facts[i];
      if (2 * i + 1 >= fields.size())
        what = cat("rank ", rank(), " has ", name, " ", value, " where rank 0 has none");
      else if (fields[2 * i] != name || fields[2 * i + 1] != value)
        what = cat("rank ", rank(), " has ", name, " ", value, " where rank 0 has ",
                   fields[2 * i] == name ? "" : fields[2 * i] + " ", fields[2 * i + 1]);
    }
    if (what.empty())
      what = cat("rank ", rank(), " has ", facts.size(), " facts where rank 0 has ", fields.size() / 2);
  }
  what = broadcast(what, static_cast<int>(first));
  throw Error(cat(who, ": ", what, "; every rank must agree, or they wait for each other forever"));
}

}  // namespace minidl::parallel
