// Communicator and init(): run by every rank under mpirun (1, 2, 4 ranks) and
// alone on the local backend. Each rank contributes values computed from its
// rank; expected results are written out by hand for N ranks.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <numeric>
#include <string>
#include <vector>

#include "framework/threads.h"
#include "parallel/communicator.h"
#include "parallel/init.h"

using namespace minidl;
using parallel::ReduceOp;

namespace {
int R() { return parallel::rank(); }
int N() { return parallel::world_size(); }
parallel::Communicator& comm() { return parallel::world(); }
}  // namespace

TEST_CASE("init: ranks, local ranks, backend and threads") {
  const char* size_env = std::getenv("OMPI_COMM_WORLD_SIZE");
  CHECK(N() == (size_env ? std::atoi(size_env) : 1));
  CHECK(std::string(comm().backend()) == (parallel::launched_by_mpirun() ? "mpi" : "local"));
  CHECK(R() >= 0);
  CHECK(R() < N());
  CHECK(parallel::local_rank() == R());   // one host: local ranks are world ranks
  CHECK(parallel::local_size() == N());
  parallel::init();  // idempotent
  CHECK(parallel::is_initialized());

  // Every rank is present once.
  int r = R();
  std::vector<int> ranks(N());
  comm().allgather(&r, ranks.data(), sizeof(int));
  for (int i = 0; i < N(); ++i) CHECK(ranks[i] == i);

  // Threads: OMP_NUM_THREADS wins; otherwise cores / ranks on this host, at least 1.
  if (const char* omp = std::getenv("OMP_NUM_THREADS"))
    CHECK(num_threads() == std::atoi(omp));
  else
    CHECK(num_threads() == parallel::default_num_threads(N()));
  CHECK(parallel::default_num_threads(1) >= parallel::default_num_threads(2));
  CHECK(parallel::default_num_threads(2) >= 1);
  CHECK(parallel::default_num_threads(1 << 20) == 1);
  parallel::barrier();
}

// Each rank contributes {r+1, -(r+1), big(r+1)}: sums N(N+1)/2, max and min at the ends.
TEST_CASE_TEMPLATE("allreduce sum, max, min on raw buffers", T, float, double, int32_t, int64_t) {
  const int n = N(), r = R();
  const double s = n * (n + 1) / 2.0;
  // big: int64 beyond 32 bits, fractions for the floats (exact in either type)
  const T unit = std::is_same_v<T, int64_t> ? T(int64_t{1} << 40)
                 : std::is_floating_point_v<T> ? T(0.5) : T(1000);
  auto contribution = [&] { return std::vector<T>{T(r + 1), T(-(r + 1)), T(unit * T(r + 1))}; };

  std::vector<T> x = contribution();
  comm().allreduce(x.data(), x.size(), ReduceOp::Sum);
  CHECK(x[0] == T(s));
  CHECK(x[1] == T(-s));
  CHECK(x[2] == T(unit * T(s)));

  x = contribution();
  comm().allreduce(x.data(), x.size(), ReduceOp::Max);
  CHECK(x[0] == T(n));
  CHECK(x[1] == T(-1));
  CHECK(x[2] == T(unit * T(n)));

  x = contribution();
  comm().allreduce(x.data(), x.size(), ReduceOp::Min);
  CHECK(x[0] == T(1));
  CHECK(x[1] == T(-n));
  CHECK(x[2] == T(unit));
}

// Avg is the sum divided by the size: on two ranks MPI takes the mean inside
// the reduction, elsewhere it divides after the sum. Values k/8 with small k
// make every partial sum exact, so the expected value is the float sum over
// ranks divided by n, whatever the summation order. 300,000 elements (1.2 MB)
// take MPI's large-message algorithms (segments, rings), the first 3 its small ones.
TEST_CASE_TEMPLATE("allreduce avg, blocking and non-blocking", T, float, double) {
  const int n = N(), r = R();
  auto value = [](size_t k, int rank) { return T((k * 7 + rank * 13) % 64) / T(8); };
  for (size_t count : {size_t{3}, size_t{300000}}) {
    std::vector<T> x(count), y(count), expected(count);
    for (size_t k = 0; k < count; ++k) {
      x[k] = y[k] = value(k, r);
      T sum = 0;
      for (int q = 0; q < n; ++q) sum += value(k, q);
      expected[k] = sum / T(n);
    }
    comm().allreduce(x.data(), count, ReduceOp::Avg);
    auto work = comm().allreduce_async(y.data(), count, parallel::elem_type_of<T>::value,
                                       ReduceOp::Avg);
    work->wait();
    CHECK(x == expected);
    CHECK(y == expected);
    for (size_t k = 0; k < count; ++k) y[k] = value(k, r);
    comm().allreduce_async(y.data(), count, parallel::elem_type_of<T>::value, ReduceOp::Avg);
    CHECK(y == expected);  // dropping the Work waited and finished the mean
  }
  Tensor t = Tensor::full({4}, r + 1.0);  // mean of 1..n
  comm().allreduce(t, ReduceOp::Avg);
  CHECK(t.to_float_vector() == std::vector<float>(4, (n + 1) / 2.0f));
}

TEST_CASE("allreduce avg refuses integers") {
  int32_t i = 1;
  CHECK_THROWS_WITH_AS(comm().allreduce(&i, 1, ReduceOp::Avg),
                       doctest::Contains("allreduce: avg needs float32 or float64 elements, "
                                         "got int32"),
                       Error);
  int64_t j = 1;
  CHECK_THROWS_WITH_AS(comm().allreduce_async(&j, 1, parallel::ElemType::Int64, ReduceOp::Avg),
                       doctest::Contains("got int64"), Error);
}

TEST_CASE("allreduce on float64 keeps double precision") {
  // 1 + (r+1) 2^-40 is exact in double, not in float.
  const double eps = std::ldexp(1.0, -40);
  double x = 1.0 + (R() + 1) * eps;
  comm().allreduce(&x, 1, ReduceOp::Sum);
  CHECK(x == N() + N() * (N() + 1) / 2.0 * eps);
}

TEST_CASE("allreduce on tensors: float32, int32, int64; float16 refused") {
  const int n = N(), r = R();
  Tensor f = Tensor::of({1, 2, 3}) * float(r + 1);
  comm().allreduce(f);
  float s = n * (n + 1) / 2.0f;
  CHECK(f.to_float_vector() == std::vector<float>{s, 2 * s, 3 * s});

  Tensor i32 = Tensor::from_vector(std::vector<int32_t>{r, -r});
  comm().allreduce(i32, ReduceOp::Max);
  CHECK(i32.to_vector<int32_t>() == std::vector<int32_t>{n - 1, 0});

  Tensor i64 = Tensor::from_vector(std::vector<int64_t>{int64_t(r) << 33, r});
  comm().allreduce(i64, ReduceOp::Min);
  CHECK(i64.to_vector<int64_t>() == std::vector<int64_t>{0, 0});

  Tensor h = Tensor::ones({2}, kFloat16);
  CHECK_THROWS_WITH_AS(comm().allreduce(h), doctest::Contains("float16"), Error);
}

TEST_CASE("allreduce and broadcast through strided views write into the base") {
  const int n = N(), r = R();
  Tensor base = Tensor::zeros({2, 3});
  Tensor col = base.narrow(1, 1, 1);  // column 1: strides (3, 1), not contiguous
  col.copy_(Tensor::of({1, 2}, {2, 1}) * float(r + 1));
  comm().allreduce(col);
  const float s = n * (n + 1) / 2.0f;
  CHECK(base.to_float_vector() == std::vector<float>{0, s, 0, 0, 2 * s, 0});
  Tensor t = Tensor::arange(6).reshape({2, 3}) + float(10 * r);
  comm().broadcast(t.t(), 0);  // the whole tensor through its transpose
  CHECK(t.to_float_vector() == std::vector<float>{0, 1, 2, 3, 4, 5});
}

TEST_CASE("broadcast from every root") {
  const int n = N(), r = R();
  for (int root = 0; root < n; ++root) {
    Tensor t = Tensor::of({0, 1, 2, 3}, {2, 2}) + float(10 * r);
    comm().broadcast(t, root);
    CHECK(t.to_float_vector() == std::vector<float>{10.f * root, 10.f * root + 1,
                                                    10.f * root + 2, 10.f * root + 3});
    double d[2] = {r + 0.25, -r - 0.5};
    comm().broadcast(d, sizeof(d), root);
    CHECK(d[0] == root + 0.25);
    CHECK(d[1] == -root - 0.5);
  }
  // Any dtype moves as bytes: float16 included.
  Tensor h = Tensor::full({3}, R() == 0 ? 1.5 : 7.0, kFloat16);
  comm().broadcast(h, 0);
  CHECK(h.to_float_vector() == std::vector<float>{1.5f, 1.5f, 1.5f});
  CHECK_THROWS_WITH_AS(comm().broadcast(h, n), doctest::Contains(std::to_string(n).c_str()), Error);
}

TEST_CASE("allgather stacks every rank's tensor") {
  const int n = N(), r = R();
  Tensor mine = Tensor::from_vector(std::vector<int64_t>{r, int64_t(r) * r}, {2});
  Tensor all = comm().allgather(mine);
  CHECK(all.shape() == Shape{n, 2});
  for (int i = 0; i < n; ++i) {
    CHECK(all.at({i, 0}) == i);
    CHECK(all.at({i, 1}) == i * i);
  }
  CHECK(mine.to_vector<int64_t>() == std::vector<int64_t>{r, int64_t(r) * r});  // input untouched
}

TEST_CASE("reduce_scatter gives each rank its block reduced over ranks") {
  const int n = N(), r = R();
  // Rank q's block b is [100 q + 10 b, 100 q + 10 b + 1]; rank r gets the
  // blocks b = r of every rank: the sum is 100 * n(n-1)/2 + n * (10 r + j).
  std::vector<float> values;
  for (int b = 0; b < n; ++b) values.insert(values.end(), {100.f * r + 10 * b, 100.f * r + 10 * b + 1});
  Tensor mine = Tensor::from_vector(values, {n, 2});
  const float base = 50.f * n * (n - 1);
  CHECK(comm().reduce_scatter(mine).to_float_vector() ==
        std::vector<float>{base + 10.f * r * n, base + (10.f * r + 1) * n});
  CHECK(comm().reduce_scatter(mine, ReduceOp::Avg).to_float_vector() ==
        std::vector<float>{50.f * (n - 1) + 10 * r, 50.f * (n - 1) + 10 * r + 1});
  CHECK(comm().reduce_scatter(mine, ReduceOp::Max).to_float_vector() ==
        std::vector<float>{100.f * (n - 1) + 10 * r, 100.f * (n - 1) + 10 * r + 1});
  CHECK(mine.to_float_vector() == values);  // input untouched
  // The same as allreduce followed by taking row r.
  Tensor all = mine.clone();
  comm().allreduce(all);
  CHECK(comm().reduce_scatter(mine).to_float_vector() == all.slice(r, r + 1).to_float_vector());
  // Raw buffers, float64 and int64 blocks of 3.
  std::vector<double> d(3 * n), d_out(3);
  std::vector<int64_t> k(3 * n), k_out(3);
  for (int i = 0; i < 3 * n; ++i) d[i] = r + 0.25 * i, k[i] = int64_t(r) << i;
  comm().reduce_scatter(d.data(), d_out.data(), 3, parallel::ElemType::Float64, ReduceOp::Avg);
  comm().reduce_scatter(k.data(), k_out.data(), 3, parallel::ElemType::Int64, ReduceOp::Sum);
  for (int i = 0; i < 3; ++i) {
    CHECK(d_out[i] == doctest::Approx((n - 1) / 2.0 + 0.25 * (3 * r + i)).epsilon(1e-15));
    CHECK(k_out[i] == (int64_t(n) * (n - 1) / 2) << (3 * r + i));
  }
  // One block for each rank, or a clear error (every rank throws: no communication).
  CHECK_THROWS_WITH_AS(comm().reduce_scatter(Tensor::zeros({n + 1, 2})),
                       doctest::Contains(cat("expected a tensor [", n, ", ...]").c_str()), Error);
  CHECK_THROWS_WITH_AS(comm().reduce_scatter(Tensor::zeros({n, 2}, kFloat16)),
                       doctest::Contains("float16"), Error);
}

TEST_CASE("send/recv around a ring, tags matched") {
  const int n = N(), r = R();
  const int next = (r + 1) % n, prev = (r - 1 + n) % n;
  Tensor out = Tensor::of({float(r), r + 0.5f});
  Tensor in = Tensor::zeros({2});
  Tensor out7 = Tensor::full({1}, 70 + r), in7 = Tensor::zeros({1});
  auto send_both = [&] {
    comm().send(out7, next, /*tag=*/7);
    comm().send(out, next, /*tag=*/3);
  };
  auto recv_both = [&] {  // in the other tag order than sent
    comm().recv(in, prev, /*tag=*/3);
    comm().recv(in7, prev, /*tag=*/7);
  };
  if (r % 2 == 0) send_both(), recv_both();  // even ranks send first: no cycle of waits
  else recv_both(), send_both();
  CHECK(in.to_float_vector() == std::vector<float>{float(prev), prev + 0.5f});
  CHECK(in7.item() == 70 + prev);
}

TEST_CASE("recv of the wrong length throws, naming the sizes") {
  const int n = N(), r = R();
  const int next = (r + 1) % n, prev = (r - 1 + n) % n;
  std::vector<char> small(8, 'x'), big(16);
  auto send = [&] { comm().send(small.data(), small.size(), next, 1); };
  auto recv = [&] {
    try {
      comm().recv(big.data(), big.size(), prev, 1);
      FAIL("recv of 16 bytes from an 8-byte message did not throw");
    } catch (const Error& e) {
      CHECK(std::string(e.what()).find("expected 16 bytes") != std::string::npos);
    }
  };
  if (r % 2 == 0) send(), recv();
  else recv(), send();

  // A message longer than the buffer: MPI reports a truncation, turned into an Error
  // naming the MPI call, file:line and the rank.
  std::vector<char> tiny(4);
  auto recv_tiny = [&] {
    try {
      comm().recv(tiny.data(), tiny.size(), prev, 2);
      FAIL("recv of 4 bytes from an 8-byte message did not throw");
    } catch (const Error& e) {
      std::string msg = e.what();
      if (std::string(comm().backend()) == "mpi") {
        CHECK(msg.find("MPI error on rank " + std::to_string(r)) != std::string::npos);
        CHECK(msg.find("MPI_Recv") != std::string::npos);
        CHECK(msg.find("mpi.cpp:") != std::string::npos);
      } else {
        CHECK(msg.find("expected 4 bytes") != std::string::npos);
      }
    }
  };
  auto send2 = [&] { comm().send(small.data(), small.size(), next, 2); };
  if (r % 2 == 0) send2(), recv_tiny();
  else recv_tiny(), send2();
  parallel::barrier();
}

TEST_CASE("non-blocking allreduce equals the blocking one") {
  const int n = N(), r = R();
  // Values k/8 with small k: every partial sum is exact, so any summation order agrees.
  std::vector<float> a(1000), b(1000);
  for (int k = 0; k < 1000; ++k) a[k] = b[k] = float((k * 7 + r * 13) % 64) / 8.0f;
  std::vector<int64_t> c(300);
  std::iota(c.begin(), c.end(), int64_t(r) << 35);

  comm().allreduce(a.data(), a.size(), ReduceOp::Sum);
  std::vector<int64_t> c_ref = c;
  comm().allreduce(c_ref.data(), c_ref.size(), ReduceOp::Max);

  auto wb = comm().allreduce_async(b.data(), b.size(), parallel::ElemType::Float32, ReduceOp::Sum);
  auto wc = comm().allreduce_async(c.data(), c.size(), parallel::ElemType::Int64, ReduceOp::Max);
  Tensor t = Tensor::full({5}, r + 1.0);
  auto wt = comm().allreduce_async(t);
  // Waited in another order than started; test() until done, then wait() returns at once.
  while (!wt->test()) {}
  wt->wait();
  wc->wait();
  wb->wait();
  CHECK(b == a);
  CHECK(c == c_ref);
  CHECK(c[299] == (int64_t(n - 1) << 35) + 299);
  CHECK(t.to_float_vector() == std::vector<float>(5, n * (n + 1) / 2.0f));

  // The Tensor overload keeps its tensor alive though the caller dropped it.
  auto w = comm().allreduce_async(Tensor::full({4}, 2.0));
  w->wait();
  CHECK(w->test());
}

TEST_CASE("new_group of the even ranks") {
  const int n = N(), r = R();
  std::vector<int> evens;
  for (int i = 0; i < n; i += 2) evens.push_back(i);
  auto group = parallel::new_group(evens);
  CHECK(group->size() == int(evens.size()));
  if (r % 2 == 0) {
    CHECK(group->rank() == r / 2);
    int x = r + 1;  // 1 + 3 + 5 + ...
    group->allreduce(&x, 1, ReduceOp::Sum);
    CHECK(x == int(evens.size() * evens.size()));
    float mean = r;  // of 0, 2, 4, ...: on 4 ranks a group of two, MPI's in-reduction mean
    group->allreduce(&mean, 1, ReduceOp::Avg);
    CHECK(mean == float(evens.size() - 1));
    Tensor all = group->allgather(Tensor::full({1}, r));
    for (size_t i = 0; i < evens.size(); ++i) CHECK(all.at({int64_t(i), 0}) == evens[i]);
    group->barrier();
  } else {
    CHECK(group->rank() == -1);
    int x = 1;
    CHECK_THROWS_WITH_AS(group->allreduce(&x, 1, ReduceOp::Sum),
                         doctest::Contains("is not a member of the group"), Error);
    CHECK_THROWS_WITH_AS(group->barrier(), doctest::Contains(("rank " + std::to_string(r)).c_str()),
                         Error);
  }

  // Order matters: group rank i is ranks[i].
  std::vector<int> reversed(n);
  std::iota(reversed.rbegin(), reversed.rend(), 0);
  auto rev = parallel::new_group(reversed);
  CHECK(rev->rank() == n - 1 - r);
  int root_value = r;
  rev->broadcast(&root_value, sizeof(int), 0);  // group rank 0 is world rank n-1
  CHECK(root_value == n - 1);

  CHECK_THROWS_WITH_AS(parallel::new_group({0, n}), doctest::Contains("out of range"), Error);
  CHECK_THROWS_WITH_AS(parallel::new_group({0, 0}), doctest::Contains("appears twice"), Error);
  CHECK_THROWS_AS(parallel::new_group({}), Error);
}
