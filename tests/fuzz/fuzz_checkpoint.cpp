// Structure-aware libFuzzer target for training checkpoints: the input is a
// list of edits to a valid Model::save_checkpoint file of a small net with
// Adam and a StepLR schedule (its metadata values replaced by other numbers
// or text, entries removed or added, tensors given other values, shapes or
// dtypes), written out, then loaded by Model::load_checkpoint, followed by a
// training step and an evaluation. Each either works or throws minidl::Error;
// any other exception (uncaught: libFuzzer reports the abort), a crash or a
// sanitizer report is a finding.
#include <fuzzer/FuzzedDataProvider.h>

#include <cmath>
#include <iterator>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "framework/ops.h"
#include "framework/random.h"
#include "framework/safetensors.h"
#include "fuzz_input.h"
#include "nn/container.h"
#include "nn/dense.h"
#include "nn/loss.h"
#include "optim/adam.h"
#include "optim/lr_scheduler.h"
#include "parallel/train/model.h"

using namespace minidl;

namespace {

// x [N, 4] -> logits [N, 3], its Adam and schedule, and a Model over them.
struct Trainer {
  nn::SequentialCell net{std::make_shared<nn::Dense>(4, 5), std::make_shared<nn::Dense>(5, 3)};
  nn::CrossEntropyLoss loss;
  optim::Adam adam{net.trainable_params(), 0.01};
  optim::StepLR schedule{adam, /*step_size=*/2, /*gamma=*/0.5};
  Model model{net, loss, adam};
};

const data::BatchDataset& batches() {
  static const data::BatchDataset b =
      data::Dataset(Tensor::randn({8, 4}), Tensor::from_vector(std::vector<int64_t>{0, 1, 2, 0, 1, 2, 0, 1}))
          .batch(4);
  return b;
}

// A valid checkpoint after three steps, as the entries the edits work on.
const StateDict& valid() {
  static const StateDict state = [] {
    manual_seed(1);
    Trainer t;
    t.model.train(2, batches(), {}, {.max_steps = 3, .scheduler = &t.schedule});
    const std::string path = "/tmp/minidl_fuzz_checkpoint_seed";
    t.model.save_checkpoint(path);
    StateDict s;
    s.tensors = load_safetensors(path, &s.values);
    return s;
  }();
  return state;
}

std::string odd_number(FuzzedDataProvider& in) {
  static const char* const kTexts[] = {"-1", "0", "1", "2", "3", "9007199254740993", "9223372036854775807",
                                       "-9223372036854775808", "18446744073709551616", "nan", "inf",
                                       "-inf", "1e308", "-0", "0.5", "", "x", "1 2", "0x10"};
  return in.ConsumeBool() ? kTexts[in.ConsumeIntegralInRange<size_t>(0, std::size(kTexts) - 1)]
                          : in.ConsumeRandomLengthString(24);
}

float odd_value(FuzzedDataProvider& in) {
  static const float kValues[] = {0.f, -1.f, 1e30f, -1e30f, std::numeric_limits<float>::quiet_NaN(),
                                  std::numeric_limits<float>::infinity(), 1e-40f};
  return in.ConsumeBool() ? kValues[in.ConsumeIntegralInRange<size_t>(0, std::size(kValues) - 1)]
                          : in.ConsumeFloatingPoint<float>();
}

template <class Map>
auto pick(FuzzedDataProvider& in, Map& m) {
  auto it = m.begin();
  std::advance(it, in.ConsumeIntegralInRange<size_t>(0, m.size() - 1));
  return it;
}

std::string pick_name(FuzzedDataProvider& in, const TensorDict& d) {
  return d.items()[in.ConsumeIntegralInRange<size_t>(0, d.size() - 1)].first;
}

void edit(FuzzedDataProvider& in, StateDict& s) {
  switch (in.ConsumeIntegralInRange(0, 6)) {
    case 0:  // a value becomes another number or text
      if (!s.values.empty()) pick(in, s.values)->second = odd_number(in);
      break;
    case 1:  // a value goes
      if (!s.values.empty()) s.values.erase(pick(in, s.values));
      break;
    case 2:  // a value that no writer makes
      s.values[in.ConsumeRandomLengthString(16)] = odd_number(in);
      break;
    case 3: {  // one element of a tensor changes
      if (s.tensors.items().empty()) break;
      const std::string name = pick_name(in, s.tensors);
      Tensor t = s.tensors.at(name).clone();
      if (t.numel() == 0) break;
      t.reshape({-1}).set({in.ConsumeIntegralInRange<int64_t>(0, t.numel() - 1)}, odd_value(in));
      s.tensors.at(name) = t;
      break;
    }
    case 4: {  // a tensor takes another shape or dtype
      if (s.tensors.items().empty()) break;
      const std::string name = pick_name(in, s.tensors);
      const DType dtypes[] = {kFloat32, kFloat16, kInt32, kInt64};
      Shape shape;
      for (int d = in.ConsumeIntegralInRange(0, 3); d > 0; --d) shape.push_back(in.ConsumeIntegralInRange(0, 6));
      s.tensors.at(name) = Tensor::full(shape, odd_value(in), dtypes[in.ConsumeIntegralInRange(0, 3)]);
      break;
    }
    case 5: {  // a tensor goes
      if (s.tensors.items().empty()) break;
      TensorDict kept;
      const size_t drop = in.ConsumeIntegralInRange<size_t>(0, s.tensors.items().size() - 1);
      for (size_t i = 0; i < s.tensors.items().size(); ++i)
        if (i != drop) kept.insert(s.tensors.items()[i].first, s.tensors.items()[i].second);
      s.tensors = kept;
      break;
    }
    case 6: {  // a tensor that no writer makes
      const std::string name = in.ConsumeRandomLengthString(16);
      if (!s.tensors.contains(name)) s.tensors.insert(name, Tensor::full({2}, odd_value(in)));
      break;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  StateDict s = valid();
  for (int n = in.ConsumeIntegralInRange(1, 4); n > 0; --n) edit(in, s);
  const fuzz::InputFile file(nullptr, 0);
  try {
    save_safetensors(file.path(), s.tensors, s.values);
  } catch (const Error&) {
    return 0;  // an edit the writer refuses (a name it cannot hold)
  }
  Trainer t;
  try {
    t.model.load_checkpoint(file.path(), &t.schedule);
    t.model.train(2, batches(), {}, {.max_steps = 1, .scheduler = &t.schedule});
    t.model.eval(batches());
  } catch (const Error&) {
  }
  return 0;
}
