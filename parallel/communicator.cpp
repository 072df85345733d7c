#include "parallel/communicator.h"

#include <algorithm>
#include <string>
#include <utility>

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

Communicator* Communicator::on_device(Device d, bool) { return d == Device::CPU ? this : nullptr; }

namespace {

ElemType reducible_type(const Tensor& t, const char* op) {
  MINIDL_CHECK(t.defined(), op, ": undefined tensor");
  switch (t.dtype()) {
    case kFloat32: return ElemType::Float32;
    case kInt32: return ElemType::Int32;
    case kInt64: return ElemType::Int64;
    case kFloat16: break;
  }
  throw Error(cat(op, ": tensor ", t.shape(), " is float16; a float16 reduction overflows and "
                  "loses precision, so cast it to float32 first (DistributedGradReducer does)"));
}

// What carries t's bytes: the communicator that moves its device's memory
// and t itself, or (none) `c` and a host buffer pinned for t's device,
// holding t's values when `fill`.
struct Carrier {
  Communicator* comm;
  Tensor buffer;
  // A result of `shape` on the carrier's side: t's device, or pinned host memory.
  Tensor output(const Shape& shape, const Tensor& t) const {
    return buffer.same(t) ? Tensor::empty(shape, t.dtype(), t.device())
                          : Tensor::empty_pinned(shape, t.dtype(), t.device());
  }
};
Carrier carrier(Communicator& c, const Tensor& t, const char* op, bool open, bool fill) {
  MINIDL_CHECK(t.defined(), op, ": undefined tensor");
  Communicator* direct = c.on_device(t.device(), open);
  if (direct && t.is_contiguous()) return {direct, t};
  // staged: a view's elements row-major on its device, or a host copy
  Tensor staged = direct ? Tensor::empty(t.shape(), t.dtype(), t.device())
                         : Tensor::empty_pinned(t.shape(), t.dtype(), t.device());
  if (fill) staged.copy_(t);
  return {direct ? direct : &c, staged};
}

// Keeps the tensor whose storage the communication writes alive until it
// ends, and copies a staged result back into it then.
class TensorWork final : public Work {
 public:
  TensorWork(std::unique_ptr<Work> inner, Tensor t, Tensor staged)
      : inner_(std::move(inner)), t_(std::move(t)), staged_(std::move(staged)) {}
  ~TensorWork() override {
    inner_.reset();  // waits before t_ is released
    try {
      finish();
    } catch (const std::exception&) {  // a failed copy has nowhere to go from a destructor
    }
  }
  void wait() override {
    inner_->wait();
    finish();
  }
  bool test() override {
    if (!inner_->test()) return false;
    finish();
    return true;
  }

 private:
  void finish() {
    if (!staged_.defined()) return;
    const Tensor from = std::exchange(staged_, Tensor());
    t_.copy_(from);
  }
  std::unique_ptr<Work> inner_;
  Tensor t_, staged_;
};

}  // namespace

void Communicator::allreduce(const Tensor& t, ReduceOp op) {
  const ElemType type = reducible_type(t, "allreduce");
  if (t.device() != Device::CPU && size() == 1) return detail::check_reduce(type, op, "allreduce");
  Carrier c = carrier(*this, t, "allreduce", /*open=*/true, /*fill=*/true);
  c.comm->allreduce(c.buffer.raw_data_ptr(), t.numel(), type, op);
  if (!c.buffer.same(t)) Tensor(t).copy_(c.buffer);
}

std::unique_ptr<Work> Communicator::allreduce_async(const Tensor& t, ReduceOp op) {
  const ElemType type = reducible_type(t, "allreduce_async");
  Carrier c = carrier(*this, t, "allreduce_async", /*open=*/true, /*fill=*/true);
  auto inner = c.comm->allreduce_async(c.buffer.raw_data_ptr(), t.numel(), type, op);
  return std::make_unique<TensorWork>(std::move(inner), t,
                                      c.buffer.same(t) ? Tensor() : c.buffer);
}

void Communicator::broadcast(const Tensor& t, int root) {
  if (t.defined() && t.device() != Device::CPU && size() == 1) return broadcast(nullptr, 0, root);
  Carrier c = carrier(*this, t, "broadcast", /*open=*/true, /*fill=*/rank() == root);
  c.comm->broadcast(c.buffer.raw_data_ptr(), t.nbytes(), root);
  if (!c.buffer.same(t)) Tensor(t).copy_(c.buffer);
}

Tensor Communicator::allgather(const Tensor& t) {
  Carrier c = carrier(*this, t, "allgather", /*open=*/true, /*fill=*/true);
  Shape shape = t.shape();
  shape.insert(shape.begin(), size());
  Tensor out = c.output(shape, t);
  c.comm->allgather(c.buffer.raw_data_ptr(), out.raw_data_ptr(), t.nbytes());
  return out.device() == t.device() ? out : out.to(t.device());
}

Tensor Communicator::reduce_scatter(const Tensor& t, ReduceOp op) {
  const ElemType type = reducible_type(t, "reduce_scatter");
  MINIDL_CHECK(t.dim() >= 1 && t.size(0) == size(), "reduce_scatter: expected a tensor [", size(),
               ", ...] (a block for each of the ", size(), " rank(s)), got ", t.shape());
  Carrier c = carrier(*this, t, "reduce_scatter", /*open=*/true, /*fill=*/true);
  const Shape shape(t.shape().begin() + 1, t.shape().end());
  Tensor out = c.output(shape, t);
  c.comm->reduce_scatter(c.buffer.raw_data_ptr(), out.raw_data_ptr(), out.numel(), type, op);
  return out.device() == t.device() ? out : out.to(t.device());
}

void Communicator::send(const Tensor& t, int dst, int tag) {
  Carrier c = carrier(*this, t, "send", /*open=*/false, /*fill=*/true);
  c.comm->send(c.buffer.raw_data_ptr(), t.nbytes(), dst, tag);
}

void Communicator::recv(const Tensor& t, int src, int tag) {
  Carrier c = carrier(*this, t, "recv", /*open=*/false, /*fill=*/false);
  c.comm->recv(c.buffer.raw_data_ptr(), t.nbytes(), src, tag);
  if (!c.buffer.same(t)) Tensor(t).copy_(c.buffer);
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
  void reduce_scatter(const void*, void*, size_t, ElemType, ReduceOp) override {
    fail("reduce_scatter");
  }
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
