#include "parallel/data_parallel.h"

#include <algorithm>
#include <string>

#include "framework/autograd.h"
#include "parallel/init.h"
#include "parallel/timeline.h"

namespace minidl::parallel {

struct DataParallel::State {
  std::shared_ptr<Communicator> group;
  std::vector<Tensor> params;                // trainable, registration order
  std::vector<std::vector<size_t>> buckets;  // indices into params; reverse order
  std::vector<size_t> bucket_of;             // per parameter: its bucket
  std::vector<GradBucket> grad_buckets;      // per bucket: the float32 gradients

  // The backward in progress (from its first hook to the end callback).
  bool active = false;
  bool communicate = false;     // latched at the first hook
  std::vector<char> ready;      // per parameter
  std::vector<size_t> missing;  // per bucket: parameters not yet ready
  size_t next_start = 0;        // buckets start in index order, the same on every rank
  std::vector<std::unique_ptr<Work>> works;
  std::vector<int64_t> timeline_ids;  // per bucket: its allreduce's Timeline event, or -1

  bool explicit_mode = false;  // scale_loss() since the last apply_collective_grads()
  bool auto_reduced = false;   // the latest backward averaged automatically
  int no_sync_depth = 0;
  DataParallelStats stats;

  int size() const { return group->size(); }
  MeanSplit mean() const { return mean_split(size(), size()); }

  // Puts bucket b's gradients into its buffer and starts its allreduce, for
  // the mean or (MeanSplit{}) the sum; `now`: runs it to the end instead
  // (nothing left to overlap with, and a blocking allreduce is the faster call).
  void start(size_t b, const MeanSplit& how, bool now = false) {
    const Tensor& flat = grad_buckets[b].pack(how.scale);
    const size_t n = grad_buckets[b].numel();
    // Its start time is this rank's arrival: Timeline::write() splits the
    // event into waiting for the last rank to arrive and the transfer after.
    timeline_ids[b] = Timeline::enabled()
                          ? Timeline::begin_collective(
                                "allreduce bucket " + std::to_string(b), "communication", size(),
                                {{"bucket", static_cast<int64_t>(b)},
                                 {"bytes", static_cast<int64_t>(n * sizeof(float))},
                                 {"params", static_cast<int64_t>(buckets[b].size())},
                                 {"blocking", now ? 1 : 0}},
                                Timeline::kCommunication)
                          : -1;
    if (now) {
      group->allreduce(flat, how.op);
      Timeline::end(timeline_ids[b]);
    } else {
      works[b] = group->allreduce_async(flat, how.op);
    }
  }

  // Waits for every bucket, divides by `divisor` and hands the gradients back
  // (views into the buckets; see grad_bucket.h).
  void finish(float divisor) {
    TimelineScope scope("finish allreduce", "communication");  // wait, average, write back
    for (size_t b = 0; b < buckets.size(); ++b) {
      if (works[b]) {
        works[b]->wait();
        Timeline::end(timeline_ids[b]);
        works[b].reset();
      }
      grad_buckets[b].unpack(divisor);
    }
    ++stats.reductions;
  }

  void begin_pass() {
    active = true;
    communicate = size() > 1 && !explicit_mode && no_sync_depth == 0;
    std::fill(ready.begin(), ready.end(), 0);
    for (size_t b = 0; b < buckets.size(); ++b) missing[b] = buckets[b].size();
    next_start = 0;
    stats.hooks = stats.buckets_started_in_hooks = stats.buckets_started_at_end = 0;
    stats.hooks_after_first_start = 0;
  }

  void on_ready(size_t i) {
    if (!active) begin_pass();
    ++stats.hooks;
    if (stats.buckets_started_in_hooks > 0) ++stats.hooks_after_first_start;
    if (!communicate || ready[i]) return;
    ready[i] = 1;
    --missing[bucket_of[i]];
    while (next_start < buckets.size() && missing[next_start] == 0) {
      // The last bucket has no later gradients to overlap with: it runs
      // blocking, the faster call (Open MPI's Iallreduce + Wait costs 1.3-1.6x
      // Allreduce here).
      const bool last = next_start + 1 == buckets.size();
      start(next_start++, mean(), last);
      ++stats.buckets_started_in_hooks;
    }
    for (size_t b = 0; b < works.size(); ++b)  // MPI moves requests along only inside MPI calls
      if (works[b] && works[b]->test()) Timeline::end(timeline_ids[b]);  // seen finished
  }

  void on_backward_end() {
    if (!active) return;  // a backward that did not reach the module
    active = false;
    auto_reduced = !explicit_mode && no_sync_depth == 0;
    if (!communicate) return;
    while (next_start < buckets.size()) {
      start(next_start++, mean(), /*now=*/true);
      ++stats.buckets_started_at_end;
    }
    finish(mean().divisor);
  }

  // An exception escaped the last backward: finish its communication, keep nothing.
  void abandon() {
    active = false;
    for (auto& w : works) {
      if (w) w->wait();
      w.reset();
    }
  }
};

namespace {

// "fc1.weight [10, 4]", with the dtype unless float32 and "(frozen)" unless trainable.
std::string describe(const std::string& name, const Tensor& p) {
  std::string s = name + " " + to_string(p.shape());
  if (p.dtype() != kFloat32) s += std::string(" ") + dtype_name(p.dtype());
  if (!p.requires_grad()) s += " (frozen)";
  return s;
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

// The collective check of construction step 2.
void check_same_parameters(Communicator& c, const nn::Cell& module) {
  std::vector<std::string> mine;
  std::string joined;
  for (const auto& [name, p] : module.named_parameters()) {
    mine.push_back(describe(name, p));
    joined += mine.back() + "\n";
  }
  const int rank = c.rank();
  std::vector<std::string> theirs = split_lines(c.broadcast(joined, 0));

  std::string diff;
  size_t common = std::min(mine.size(), theirs.size());
  for (size_t i = 0; i < common && diff.empty(); ++i)
    if (mine[i] != theirs[i])
      diff = cat("rank ", rank, " has parameter ", mine[i], " where rank 0 has ", theirs[i],
                 " (parameter ", i, ")");
  if (diff.empty() && mine.size() != theirs.size())
    diff = cat("rank ", rank, " has ", mine.size(), " parameters where rank 0 has ", theirs.size(),
               mine.size() > theirs.size() ? "; its first extra one is " + mine[common]
                                           : "; the first it lacks is " + theirs[common]);

  int bad = diff.empty() ? 0 : 1;
  std::vector<int> flags(c.size());
  c.allgather(&bad, flags.data(), sizeof bad);
  int first = -1;
  std::string ranks;
  for (int r = 0; r < c.size(); ++r)
    if (flags[r]) {
      if (first < 0) first = r;
      ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
    }
  if (first < 0) return;
  diff = c.broadcast(diff, first);
  throw Error(cat("DataParallel: ", diff, "; ranks that differ from rank 0: ", ranks,
                  ". Every rank must build the same model."));
}

// Construction step 3: rank 0's values, one broadcast per bucket (any dtype,
// any device: the values go through host memory, once per run).
void broadcast_parameters(Communicator& c, const std::vector<Tensor>& params, size_t bucket_bytes) {
  std::vector<char> buf;
  // params[i]'s bytes in buf, at `at`
  auto in_buf = [&](size_t i, size_t at) {
    return Tensor::from_blob(buf.data() + at, params[i].shape(), params[i].dtype(), /*copy=*/false);
  };
  for (const auto& bucket : plan_buckets(params, bucket_bytes)) {
    size_t n = 0;
    for (size_t i : bucket) n += params[i].nbytes();
    buf.resize(n);
    size_t at = 0;
    for (size_t i : bucket) {
      if (c.rank() == 0) in_buf(i, at).copy_(params[i]);
      at += params[i].nbytes();
    }
    c.broadcast(buf.data(), n, 0);
    at = 0;
    for (size_t i : bucket) {
      Tensor(params[i]).copy_(in_buf(i, at));
      at += params[i].nbytes();
    }
  }
}

}  // namespace

DataParallel::DataParallel(nn::Cell& module, DataParallelOptions options)
    : module_(module), state_(std::make_shared<State>()) {
  register_cell("module", module);
  State& s = *state_;
  s.group = options.group ? std::move(options.group) : world_ptr();
  MINIDL_CHECK(s.group->rank() >= 0,
               "DataParallel: this process is not a member of the group "
               "(from new_group) it was given; only members may construct it");
  check_same_parameters(*s.group, module);
  s.group->check_same("DataParallel", {{"bucket_bytes", cat(options.bucket_bytes)}});
  // Buffers (BatchNorm's running statistics): the same names, shapes and dtypes, then rank 0's values.
  std::string buffer_layout;
  std::vector<Tensor> buffers;
  for (const auto& [name, b] : module.named_buffers()) {
    buffer_layout += cat(buffer_layout.empty() ? "" : ", ", name, " ", b.shape(), " ",
                         dtype_name(b.dtype()));
    buffers.push_back(b);
  }
  s.group->check_same("DataParallel", {{"buffers", "[" + buffer_layout + "]"}});
  if (s.size() > 1) {
    broadcast_parameters(*s.group, module.parameters(), options.bucket_bytes);
    broadcast_parameters(*s.group, buffers, options.bucket_bytes);
  }

  s.params = module.trainable_params();
  std::vector<Tensor> reversed(s.params.rbegin(), s.params.rend());
  const size_t P = s.params.size();
  for (auto bucket : plan_buckets(reversed, options.bucket_bytes)) {
    for (size_t& i : bucket) i = P - 1 - i;
    s.buckets.push_back(std::move(bucket));
  }
  s.bucket_of.resize(P);
  for (size_t b = 0; b < s.buckets.size(); ++b) {
    std::vector<Tensor> members;
    for (size_t i : s.buckets[b]) {
      s.bucket_of[i] = b;
      members.push_back(s.params[i]);
    }
    s.grad_buckets.emplace_back(std::move(members));
  }
  s.ready.resize(P);
  s.missing.resize(s.buckets.size());
  s.works.resize(s.buckets.size());
  s.timeline_ids.assign(s.buckets.size(), -1);

  std::weak_ptr<State> weak = state_;
  for (size_t i = 0; i < P; ++i)
    s.params[i].register_grad_ready_hook([weak, i](Tensor&) {
      if (auto st = weak.lock()) st->on_ready(i);
    });
  end_callback_id_ = add_backward_end_callback([weak] {
    if (auto st = weak.lock()) st->on_backward_end();
  });
}

DataParallel::~DataParallel() {
  remove_backward_end_callback(end_callback_id_);
  try {
    state_->abandon();
  } catch (const std::exception&) {  // a failed allreduce has nowhere to go from a destructor
  }
}

Tensor DataParallel::forward(const Tensor& x) {
  if (state_->active) state_->abandon();
  return module_(x);
}

Tensor DataParallel::forward(const Tensor& a, const Tensor& b) {
  if (state_->active) state_->abandon();
  return module_(a, b);
}

Tensor DataParallel::scale_loss(const Tensor& loss) {
  state_->explicit_mode = true;
  return nranks() == 1 ? loss : loss / static_cast<double>(nranks());
}

void DataParallel::apply_collective_grads() {
  State& s = *state_;
  MINIDL_CHECK(s.explicit_mode || !s.auto_reduced,
               "DataParallel: apply_collective_grads() after a backward that already averaged "
               "the gradients automatically (scale_loss() was not called), so they would be "
               "reduced twice. Use one style per iteration: loss = dp.scale_loss(loss); "
               "loss.backward(); dp.apply_collective_grads(); or just loss.backward()");
  MINIDL_CHECK(s.explicit_mode,
               "DataParallel: apply_collective_grads() needs "
               "loss = dp.scale_loss(loss) before loss.backward() in this iteration");
  s.explicit_mode = false;
  s.auto_reduced = false;
  if (s.size() == 1) return;
  for (size_t b = 0; b < s.buckets.size(); ++b) s.start(b, MeanSplit{}, /*now=*/true);
  s.finish(1.0f);
}

DataParallel::NoSyncGuard::NoSyncGuard(DataParallel& dp) : dp_(dp) { ++dp_.state_->no_sync_depth; }
DataParallel::NoSyncGuard::~NoSyncGuard() { --dp_.state_->no_sync_depth; }

int DataParallel::nranks() const { return state_->size(); }
Communicator& DataParallel::group() const { return *state_->group; }
const std::vector<Tensor>& DataParallel::reduced_parameters() const { return state_->params; }
const std::vector<std::vector<size_t>>& DataParallel::buckets() const { return state_->buckets; }
const DataParallelStats& DataParallel::stats() const { return state_->stats; }

}  // namespace minidl::parallel
