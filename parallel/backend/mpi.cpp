#include "parallel/backend/mpi.h"

#include <bit>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <utility>

#include "parallel/backend/mpi_check.h"
#include "parallel/backend/timeout.h"
#ifdef MINIDL_NCCL
#include "parallel/backend/nccl.h"
#endif

namespace minidl::parallel::backend {

namespace {
int g_world_rank = -1;       // for error messages
bool g_we_started = false;   // mpi_init called MPI_Init_thread (so mpi_finalize may finalise)

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  return (*end == '\0' && x >= 0 && x <= INT_MAX) ? static_cast<int>(x) : fallback;
}

int world_rank_for_errors() {
  return g_world_rank >= 0 ? g_world_rank : env_int("OMPI_COMM_WORLD_RANK", -1);
}

// Destructors cannot throw: a failed MPI call there is reported, not raised.
void warn_if_failed(int code, const char* call) noexcept {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = "unknown MPI error";
  int len = 0;
  MPI_Error_string(code, text, &len);
  std::fprintf(stderr, "minidl: warning: rank %d: %s failed in a destructor: %s\n",
               world_rank_for_errors(), call, text);
}
}  // namespace

void throw_mpi_error(int code, const char* call, const char* file, int line) {
  char text[MPI_MAX_ERROR_STRING] = "unknown MPI error";
  int len = 0;
  MPI_Error_string(code, text, &len);
  throw Error(cat("MPI error on rank ", world_rank_for_errors(), ": ", call, " failed at ", file,
                  ":", line, ": ", text, " (code ", code, ")"));
}

bool started_by_mpirun() { return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr; }

bool mpi_active() {  // both calls are valid at any time and cannot fail
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

void mpi_abort(int exit_code) noexcept {
  std::fflush(nullptr);
  if (mpi_active()) MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);
}

namespace {

// A communicator's members as world ranks, and its id for the records: 0 for
// the world, else a hash of the members (the same on every member).
CommScope scope_of(MPI_Comm comm, int size) {
  CommScope s;
  s.members.resize(size);
  std::vector<int> ranks(size);
  for (int i = 0; i < size; ++i) ranks[i] = i;
  MPI_Group group, world;
  MINIDL_MPI_CHECK(MPI_Comm_group(comm, &group));
  MINIDL_MPI_CHECK(MPI_Comm_group(MPI_COMM_WORLD, &world));
  MINIDL_MPI_CHECK(MPI_Group_translate_ranks(group, size, ranks.data(), world, s.members.data()));
  MINIDL_MPI_CHECK(MPI_Group_free(&group));
  MINIDL_MPI_CHECK(MPI_Group_free(&world));
  int same = MPI_UNEQUAL;
  MINIDL_MPI_CHECK(MPI_Comm_compare(comm, MPI_COMM_WORLD, &same));
  if (same == MPI_IDENT) return s;
  s.id = 1469598103934665603ull;  // FNV-1a over the members
  for (int r : s.members) s.id = (s.id ^ static_cast<uint64_t>(r)) * 1099511628211ull;
  s.id |= 1;  // never 0
  return s;
}

MPI_Datatype mpi_type(ElemType t) {
  switch (t) {
    case ElemType::Float32: return MPI_FLOAT;
    case ElemType::Float64: return MPI_DOUBLE;
    case ElemType::Int32: return MPI_INT32_T;
    case ElemType::Int64: return MPI_INT64_T;
  }
  return MPI_DATATYPE_NULL;
}

// inout [len] = (in + inout) / 2: Avg over two ranks inside the reduction.
// An allreduce over two ranks combines each element's two values exactly
// once, whatever algorithm MPI picks, so this gives the mean for the price of
// a sum. Over more ranks an operation is applied several times per element,
// so Avg there is a sum and then one pass dividing by the size.
template <class T>
void mean_of_two(void* in, void* inout, int* len, MPI_Datatype*) {
  const T* a = static_cast<const T*>(in);
  T* b = static_cast<T*>(inout);
  const int n = *len;
#pragma omp simd
  for (int i = 0; i < n; ++i) b[i] = (a[i] + b[i]) * T(0.5);
}
MPI_Op g_mean_of_two[2] = {MPI_OP_NULL, MPI_OP_NULL};  // float, double (made by mpi_init)

MPI_Op mpi_op(ReduceOp op, ElemType type, int size) {
  switch (op) {
    case ReduceOp::Sum: return MPI_SUM;
    case ReduceOp::Max: return MPI_MAX;
    case ReduceOp::Min: return MPI_MIN;
    case ReduceOp::Avg: return size == 2 ? g_mean_of_two[type == ElemType::Float64] : MPI_SUM;
  }
  return MPI_OP_NULL;
}

// data [count] /= size: the rest of Avg after MPI_SUM (see mean_of_two). For a
// power of two it multiplies by 1 / size, which is exact and faster.
template <class T>
void divide(T* x, size_t count, int size) {
  const T d = static_cast<T>(size), inverse = T(1) / d;
  if (std::has_single_bit(static_cast<unsigned>(size))) {
#pragma omp simd
    for (size_t i = 0; i < count; ++i) x[i] *= inverse;
  } else {
#pragma omp simd
    for (size_t i = 0; i < count; ++i) x[i] /= d;
  }
}

// What is left to do after the allreduce for `op` (nothing: an empty function).
std::function<void()> after(void* data, size_t count, ElemType type, ReduceOp op, int size) {
  if (op != ReduceOp::Avg || size <= 2) return {};
  if (type == ElemType::Float64)
    return [=] { divide(static_cast<double*>(data), count, size); };
  return [=] { divide(static_cast<float*>(data), count, size); };
}

size_t elem_bytes(ElemType t) {
  return t == ElemType::Float64 || t == ElemType::Int64 ? 8 : 4;
}

// MPI counts are ints.
int mpi_count(size_t n, const char* op) {
  MINIDL_CHECK(n <= static_cast<size_t>(INT_MAX), op, ": ", n,
               " elements exceed MPI's int count limit; split the buffer");
  return static_cast<int>(n);
}

class MpiWork final : public Work {
 public:
  MPI_Request request = MPI_REQUEST_NULL;
  Call call;                   // for the timeout's message
  std::function<void()> then;  // run once, when the request completes
  ~MpiWork() override {
    if (request != MPI_REQUEST_NULL && mpi_active()) {
      Waiting waiting(call);
      warn_if_failed(MPI_Wait(&request, MPI_STATUS_IGNORE), "MPI_Wait");
    }
    if (request == MPI_REQUEST_NULL) finish();
  }
  void wait() override {
    if (request != MPI_REQUEST_NULL) {
      Waiting waiting(call);
      MINIDL_MPI_CHECK(MPI_Wait(&request, MPI_STATUS_IGNORE));
    }
    finish();
  }
  bool test() override {
    int done = 1;
    if (request != MPI_REQUEST_NULL)
      MINIDL_MPI_CHECK(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
    if (done) finish();
    return done != 0;
  }

 private:
  void finish() {
    if (then) std::exchange(then, nullptr)();
  }
};

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(MPI_Comm comm, bool owned) : comm_(comm), owned_(owned) {
    MINIDL_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
    MINIDL_MPI_CHECK(MPI_Comm_size(comm_, &size_));
    scope_ = scope_of(comm_, size_);
  }
  ~MpiCommunicator() override {
    if (owned_ && mpi_active()) warn_if_failed(MPI_Comm_free(&comm_), "MPI_Comm_free");
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* backend() const override { return "mpi"; }

  void allreduce(void* data, size_t count, ElemType type, ReduceOp op) override {
    detail::check_reduce(type, op, "allreduce");
    int n = mpi_count(count, "allreduce");
    Waiting waiting(collective(Op::Allreduce, count * elem_bytes(type)));
    MINIDL_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, data, n, mpi_type(type),
                                   mpi_op(op, type, size_), comm_));
    if (auto rest = after(data, count, type, op, size_)) rest();
  }

  std::unique_ptr<Work> allreduce_async(void* data, size_t count, ElemType type,
                                        ReduceOp op) override {
    detail::check_reduce(type, op, "allreduce_async");
    int n = mpi_count(count, "allreduce_async");
    auto work = std::make_unique<MpiWork>();
    work->call = collective(Op::Allreduce, count * elem_bytes(type));
    work->call.async = true;
    MINIDL_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, data, n, mpi_type(type),
                                    mpi_op(op, type, size_), comm_, &work->request));
    work->then = after(data, count, type, op, size_);
    return work;
  }

  void broadcast(void* data, size_t nbytes, int root) override {
    check_rank(root, "broadcast", "root");
    Waiting waiting(collective(Op::Broadcast, nbytes));
    MINIDL_MPI_CHECK(MPI_Bcast(data, mpi_count(nbytes, "broadcast"), MPI_BYTE, root, comm_));
  }

  void allgather(const void* send, void* recv, size_t nbytes) override {
    int n = mpi_count(nbytes, "allgather");
    mpi_count(nbytes * size_, "allgather");
    Waiting waiting(collective(Op::Allgather, nbytes));
    MINIDL_MPI_CHECK(MPI_Allgather(send, n, MPI_BYTE, recv, n, MPI_BYTE, comm_));
  }

  void reduce_scatter(const void* send, void* recv, size_t count, ElemType type,
                      ReduceOp op) override {
    detail::check_reduce(type, op, "reduce_scatter");
    int n = mpi_count(count, "reduce_scatter");
    mpi_count(count * size_, "reduce_scatter");
    Waiting waiting(collective(Op::ReduceScatter, count * size_ * elem_bytes(type)));
    MINIDL_MPI_CHECK(MPI_Reduce_scatter_block(send, recv, n, mpi_type(type),
                                              mpi_op(op, type, size_), comm_));
    if (auto rest = after(recv, count, type, op, size_)) rest();
  }

  void send(const void* data, size_t nbytes, int dst, int tag) override {
    check_rank(dst, "send", "destination rank");
    check_tag(tag, "send");
    Waiting waiting(point_to_point(Op::Send, nbytes, dst));
    MINIDL_MPI_CHECK(MPI_Send(data, mpi_count(nbytes, "send"), MPI_BYTE, dst, tag, comm_));
  }

  void recv(void* data, size_t nbytes, int src, int tag) override {
    check_rank(src, "recv", "source rank");
    check_tag(tag, "recv");
    Waiting waiting(point_to_point(Op::Recv, nbytes, src));
    MPI_Status status;
    MINIDL_MPI_CHECK(
        MPI_Recv(data, mpi_count(nbytes, "recv"), MPI_BYTE, src, tag, comm_, &status));
    int got = 0;
    MINIDL_MPI_CHECK(MPI_Get_count(&status, MPI_BYTE, &got));
    MINIDL_CHECK(static_cast<size_t>(got) == nbytes, "recv on rank ", rank_, ": expected ",
                 nbytes, " bytes from rank ", src, " (tag ", tag, "), got ", got);
  }

  void barrier() override {
    Waiting waiting(collective(Op::Barrier, 0));
    MINIDL_MPI_CHECK(MPI_Barrier(comm_));
  }

  std::shared_ptr<Communicator> split(const std::vector<int>& ranks) override {
    detail::check_group_ranks(ranks, size_);
    int position = -1;
    for (size_t i = 0; i < ranks.size(); ++i)
      if (ranks[i] == rank_) position = static_cast<int>(i);
    MPI_Comm group = MPI_COMM_NULL;
    Waiting waiting(collective(Op::Split, 0));
    MINIDL_MPI_CHECK(MPI_Comm_split(comm_, position >= 0 ? 0 : MPI_UNDEFINED,
                                    position >= 0 ? position : 0, &group));
    if (group == MPI_COMM_NULL) return detail::non_member(ranks, rank_);
    return std::make_shared<MpiCommunicator>(group, /*owned=*/true);
  }

  void abort(int exit_code) noexcept override { mpi_abort(exit_code); }

  // CUDA memory: NCCL where it runs (set up at the first collective on a
  // CUDA tensor), else null: host staging, said once by world rank 0.
  Communicator* on_device(Device d, bool open) override {
    if (d == Device::CPU) return this;
    if (!open || device_tried_) return device_.get();
    device_tried_ = true;
    std::string why = "no NCCL in this build";
#ifdef MINIDL_NCCL
    device_ = open_nccl(*this, &why);
#endif
    if (!device_ && g_world_rank == 0 && !g_staging_said) {
      g_staging_said = true;
      std::fprintf(stderr, "minidl: MPI backend: %s tensors are staged through host memory (%s)\n",
                   d == Device::CUDA ? "CUDA" : device_name(d), why.c_str());
      std::fflush(stderr);
    }
    return device_.get();
  }

 private:
  void check_rank(int r, const char* op, const char* what) const {
    MINIDL_CHECK(r >= 0 && r < size_, op, " on rank ", rank_, ": ", what, " ", r,
                 " is out of range for a communicator of ", size_, " ranks");
  }
  void check_tag(int tag, const char* op) const {
    int* tag_ub = nullptr;
    int found = 0;
    MINIDL_MPI_CHECK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &found));
    int ub = found && tag_ub ? *tag_ub : 32767;
    MINIDL_CHECK(tag >= 0 && tag <= ub, op, " on rank ", rank_, ": tag must be in [0, ", ub,
                 "], got ", tag);
  }

  // The next collective, announced (the timeout's records; see timeout.h).
  Call collective(Op op, size_t bytes) {
    return {.op = op, .bytes = bytes, .scope = &scope_,
            .number = announce_start(scope_, started_, op)};
  }
  Call point_to_point(Op op, size_t bytes, int peer) const {
    return {.op = op, .bytes = bytes, .scope = &scope_, .peer = scope_.members[peer]};
  }

  MPI_Comm comm_;
  bool owned_;
  int rank_ = 0, size_ = 1;
  CommScope scope_;       // its members' world ranks, for the timeout's message
  uint64_t started_ = 0;  // collectives started on it
  std::unique_ptr<Communicator> device_;  // NCCL, from on_device
  bool device_tried_ = false;
  static inline bool g_staging_said = false;  // the staging line, once per process
};

}  // namespace

MpiWorld mpi_init() {
  int initialized = 0, finalized = 0;
  MINIDL_MPI_CHECK(MPI_Finalized(&finalized));
  MINIDL_CHECK(!finalized, "parallel::init: MPI was already finalised in this process and "
               "cannot start again");
  MINIDL_MPI_CHECK(MPI_Initialized(&initialized));
  // The timeout's watchdog thread asks and answers the other ranks while this
  // thread waits inside MPI: that needs MPI_THREAD_MULTIPLE (timeout.h).
  const bool timeout_on = collective_timeout() > 0;
  StartupGuard startup(env_int("OMPI_COMM_WORLD_RANK", -1));  // until the set-up below is done
  if (!initialized) {
    int provided = 0;
    MINIDL_MPI_CHECK(MPI_Init_thread(nullptr, nullptr,
                                     timeout_on ? MPI_THREAD_MULTIPLE : MPI_THREAD_SERIALIZED,
                                     &provided));
    g_we_started = true;
  }
  int level = MPI_THREAD_SINGLE;
  MINIDL_MPI_CHECK(MPI_Query_thread(&level));
  MINIDL_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  MINIDL_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &g_world_rank));
  open_records(level == MPI_THREAD_MULTIPLE);
  start_watchdog(g_world_rank);
  if (g_mean_of_two[0] == MPI_OP_NULL) {
    MINIDL_MPI_CHECK(MPI_Op_create(mean_of_two<float>, /*commute=*/1, &g_mean_of_two[0]));
    MINIDL_MPI_CHECK(MPI_Op_create(mean_of_two<double>, /*commute=*/1, &g_mean_of_two[1]));
  }

  MpiWorld w;
  w.world = std::make_shared<MpiCommunicator>(MPI_COMM_WORLD, /*owned=*/false);
  w.local_rank = env_int("OMPI_COMM_WORLD_LOCAL_RANK", -1);
  w.local_size = env_int("OMPI_COMM_WORLD_LOCAL_SIZE", -1);
  if (w.local_rank < 0 || w.local_size < 1) {  // not Open MPI's mpirun: ask MPI
    MPI_Comm node;
    MINIDL_MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, g_world_rank,
                                         MPI_INFO_NULL, &node));
    MINIDL_MPI_CHECK(MPI_Comm_rank(node, &w.local_rank));
    MINIDL_MPI_CHECK(MPI_Comm_size(node, &w.local_size));
    MINIDL_MPI_CHECK(MPI_Comm_free(&node));
  }
  return w;
}

void mpi_finalize() {
  if (!mpi_active()) return stop_watchdog();
  close_records();  // waits for the other ranks, then stops the watchdog
  if (!g_we_started) return;
  for (MPI_Op& op : g_mean_of_two)
    if (op != MPI_OP_NULL) MINIDL_MPI_CHECK(MPI_Op_free(&op));
  MINIDL_MPI_CHECK(MPI_Finalize());
}

}  // namespace minidl::parallel::backend
