#include "parallel/train/replica_check.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "framework/error.h"
#include "nn/cell.h"
#include "parallel/communicator.h"
#include "parallel/init.h"
#include "parallel/timeline.h"

namespace minidl {

ReplicaCheck::ReplicaCheck(int64_t every) : every_(every) {
  MINIDL_CHECK(every >= 1, "ReplicaCheck: expected a step interval >= 1, got ", every);
}

void ReplicaCheck::on_step_end(const StepEnd& s) {
  if (s.global_step % every_ != 0 || !network_) return;
  if (!parallel::is_initialized() || parallel::world_size() == 1) return;
  ++checks_;
  parallel::TimelineScope scope("replica check", "check");
  const std::string when = cat("step ", s.global_step, " (epoch ", s.epoch, " step ", s.step, ")");
  const size_t params = parallel::check_replicas(*network_, parallel::world(), when);
  if (rank_ == 0)  // one line per check (--check-replicas N: the user picks how often)
    std::printf("replicas agree at %s: %zu parameters identical on %d ranks (max |difference| 0)\n",
                when.c_str(), params, parallel::world_size());
}

namespace parallel {
namespace {

// A 64-bit hash of n bytes: multiply-rotate over 8-byte words, then a final mix.
uint64_t checksum(const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
  auto mix_in = [&h](uint64_t w) {
    w *= 0x87c37b91114253d5ull;
    h ^= (w << 31) | (w >> 33);
    h = ((h << 27) | (h >> 37)) * 5 + 0x52dce729;
  };
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    mix_in(w);
  }
  if (n > 0) {
    uint64_t w = 0;
    std::memcpy(&w, p, n);
    mix_in(w);
  }
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  return h ^ (h >> 33);
}

std::string broadcast_string(Communicator& c, std::string text, int root) {
  uint64_t n = text.size();
  c.broadcast(&n, sizeof n, root);
  text.resize(n);
  if (n) c.broadcast(text.data(), n, root);
  return text;
}

// t itself on the CPU, else a host copy (a device's parameters are hashed there)
Tensor on_host(const Tensor& t) { return t.device() == Device::CPU ? t : t.detach().cpu(); }

std::string rank_list(const std::vector<int>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

}  // namespace

size_t check_replicas(const nn::Cell& network, Communicator& group, const std::string& when) {
  const int size = group.size();
  const TensorDict named = network.named_parameters();
  const auto& params = named.items();
  const char* what = "ReplicaCheck: the replicas diverged by ";

  // The parameter counts first: the hashes' allgather needs equal lengths.
  int64_t count = static_cast<int64_t>(params.size());
  std::vector<int64_t> counts(size);
  group.allgather(&count, counts.data(), sizeof count);
  std::vector<int> differ;
  for (int r = 1; r < size; ++r)
    if (counts[r] != counts[0]) differ.push_back(r);
  if (!differ.empty())
    throw Error(cat(what, when, ": ", rank_list(differ), " ", differ.size() == 1 ? "has" : "have",
                    " a different number of parameters than rank 0 (", counts[0],
                    "); every rank must build the same model"));

  // Each parameter's hash covers its shape and dtype too.
  std::vector<uint64_t> mine;
  for (const auto& [name, p] : params) {
    std::string layout = cat(to_string(p.shape()), dtype_name(p.dtype()));
    const Tensor h = on_host(p);
    mine.push_back(checksum(h.raw_data(), h.nbytes()) ^ checksum(layout.data(), layout.size()));
  }
  std::vector<uint64_t> all(mine.size() * size);
  if (!mine.empty()) group.allgather(mine.data(), all.data(), mine.size() * sizeof(uint64_t));
  size_t first = mine.size(), differing = 0;
  for (size_t i = 0; i < mine.size(); ++i) {
    bool same = true;
    for (int r = 1; r < size; ++r) same = same && all[r * mine.size() + i] == all[i];
    if (!same && first == mine.size()) first = i;
    differing += !same;
  }
  if (first == mine.size()) return mine.size();
  for (int r = 1; r < size; ++r)
    if (all[r * mine.size() + first] != all[first]) differ.push_back(r);

  // Rank 0's copy of that parameter, to say by how much the others differ.
  const Tensor& p = params[first].second;
  const std::string described =
      broadcast_string(group, cat(params[first].first, " ", p.shape()), 0);
  const std::string layout = cat(to_string(p.shape()), dtype_name(p.dtype()));
  const bool same_layout = broadcast_string(group, layout, 0) == layout;
  uint64_t nbytes = p.nbytes();
  group.broadcast(&nbytes, sizeof nbytes, 0);
  std::vector<char> theirs(nbytes);
  if (group.rank() == 0) std::memcpy(theirs.data(), on_host(p).raw_data(), nbytes);
  if (nbytes) group.broadcast(theirs.data(), nbytes, 0);
  double gap = -1;  // -1: a different shape or dtype
  if (same_layout) {
    Tensor ref = Tensor::from_blob(theirs.data(), p.shape(), p.dtype(), /*copy=*/false);
    std::vector<float> a = p.to_float_vector(), b = ref.to_float_vector();
    gap = 0;
    for (size_t k = 0; k < a.size(); ++k) gap = std::max(gap, std::fabs(double(a[k]) - b[k]));
  }
  std::vector<double> gaps(size);
  group.allgather(&gap, gaps.data(), sizeof gap);

  std::string detail;
  for (int r : differ)
    detail += cat(detail.empty() ? "" : ", ", r, gaps[r] < 0 ? " (a different shape or dtype)"
                                                              : cat(" (max |difference| ", gaps[r], ")"));
  throw Error(cat(what, when, ": parameter ", described, " differs from rank 0's on ",
                  differ.size() == 1 ? "rank " : "ranks ", detail, "; ", differing, " of ",
                  mine.size(), " parameters differ. Replicas drift apart when ranks update "
                  "differently: a gradient left unreduced, a rank-dependent random op, or a "
                  "parameter changed outside training."));
}

}  // namespace parallel

}  // namespace minidl
