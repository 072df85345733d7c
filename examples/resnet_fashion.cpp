// ResNet-8 on Fashion-MNIST, top to bottom: He et al.'s CIFAR ResNet (3x3
// convolutions with batch normalization, a 1x1 projection on the shortcut
// where a stage halves the size, global average pooling) with one block per
// stage, trained with SGD and momentum by a loop written out in main.
//
//   build/bin/resnet_fashion                       # 1 epoch, batch 128, lr 0.05
//   build/bin/resnet_fashion --epochs 3 --save resnet.safetensors
//   build/bin/resnet_fashion --epochs 4 --resume resnet.safetensors   # 3 done: one more
#include <cstdio>
#include <memory>
#include <string>

#include "cli.h"
#include "resume.h"

using namespace minidl;

constexpr int64_t kEpochs = 1, kBatch = 128, kTestBatch = 1000;
constexpr double kLearningRate = 0.05, kMomentum = 0.9, kWeightDecay = 5e-4;
const char* kDataDir = "/usr/share/datasets/fashion-mnist";  // Debian's dataset-fashion-mnist

// x [N, IN, H, W] -> [N, OUT, H/stride, W/stride]: relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x))
struct BasicBlock : nn::Cell {
  nn::Conv2d conv1, conv2;
  nn::BatchNorm2d bn1, bn2;
  std::shared_ptr<nn::SequentialCell> shortcut;  // 1x1 conv + bn where the shape changes

  BasicBlock(int64_t in, int64_t out, int64_t stride)
      : conv1(in, out, /*kernel=*/3, {.stride = stride, .padding = 1, .has_bias = false}),
        conv2(out, out, 3, {.stride = 1, .padding = 1, .has_bias = false}),
        bn1(out),
        bn2(out) {
    register_cells({{"conv1", conv1}, {"bn1", bn1}, {"conv2", conv2}, {"bn2", bn2}});
    if (stride != 1 || in != out)
      shortcut = register_cell("shortcut", std::make_shared<nn::SequentialCell>(
          std::initializer_list<std::shared_ptr<nn::Cell>>{
              std::make_shared<nn::Conv2d>(in, out, 1, nn::Conv2dOptions{.stride = stride, .has_bias = false}),
              std::make_shared<nn::BatchNorm2d>(out)}));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = relu(bn1(conv1(x)));
    h = bn2(conv2(h));
    return relu(h + (shortcut ? (*shortcut)(x) : x));
  }
};

// x [N, 1, 28, 28] -> logits [N, 10]; the stages run at 28, 14 and 7 pixels.
struct ResNet8 : nn::Cell {
  nn::Conv2d stem{1, 16, 3, {.stride = 1, .padding = 1, .has_bias = false}};
  nn::BatchNorm2d bn{16};
  BasicBlock stage1{16, 16, 1}, stage2{16, 32, 2}, stage3{32, 64, 2};
  nn::Dense fc{64, 10};

  ResNet8() {
    register_cells({{"stem", stem}, {"bn", bn}, {"stage1", stage1}, {"stage2", stage2},
                    {"stage3", stage3}, {"fc", fc}});
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = relu(bn(stem(x)));
    h = stage3(stage2(stage1(h)));
    return fc(mean(h, {2, 3}));  // global average pool: [N, 64, 7, 7] -> [N, 64]
  }
};

// Mean loss and accuracy over the test set.
void test(nn::Cell& net, const data::BatchDataset& batches, Device device) {
  NoGradGuard no_grad;
  net.eval();  // batch norm uses its running estimates
  double loss = 0, correct = 0, rows = 0;
  for (data::Batch& batch : batches.epoch(0)) {
    Tensor logits = net(batch.data.to(device));
    const int64_t n = batch.labels.size(0);
    loss += cross_entropy(logits, batch.labels.to(device)).item() * n;
    std::vector<int64_t> predicted = argmax(logits).cpu().to_vector<int64_t>();
    std::vector<int64_t> labels = batch.labels.to_vector<int64_t>();
    for (int64_t i = 0; i < n; ++i) correct += predicted[i] == labels[i];
    rows += n;
  }
  std::printf("test loss %.4f, accuracy %.4f (%lld images)\n", loss / rows, correct / rows,
              (long long)rows);
}

void program(int argc, char** argv) {
  std::string dir = kDataDir, device_flag = "cpu", save, resume, init;
  bool no_shuffle = false;
  int64_t epochs = kEpochs, batch = kBatch, max_steps = -1, threads = 0, log_every = 50;
  double lr = kLearningRate;
  uint64_t seed = 0;
  CLI::App app{"Train ResNet-8 on Fashion-MNIST"};
  app.add_option("--data", dir, "directory with Fashion-MNIST's four IDX files");
  app.add_option("--epochs", epochs, "passes over the training set")->check(example::in_range<int64_t>(1, 1000));
  app.add_option("--batch", batch, "samples per step")->check(example::in_range<int64_t>(1, 60000));
  app.add_option("--steps", max_steps, "stop each epoch after this many steps")
      ->check(example::in_range<int64_t>(1, 1'000'000'000));
  app.add_option("--lr", lr, "learning rate")->check(example::in_range(0.0, 10.0));
  app.add_option("--seed", seed, "initial weights and shuffling");
  app.add_option("--log-every", log_every, "print the loss every N steps")
      ->check(example::in_range<int64_t>(1, 1'000'000));
  app.add_option("--threads", threads, "compute threads (default: OMP_NUM_THREADS or all cores)")
      ->check(example::in_range<int64_t>(1, 1024));
  app.add_option("--device", device_flag, "cpu, cuda, or auto")->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  app.add_option("--save", save, "save the training state (weights, optimizer, steps) at the end");
  app.add_option("--resume", resume, "continue from a --save file");
  app.add_option("--init", init, "start from these weights (safetensors, the state_dict's names)");
  app.add_flag("--no-shuffle", no_shuffle, "train in file order");
  example::parse(app, argc, argv);
  if (threads > 0) set_num_threads(static_cast<int>(threads));
  const Device device = example::pick_device(device_flag);

  // 1. The data: pixels to [0, 1], normalized with Fashion-MNIST's mean and
  //    std, the training set shuffled each epoch.
  auto load = [&](data::Usage usage) {
    return data::MnistDataset(dir, usage).map(data::Rescale(1.0 / 255, 0)).map(data::Normalize(0.2860, 0.3530));
  };
  data::Dataset train_set = load(data::Usage::Train);
  data::BatchDataset train = (no_shuffle ? train_set : train_set.shuffle(seed)).batch(batch);
  data::BatchDataset test_set = load(data::Usage::Test).batch(kTestBatch);

  // 2. The model and optimizer; --resume restores both and the steps taken.
  manual_seed(seed);
  ResNet8 net;
  if (!init.empty()) net.load(init);
  net.to(device);
  optim::Momentum optimizer(net.trainable_params(), lr, kMomentum, {.weight_decay = kWeightDecay});
  const example::Trainables state{{{"net", &net}}, {{"optimizer", &optimizer}}};
  int64_t step = resume.empty() ? 0 : example::load_training(resume, state);
  const int64_t per_epoch = max_steps > 0 ? std::min(max_steps, train.num_batches()) : train.num_batches();
  int64_t params = 0;
  for (const Tensor& p : net.trainable_params()) params += p.numel();
  std::printf("ResNet-8: %lld parameters, %lld training images, %d threads, device %s, from step %lld\n",
              (long long)params, (long long)train.dataset().size(), num_threads(),
              device_name(device), (long long)step);

  // 3. Training: forward, loss, backward, step; the test set after each epoch.
  for (int64_t epoch = step / per_epoch; epoch < epochs; ++epoch) {
    net.train();
    int64_t i = 0;
    for (data::Batch& b : train.epoch(epoch)) {
      if (i == per_epoch) break;
      if (epoch * per_epoch + i++ < step) continue;  // taken before --resume
      Tensor loss = cross_entropy(net(b.data.to(device)), b.labels.to(device));
      optimizer.zero_grad();
      loss.backward();
      optimizer.step();
      if (++step % log_every == 0) std::printf("epoch %lld step %lld loss %.6f\n", (long long)epoch + 1, (long long)step, loss.item());
    }
    test(net, test_set, device);
  }
  if (!save.empty()) example::save_training(save, state, step);
}

int main(int argc, char** argv) {
  return example::run_main([&] { program(argc, argv); });
}
