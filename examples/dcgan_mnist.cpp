// A DCGAN on MNIST, top to bottom, after PyTorch's examples/cpp/dcgan: a
// generator of transposed convolutions turns noise into 28 x 28 digits, a
// convolutional discriminator tells them from real ones, and the two train
// against each other with binary cross entropy. After each epoch it writes
// the generator's digits for a fixed set of noise vectors as a PNG grid
// (dcgan-epoch-<e>.png): look at them, a GAN's losses say little.
//
//   build/bin/dcgan_mnist                       # 6 epochs over 8,000 digits (4 minutes on 2 cores)
//   build/bin/dcgan_mnist --epochs 10 --save gan.safetensors
//   build/bin/dcgan_mnist --epochs 11 --resume gan.safetensors   # one more
#include <cstdio>
#include <string>

#include "cli.h"
#include "png_grid.h"
#include "resume.h"

using namespace minidl;

constexpr int64_t kNoise = 100, kEpochs = 6, kBatch = 64, kLogEvery = 25;
constexpr double kLearningRate = 2e-4, kBeta1 = 0.5;

// noise [N, 100, 1, 1] -> images [N, 1, 28, 28] in [-1, 1] (sizes 4, 7, 14, 28;
// channels 4w, 2w, w, 1 with w = 64 in PyTorch's example)
struct Generator : nn::Cell {
  nn::ConvTranspose2d conv1, conv2, conv3, conv4;
  nn::BatchNorm2d bn1, bn2, bn3;

  explicit Generator(int64_t w)
      : conv1(kNoise, 4 * w, /*kernel=*/4, {.has_bias = false}),
        conv2(4 * w, 2 * w, 3, {.stride = 2, .padding = 1, .has_bias = false}),
        conv3(2 * w, w, 4, {.stride = 2, .padding = 1, .has_bias = false}),
        conv4(w, 1, 4, {.stride = 2, .padding = 1, .has_bias = false}),
        bn1(4 * w), bn2(2 * w), bn3(w) {
    register_cells({{"conv1", conv1}, {"bn1", bn1}, {"conv2", conv2}, {"bn2", bn2},
                    {"conv3", conv3}, {"bn3", bn3}, {"conv4", conv4}});
  }
  Tensor forward(const Tensor& z) override {
    Tensor h = relu(bn1(conv1(z)));
    h = relu(bn2(conv2(h)));
    h = relu(bn3(conv3(h)));
    return tanh(conv4(h));
  }
};

// images [N, 1, 28, 28] -> probability of being real [N] (sizes 14, 7, 3, 1;
// channels w, 2w, 4w, 1)
struct Discriminator : nn::Cell {
  nn::Conv2d conv1, conv2, conv3, conv4;
  nn::BatchNorm2d bn2, bn3;

  explicit Discriminator(int64_t w)
      : conv1(1, w, /*kernel=*/4, {.stride = 2, .padding = 1, .has_bias = false}),
        conv2(w, 2 * w, 4, {.stride = 2, .padding = 1, .has_bias = false}),
        conv3(2 * w, 4 * w, 4, {.stride = 2, .padding = 1, .has_bias = false}),
        conv4(4 * w, 1, 3, {.stride = 1, .padding = 0, .has_bias = false}),
        bn2(2 * w), bn3(4 * w) {
    register_cells({{"conv1", conv1}, {"conv2", conv2}, {"bn2", bn2}, {"conv3", conv3},
                    {"bn3", bn3}, {"conv4", conv4}});
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = leaky_relu(conv1(x), 0.2);
    h = leaky_relu(bn2(conv2(h)), 0.2);
    h = leaky_relu(bn3(conv3(h)), 0.2);
    return sigmoid(conv4(h)).reshape({-1});
  }
};

void program(int argc, char** argv) {
  std::string dir = data::default_mnist_dir(), device_flag = "cpu", save, resume, init, out = ".";
  int64_t width = 64, epochs = kEpochs, batch = kBatch, max_steps = -1, threads = 0, log_every = kLogEvery;
  double lr = kLearningRate;
  uint64_t seed = 0;
  bool no_shuffle = false;
  CLI::App app{"Train a DCGAN on MNIST digits and write what it generates as PNG"};
  app.add_option("--data", dir, "directory with the four MNIST IDX files");
  app.add_option("--epochs", epochs, "passes over the digits")->check(example::in_range<int64_t>(1, 1000));
  app.add_option("--batch", batch, "real digits per step")->check(example::in_range<int64_t>(2, 4096));
  app.add_option("--steps", max_steps, "stop each epoch after this many steps")
      ->check(example::in_range<int64_t>(1, 1'000'000'000));
  app.add_option("--lr", lr, "Adam's learning rate, both networks")->check(example::in_range(0.0, 10.0));
  app.add_option("--seed", seed, "initial weights, noise and shuffling");
  app.add_option("--log-every", log_every, "print the losses every N steps")
      ->check(example::in_range<int64_t>(1, 1'000'000));
  app.add_option("--out", out, "directory for dcgan-epoch-<e>.png");
  app.add_option("--threads", threads, "compute threads (default: OMP_NUM_THREADS or all cores)")
      ->check(example::in_range<int64_t>(1, 1024));
  app.add_option("--device", device_flag, "cpu, cuda, or auto")->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  app.add_option("--save", save, "save the training state (both networks and optimizers, steps) at the end");
  app.add_option("--resume", resume, "continue from a --save file");
  app.add_flag("--no-shuffle", no_shuffle, "train in file order");
  app.add_option("--width", width, "channels w of the networks (4w, 2w, w)")->check(example::in_range<int64_t>(1, 1024));
  app.add_option("--init", init, "start from these weights (safetensors: generator.*, discriminator.*)");
  example::parse(app, argc, argv);
  if (threads > 0) set_num_threads(static_cast<int>(threads));
  const Device device = example::pick_device(device_flag);

  // 1. The digits, scaled to [-1, 1] like the generator's tanh; batches of
  //    `batch` (the last, short one dropped).
  data::Dataset digits = data::MnistDataset(dir, data::Usage::Train).map(data::Rescale(2.0 / 255, -1));
  data::BatchDataset real = (no_shuffle ? digits : digits.shuffle(seed)).batch(batch, /*drop_remainder=*/true);

  // 2. The two networks, each with Adam (beta1 0.5 as DCGAN's paper), and the
  //    noise the PNGs show, fixed for the run.
  manual_seed(seed);
  Generator generator(width);
  Discriminator discriminator(width);
  if (!init.empty()) {
    StateDict weights;
    weights.tensors = load_safetensors(init);
    generator.load_state_dict(weights.take("generator").tensors);
    discriminator.load_state_dict(weights.take("discriminator").tensors);
  }
  generator.to(device);
  discriminator.to(device);
  optim::Adam g_opt(generator.trainable_params(), lr, kBeta1);
  optim::Adam d_opt(discriminator.trainable_params(), lr, kBeta1);
  const Tensor fixed_noise = Tensor::randn({64, kNoise, 1, 1}).to(device);
  const example::Trainables state{{{"generator", &generator}, {"discriminator", &discriminator}},
                                  {{"generator_optimizer", &g_opt}, {"discriminator_optimizer", &d_opt}}};
  int64_t step = resume.empty() ? 0 : example::load_training(resume, state);
  const int64_t per_epoch = max_steps > 0 ? std::min(max_steps, real.num_batches()) : real.num_batches();
  std::printf("dcgan_mnist: %lld digits, %lld steps an epoch, %d threads, device %s, from step %lld\n",
              (long long)digits.size(), (long long)per_epoch, num_threads(), device_name(device),
              (long long)step);

  // 3. Training. Each step: the discriminator learns real digits (targets
  //    drawn from [0.8, 1], label smoothing) against the generator's fakes
  //    (target 0); then the generator learns to make the discriminator say 1.
  for (int64_t epoch = step / per_epoch; epoch < epochs; ++epoch) {
    generator.train();
    int64_t i = 0;
    for (data::Batch& b : real.epoch(epoch)) {
      if (i == per_epoch) break;
      if (epoch * per_epoch + i++ < step) continue;  // taken before --resume
      const int64_t n = b.data.size(0);
      Tensor x = b.data.to(device);
      Tensor real_target = Tensor::rand({n}, 0.8, 1.0).to(device);
      Tensor fake = generator(Tensor::randn({n, kNoise, 1, 1}).to(device));

      Tensor d_loss = binary_cross_entropy(discriminator(x), real_target) +
                      binary_cross_entropy(discriminator(fake.detach()), Tensor::zeros({n}, kFloat32, device));
      d_opt.zero_grad();
      d_loss.backward();
      d_opt.step();

      Tensor g_loss = binary_cross_entropy(discriminator(fake), Tensor::ones({n}, kFloat32, device));
      g_opt.zero_grad();
      g_loss.backward();
      g_opt.step();
      if (++step % log_every == 0)
        std::printf("epoch %lld step %lld d_loss %.6f g_loss %.6f\n", (long long)epoch + 1,
                    (long long)step, d_loss.item(), g_loss.item());
    }
    // 4. What the generator makes of the fixed noise, as an 8 x 8 grid.
    NoGradGuard no_grad;
    generator.eval();
    const std::string png = out + "/dcgan-epoch-" + std::to_string(epoch + 1) + ".png";
    example::write_png_grid(png, generator(fixed_noise), /*columns=*/8);
    std::printf("wrote %s\n", png.c_str());
  }
  if (!save.empty()) example::save_training(save, state, step);
}

int main(int argc, char** argv) {
  return example::run_main([&] { program(argc, argv); });
}
