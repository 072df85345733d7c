// Tensor: factories, random factories, metadata, element access, views that
// share storage, copies and printing.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>


#include "helpers.h"

using namespace minidl;
using minidl::testing::check_values;

TEST_CASE("zeros, ones and full have the requested shape, dtype and values") {
  Tensor z = Tensor::zeros({2, 3});
  CHECK(z.shape() == Shape{2, 3});
  CHECK(z.dtype() == kFloat32);
  CHECK(z.numel() == 6);
  CHECK(z.dim() == 2);
  CHECK(z.nbytes() == 24);
  check_values(z, {0, 0, 0, 0, 0, 0});

  Tensor o = Tensor::ones({4}, kInt32);
  CHECK(o.dtype() == kInt32);
  CHECK(o.to_vector<int32_t>() == std::vector<int32_t>{1, 1, 1, 1});

  Tensor f = Tensor::full({2, 2}, 2.5);
  check_values(f, {2.5, 2.5, 2.5, 2.5});
  Tensor h = Tensor::full({3}, -1.5, kFloat16);
  CHECK(h.dtype() == kFloat16);
  CHECK(h.nbytes() == 6);
  check_values(h, {-1.5, -1.5, -1.5});

  Tensor s = Tensor::full({}, 7);  // 0-d
  CHECK(s.dim() == 0);
  CHECK(s.numel() == 1);
  CHECK(s.item() == doctest::Approx(7.0).epsilon(1e-6));
}

TEST_CASE("arange counts from start to end by step") {
  Tensor a = Tensor::arange(5);
  CHECK(a.shape() == Shape{5});
  check_values(a, {0, 1, 2, 3, 4});
  Tensor b = Tensor::arange(1.0, 2.0, 0.25);
  check_values(b, {1.0, 1.25, 1.5, 1.75});
  Tensor c = Tensor::arange(3.0, 0.0, -1.0);
  check_values(c, {3, 2, 1});
  Tensor i = Tensor::arange(4, kInt64);
  CHECK(i.dtype() == kInt64);
  CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2, 3});
  CHECK(Tensor::arange(0).numel() == 0);
  // int64 past float32's 2^24: each value start + i * step in double, exact
  Tensor big = Tensor::arange(16777216.0, 16777220.0, 1.0, kInt64);
  CHECK(big.to_vector<int64_t>() == std::vector<int64_t>{16777216, 16777217, 16777218, 16777219});
}

TEST_CASE("of, of_ints and from_vector copy values with a default 1-D shape") {
  Tensor a = Tensor::of({1, 2, 3, 4}, {2, 2});
  CHECK(a.shape() == Shape{2, 2});
  CHECK(a.at({1, 0}) == doctest::Approx(3.0).epsilon(1e-6));
  Tensor b = Tensor::of({5, 6});
  CHECK(b.shape() == Shape{2});

  Tensor l = Tensor::of_ints({3, 1, 2});
  CHECK(l.dtype() == kInt64);
  CHECK(l.to_vector<int64_t>() == std::vector<int64_t>{3, 1, 2});
  Tensor l32 = Tensor::of_ints({-4, 9}, {2, 1}, kInt32);
  CHECK(l32.dtype() == kInt32);
  CHECK(l32.shape() == Shape{2, 1});
  CHECK(l32.to_vector<int32_t>() == std::vector<int32_t>{-4, 9});

  std::vector<float> fv{0.5f, -1.f, 2.f, 3.f, 4.f, 5.f};
  Tensor f = Tensor::from_vector(fv, {3, 2});
  fv[0] = 100;  // copied: the tensor does not see it
  CHECK(f.at({0, 0}) == doctest::Approx(0.5).epsilon(1e-6));
  CHECK(f.at({2, 1}) == doctest::Approx(5.0).epsilon(1e-6));
  Tensor i64 = Tensor::from_vector(std::vector<int64_t>{7, 8, 9});
  CHECK(i64.dtype() == kInt64);
  CHECK(i64.shape() == Shape{3});
  Tensor i32 = Tensor::from_vector(std::vector<int32_t>{1, 2});
  CHECK(i32.dtype() == kInt32);
  CHECK(i32.at({1}) == 2);
}

TEST_CASE("from_blob copies by default and wraps the caller's buffer with copy = false") {
  float buf[6] = {1, 2, 3, 4, 5, 6};
  Tensor copied = Tensor::from_blob(buf, {2, 3}, kFloat32);
  Tensor wrapped = Tensor::from_blob(buf, {2, 3}, kFloat32, /*copy=*/false);
  CHECK(wrapped.raw_data() == static_cast<void*>(buf));
  CHECK(copied.raw_data() != static_cast<void*>(buf));
  buf[4] = 50;
  CHECK(copied.at({1, 1}) == doctest::Approx(5.0).epsilon(1e-6));
  CHECK(wrapped.at({1, 1}) == doctest::Approx(50.0).epsilon(1e-6));
  wrapped.set({0, 0}, -1);  // writes go to the caller's buffer
  CHECK(buf[0] == doctest::Approx(-1.0).epsilon(1e-6));

  int64_t ibuf[3] = {10, 20, 30};
  Tensor it = Tensor::from_blob(ibuf, {3}, kInt64);
  CHECK(it.to_vector<int64_t>() == std::vector<int64_t>{10, 20, 30});
}

TEST_CASE("randn, rand and randint are reproducible for a seed and differ across seeds") {
  manual_seed(42);
  Tensor a = Tensor::randn({16});
  Tensor ra = Tensor::rand({16});
  Tensor ia = Tensor::randint(0, 1000, {16});
  manual_seed(42);
  Tensor b = Tensor::randn({16});
  Tensor rb = Tensor::rand({16});
  Tensor ib = Tensor::randint(0, 1000, {16});
  CHECK(a.to_vector<float>() == b.to_vector<float>());
  CHECK(ra.to_vector<float>() == rb.to_vector<float>());
  CHECK(ia.to_vector<int64_t>() == ib.to_vector<int64_t>());

  manual_seed(43);
  Tensor c = Tensor::randn({16});
  Tensor rc = Tensor::rand({16});
  Tensor ic = Tensor::randint(0, 1000, {16});
  CHECK(a.to_vector<float>() != c.to_vector<float>());
  CHECK(ra.to_vector<float>() != rc.to_vector<float>());
  CHECK(ia.to_vector<int64_t>() != ic.to_vector<int64_t>());

  // Consecutive draws without reseeding differ too.
  CHECK(Tensor::randn({8}).to_vector<float>() != Tensor::randn({8}).to_vector<float>());
}

TEST_CASE("randn has roughly the requested mean and standard deviation") {
  manual_seed(7);
  const int64_t n = 20000;
  for (auto [m, s] : {std::pair{0.0, 1.0}, std::pair{2.0, 3.0}}) {
    std::vector<float> v = Tensor::randn({n}, m, s).to_vector<float>();
    double sum = 0, sq = 0;
    for (float x : v) sum += x;
    double mean = sum / n;
    for (float x : v) sq += (x - mean) * (x - mean);
    double std = std::sqrt(sq / (n - 1));
    // Standard error of the mean is s / sqrt(n) ~ 0.007 s; allow 5 of them.
    CHECK(std::abs(mean - m) < 0.05 * s);
    CHECK(std::abs(std - s) < 0.05 * s);
  }
}

TEST_CASE("rand stays in [low, high) with the uniform mean; randint covers its range") {
  manual_seed(3);
  std::vector<float> u = Tensor::rand({10000}, -2, 4).to_vector<float>();
  double sum = 0;
  int64_t outside = 0;
  for (float x : u) {
    outside += x < -2.f || x >= 4.f;
    sum += x;
  }
  CHECK(outside == 0);
  CHECK(std::abs(sum / u.size() - 1.0) < 0.09);  // std of the mean: 6 / sqrt(12 n) = 0.017

  Tensor r = Tensor::randint(-3, 2, {1000}, kInt32);
  CHECK(r.dtype() == kInt32);
  std::vector<int> seen(5, 0);
  std::vector<int32_t> rv = r.to_vector<int32_t>();
  CHECK(*std::min_element(rv.begin(), rv.end()) == -3);
  CHECK(*std::max_element(rv.begin(), rv.end()) == 1);
  for (int32_t v : rv) ++seen[v + 3];
  for (int count : seen) CHECK(count > 150);  // each of 5 values ~200 times
}

TEST_CASE("item and at read single elements of any dtype") {
  CHECK(Tensor::of({3.5}).item() == doctest::Approx(3.5).epsilon(1e-6));
  CHECK(Tensor::of_ints({-12}).item() == -12);
  Tensor t = Tensor::arange(24).reshape({2, 3, 4});
  CHECK(t.at({0, 0, 0}) == 0);
  CHECK(t.at({1, 2, 3}) == 23);
  CHECK(t.at({1, 0, 2}) == 14);
  Tensor h = Tensor::of({0.25, 8}).to(kFloat16);
  CHECK(h.at({1}) == doctest::Approx(8.0).epsilon(1e-6));
  t.set({0, 1, 1}, 99);
  CHECK(t.at({0, 1, 1}) == doctest::Approx(99.0).epsilon(1e-6));
}

TEST_CASE("size accepts negative dims") {
  Tensor t = Tensor::zeros({2, 3, 5});
  CHECK(t.size(0) == 2);
  CHECK(t.size(-1) == 5);
  CHECK(t.size(-3) == 2);
}

TEST_CASE("reshape, view, flatten and slice share storage with their source") {
  Tensor x = Tensor::arange(12).reshape({3, 4});
  Tensor r = x.reshape({2, -1});
  CHECK(r.shape() == Shape{2, 6});
  CHECK(r.raw_data() == x.raw_data());
  r.set({1, 0}, -6);  // element 6 of x
  CHECK(x.at({1, 2}) == doctest::Approx(-6.0).epsilon(1e-6));

  Tensor v = x.view({4, 3});
  v.set({0, 0}, 100);
  CHECK(x.at({0, 0}) == doctest::Approx(100.0).epsilon(1e-6));

  Tensor f = x.flatten();
  CHECK(f.shape() == Shape{12});
  f.set({11}, -11);
  CHECK(x.at({2, 3}) == doctest::Approx(-11.0).epsilon(1e-6));

  Tensor s = x.slice(1, 3);
  CHECK(s.shape() == Shape{2, 4});
  CHECK(s.at({0, 1}) == doctest::Approx(5.0).epsilon(1e-6));
  s.set({1, 1}, 42);  // row 2 of x
  CHECK(x.at({2, 1}) == doctest::Approx(42.0).epsilon(1e-6));
  s.fill_(0);
  check_values(x, {100, 1, 2, 3, 0, 0, 0, 0, 0, 0, 0, 0});

  // A slice of a slice keeps the byte offset of both.
  Tensor y = Tensor::arange(10).reshape({5, 2});
  Tensor ss = y.slice(1, 5).slice(2, 3);
  check_values(ss, {6, 7});
  ss.set({0, 0}, -1);
  CHECK(y.at({3, 0}) == doctest::Approx(-1.0).epsilon(1e-6));
  // A reshape of a slice views the slice's rows.
  check_values(y.slice(2, 4).reshape({4}), {4, 5, -1, 7});

  // detach shares storage too.
  Tensor d = x.detach();
  d.set({0, 0}, 1);
  CHECK(x.at({0, 0}) == doctest::Approx(1.0).epsilon(1e-6));
}

TEST_CASE("clone copies; transpose is a view") {
  Tensor x = Tensor::of({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor c = x.clone();
  c.set({0, 0}, -1);
  CHECK(x.at({0, 0}) == doctest::Approx(1.0).epsilon(1e-6));
  Tensor t = x.t();
  CHECK(t.shape() == Shape{3, 2});
  check_values(t, {1, 4, 2, 5, 3, 6});
  t.set({0, 1}, 0);  // x[1, 0], as in PyTorch
  CHECK(x.at({1, 0}) == 0);

  Tensor i = Tensor::of_ints({1, 2, 3});
  Tensor ic = i.clone();
  CHECK(ic.dtype() == kInt64);
  CHECK(ic.to_vector<int64_t>() == std::vector<int64_t>{1, 2, 3});
  ic.set({0}, 9);
  CHECK(i.at({0}) == 1);
}

TEST_CASE("fill_ and copy_ write in place, converting dtypes") {
  Tensor x = Tensor::zeros({2, 2});
  x.fill_(3);
  check_values(x, {3, 3, 3, 3});
  x.copy_(Tensor::of_ints({1, 2, 3, 4}, {4}));  // same numel, other shape and dtype
  check_values(x, {1, 2, 3, 4});
  Tensor i = Tensor::zeros({3}, kInt32);
  i.copy_(Tensor::of({1.9, -2.5, 7}));
  CHECK(i.to_vector<int32_t>() == std::vector<int32_t>{1, -2, 7});
}

TEST_CASE("printing shows the shape, dtype and values") {
  std::ostringstream os;
  os << Tensor::of({1, 2.5, 3, 4, 5, 6}, {2, 3});
  std::string s = os.str();
  CHECK(s.find("[2, 3]") != std::string::npos);
  CHECK(s.find("float32") != std::string::npos);
  CHECK(s.find("2.5") != std::string::npos);

  std::ostringstream oi;
  oi << Tensor::of_ints({7, 8}, {1, 2}, kInt32);
  CHECK(oi.str().find("[1, 2]") != std::string::npos);
  CHECK(oi.str().find("int32") != std::string::npos);

  std::ostringstream ol;  // long tensors are elided
  ol << Tensor::zeros({100}, kInt64);
  CHECK(ol.str().find("int64") != std::string::npos);
  CHECK(ol.str().find("...") != std::string::npos);

  std::ostringstream ou;
  ou << Tensor();
  CHECK(ou.str().find("undefined") != std::string::npos);
}

// The CPU allocator keeps freed blocks for reuse up to 256 MiB. Two 120 MiB
// blocks fill it; a 50 MiB block freed then pushes out the older one and is
// kept, so taking 50 MiB again reuses its block, its pages mapped already
// (its old values show through empty(); a block fresh from the kernel is
// zeros). A cache that refused new sizes once full would map every large
// tensor of a long run afresh.
TEST_CASE("the CPU allocator keeps the sizes in use once its cache is full") {
  const int64_t mib = 1 << 18;  // floats
  {
    Tensor a = Tensor::zeros({120 * mib}), b = Tensor::zeros({120 * mib});
  }
  { Tensor c = Tensor::full({50 * mib}, 7); }
  Tensor d = Tensor::empty({50 * mib});
  CHECK(d.data_ptr<float>()[0] == 7);
  CHECK(d.data_ptr<float>()[50 * mib - 1] == 7);
}

// Blocks from 2 MiB up are marked for transparent huge pages (memory.cpp):
// the kernel lists the mapping of a 4 MiB tensor as eligible, and, in its
// madvise mode, not that of a small one. Skipped where THP is off.
TEST_CASE("the CPU allocator asks for huge pages for blocks from 2 MiB") {
  std::ifstream mode_file("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string mode;
  std::getline(mode_file, mode);
  if (mode.empty() || mode.find("[never]") != std::string::npos) {
    MESSAGE("transparent huge pages off here: '", mode, "'");
    return;
  }
  // THPeligible of the mapping that holds p, from /proc/self/smaps
  auto eligible = [](const void* p) {
    const auto at = reinterpret_cast<uintptr_t>(p);
    std::ifstream smaps("/proc/self/smaps");
    bool inside = false;
    for (std::string line; std::getline(smaps, line);) {
      uintptr_t lo = 0, hi = 0;
      if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2 && line.find('-') < 17)
        inside = lo <= at && at < hi;
      else if (inside && line.rfind("THPeligible:", 0) == 0)
        return std::stoi(line.substr(12));
    }
    return -1;
  };
  Tensor big = Tensor::zeros({1 << 20}), small = Tensor::zeros({1000});
  CHECK(eligible(big.data_ptr<float>()) == 1);
  if (mode.find("[madvise]") != std::string::npos) CHECK(eligible(small.data_ptr<float>()) == 0);
}
