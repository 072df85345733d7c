// The model zoo's training steps for bench_train, on fixed random data: the
// four examples' models (examples/resnet_fashion.cpp, dcgan_mnist.cpp,
// char_lstm.cpp, tiny_gpt.cpp) with their optimizers, at issue 23's shapes.
//
// The examples keep their models inside their .cpp files so that each reads
// top to bottom; sharing them would mean moving them into headers, so these
// are the bench's own compact copies: the same layers, parameter shapes,
// optimizers and step, without the data loading, checkpoints and sampling.
// bench_train_torch.cpp builds the same models with torch::nn.
//
//   auto w = zoo::make_workload("resnet", /*batch=*/128, Device::CPU);
//   Tensor loss = w->step();  // forward, loss, backward, optimizer step(s)
//
// On CUDA a step can be captured as a CUDA graph (framework/cuda_graph.h):
// set_to_none = false first (the graph's gradients must stay), then
//   graph.capture([&] { loss.copy_(w->step()); });  // recorded
//   graph.feed([&] { w->feed(); }); graph.replay();  // each later step
#pragma once
#include <minidl/minidl.h>

#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace zoo {

using namespace minidl;

inline constexpr int64_t kVocab = 62;  // the KJV's distinct characters (scripts/get_text.sh)

// One model's training step on one fixed random batch.
struct Workload {
  virtual ~Workload() = default;
  virtual Tensor step() = 0;   // returns the loss (dcgan: the discriminator's)
  virtual void feed() = 0;     // the step's optimizer steps alone, in order, for Graph::feed
  std::vector<Tensor> params;  // what the optimizers update (their count checks the twin's)
  bool set_to_none = true;     // zero_grad's, as PyTorch's default
};

// ---- resnet: ResNet-8 (resnet_fashion.cpp), x [N, 1, 28, 28] -> logits [N, 10] ----

// x [N, IN, H, W] -> [N, OUT, H/stride, W/stride]
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
      shortcut = register_cell(
          "shortcut",
          std::make_shared<nn::SequentialCell>(std::initializer_list<std::shared_ptr<nn::Cell>>{
              std::make_shared<nn::Conv2d>(in, out, 1,
                                           nn::Conv2dOptions{.stride = stride, .has_bias = false}),
              std::make_shared<nn::BatchNorm2d>(out)}));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = bn2(conv2(relu(bn1(conv1(x)))));
    return relu(h + (shortcut ? (*shortcut)(x) : x));
  }
};

struct ResNet8 : nn::Cell {
  nn::Conv2d stem{1, 16, 3, {.stride = 1, .padding = 1, .has_bias = false}};
  nn::BatchNorm2d bn{16};
  BasicBlock stage1{16, 16, 1}, stage2{16, 32, 2}, stage3{32, 64, 2};
  nn::Dense fc{64, 10};

  ResNet8() {
    register_cells({{"stem", stem},
                    {"bn", bn},
                    {"stage1", stage1},
                    {"stage2", stage2},
                    {"stage3", stage3},
                    {"fc", fc}});
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = stage3(stage2(stage1(relu(bn(stem(x))))));
    return fc(mean(h, {2, 3}));  // global average pool: [N, 64, 7, 7] -> [N, 64]
  }
};

// SGD, momentum 0.9, lr 0.05, weight decay 5e-4, cross entropy
struct ResNetStep : Workload {
  ResNet8 net;
  std::unique_ptr<optim::Momentum> opt;
  Tensor x, labels;
  ResNetStep(int64_t batch, Device d)
      : x(Tensor::randn({batch, 1, 28, 28}).to(d)), labels(Tensor::randint(0, 10, {batch}).to(d)) {
    net.to(d);
    params = net.trainable_params();
    opt = std::make_unique<optim::Momentum>(params, /*lr=*/0.05, /*momentum=*/0.9,
                                            optim::MomentumOptions{.weight_decay = 5e-4});
  }
  Tensor step() override {
    Tensor loss = cross_entropy(net(x), labels);
    opt->zero_grad(set_to_none);
    loss.backward();
    opt->step();
    return loss;
  }
  void feed() override { opt->step(); }
};

// ---- dcgan (dcgan_mnist.cpp, width w = 64) ----

// noise [N, 100, 1, 1] -> images [N, 1, 28, 28] (sizes 4, 7, 14, 28; channels 4w, 2w, w, 1)
struct Generator : nn::Cell {
  nn::ConvTranspose2d conv1, conv2, conv3, conv4;
  nn::BatchNorm2d bn1, bn2, bn3;
  explicit Generator(int64_t w)
      : conv1(100, 4 * w, /*kernel=*/4, {.has_bias = false}),
        conv2(4 * w, 2 * w, 3, {.stride = 2, .padding = 1, .has_bias = false}),
        conv3(2 * w, w, 4, {.stride = 2, .padding = 1, .has_bias = false}),
        conv4(w, 1, 4, {.stride = 2, .padding = 1, .has_bias = false}),
        bn1(4 * w),
        bn2(2 * w),
        bn3(w) {
    register_cells({{"conv1", conv1},
                    {"bn1", bn1},
                    {"conv2", conv2},
                    {"bn2", bn2},
                    {"conv3", conv3},
                    {"bn3", bn3},
                    {"conv4", conv4}});
  }
  Tensor forward(const Tensor& z) override {
    Tensor h = relu(bn2(conv2(relu(bn1(conv1(z))))));
    return tanh(conv4(relu(bn3(conv3(h)))));
  }
};

// images [N, 1, 28, 28] -> probability of being real [N] (sizes 14, 7, 3, 1)
struct Discriminator : nn::Cell {
  nn::Conv2d conv1, conv2, conv3, conv4;
  nn::BatchNorm2d bn2, bn3;
  explicit Discriminator(int64_t w)
      : conv1(1, w, /*kernel=*/4, {.stride = 2, .padding = 1, .has_bias = false}),
        conv2(w, 2 * w, 4, {.stride = 2, .padding = 1, .has_bias = false}),
        conv3(2 * w, 4 * w, 4, {.stride = 2, .padding = 1, .has_bias = false}),
        conv4(4 * w, 1, 3, {.stride = 1, .padding = 0, .has_bias = false}),
        bn2(2 * w),
        bn3(4 * w) {
    register_cells({{"conv1", conv1},
                    {"conv2", conv2},
                    {"bn2", bn2},
                    {"conv3", conv3},
                    {"bn3", bn3},
                    {"conv4", conv4}});
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = leaky_relu(bn2(conv2(leaky_relu(conv1(x), 0.2))), 0.2);
    return sigmoid(conv4(leaky_relu(bn3(conv3(h)), 0.2))).reshape({-1});
  }
};

// One step of dcgan_mnist's loop, fixed noise and targets: the discriminator
// on real and fake images, then the generator; Adam lr 2e-4, beta1 0.5 each.
struct DcganStep : Workload {
  Generator g{64};
  Discriminator d{64};
  std::unique_ptr<optim::Adam> g_opt, d_opt;
  Tensor real, noise, real_target, zeros, ones;
  DcganStep(int64_t n, Device dev)
      : real(Tensor::rand({n, 1, 28, 28}, -1, 1).to(dev)),
        noise(Tensor::randn({n, 100, 1, 1}).to(dev)),
        real_target(Tensor::rand({n}, 0.8, 1.0).to(dev)),
        zeros(Tensor::zeros({n}, kFloat32, dev)),
        ones(Tensor::ones({n}, kFloat32, dev)) {
    g.to(dev);
    d.to(dev);
    g_opt = std::make_unique<optim::Adam>(g.trainable_params(), /*lr=*/2e-4, /*beta1=*/0.5);
    d_opt = std::make_unique<optim::Adam>(d.trainable_params(), 2e-4, 0.5);
    params = g.trainable_params();
    for (const Tensor& p : d.trainable_params()) params.push_back(p);
  }
  Tensor step() override {
    Tensor fake = g(noise);
    Tensor d_loss =
        binary_cross_entropy(d(real), real_target) + binary_cross_entropy(d(fake.detach()), zeros);
    d_opt->zero_grad(set_to_none);
    d_loss.backward();
    d_opt->step();
    Tensor g_loss = binary_cross_entropy(d(fake), ones);
    g_opt->zero_grad(set_to_none);
    g_loss.backward();
    g_opt->step();
    return d_loss;
  }
  void feed() override {
    d_opt->step();
    g_opt->step();
  }
};

// ---- text models: ids [B, T] -> logits [B, T, V], mean cross entropy on next ids ----

inline Tensor lm_loss(const Tensor& logits, const Tensor& targets) {
  return cross_entropy(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}));
}

// char_lstm.cpp's CharLSTM: embedding 64, LSTM 2 x 128 (issue 23's hidden size)
struct CharLSTM : nn::Cell {
  nn::Embedding encoder{kVocab, 64};
  nn::LSTM rnn{64, 128, {.num_layers = 2, .batch_first = true}};
  nn::Dense decoder{128, kVocab};
  CharLSTM() { register_cells({{"encoder", encoder}, {"rnn", rnn}, {"decoder", decoder}}); }
  Tensor forward(const Tensor& ids) override { return decoder(rnn(encoder(ids)).first); }
};

// tiny_gpt.cpp's nanoGPT at 2 layers x 4 heads x 64, block 64, untied head.
// x [B, T, C] -> [B, T, C]
struct CausalSelfAttention : nn::Cell {
  nn::Dense c_attn{64, 3 * 64}, c_proj{64, 64};
  CausalSelfAttention() { register_cells({{"c_attn", c_attn}, {"c_proj", c_proj}}); }
  Tensor forward(const Tensor& x) override {
    const int64_t b = x.size(0), t = x.size(1), c = x.size(2), heads = 4;
    std::vector<Tensor> qkv = chunk(c_attn(x), 3, /*dim=*/2);
    for (Tensor& m : qkv)
      m = m.reshape({b, t, heads, c / heads}).transpose(1, 2);  // [B, nh, T, hs]
    Tensor y = scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], {}, /*dropout_p=*/0,
                                            /*is_causal=*/true);
    return c_proj(y.transpose(1, 2).reshape({b, t, c}));
  }
};

// x + attn(ln_1(x)), then + c_proj(gelu(c_fc(ln_2(.))))
struct Block : nn::Cell {
  nn::LayerNorm ln_1{64}, ln_2{64};
  CausalSelfAttention attn;
  nn::Dense c_fc{64, 4 * 64}, c_proj{4 * 64, 64};
  Block() {
    register_cells(
        {{"ln_1", ln_1}, {"attn", attn}, {"ln_2", ln_2}, {"c_fc", c_fc}, {"c_proj", c_proj}});
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = x + attn(ln_1(x));
    return h + c_proj(gelu(c_fc(ln_2(h))));
  }
};

struct GPT : nn::Cell {
  nn::Embedding wte{kVocab, 64}, wpe{64, 64};
  Block h0, h1;
  nn::LayerNorm ln_f{64};
  nn::Dense lm_head{64, kVocab, {.has_bias = false}};
  GPT() {
    register_cells(
        {{"wte", wte}, {"wpe", wpe}, {"h0", h0}, {"h1", h1}, {"ln_f", ln_f}, {"lm_head", lm_head}});
  }
  Tensor forward(const Tensor& ids) override {
    Tensor pos = Tensor::arange(ids.size(1), kInt64, ids.device());
    return lm_head(ln_f(h1(h0(wte(ids) + wpe(pos)))));
  }
};

// A text model's step as its example's: loss, backward, clip_grad_norm_(1.0),
// optimizer step. char_lstm: Adam lr 3e-3; tiny_gpt: AdamW lr 3e-3, betas
// (0.9, 0.95), weight decay 0.1 on the 2-D parameters only.
template <class Net>
struct TextStep : Workload {
  Net net;
  std::unique_ptr<optim::Optimizer> opt;
  Tensor ids, targets;
  TextStep(int64_t batch, int64_t seq, Device d)
      : ids(Tensor::randint(0, kVocab, {batch, seq}).to(d)),
        targets(Tensor::randint(0, kVocab, {batch, seq}).to(d)) {
    net.to(d);
    params = net.trainable_params();
    if constexpr (std::is_same_v<Net, CharLSTM>) {
      opt = std::make_unique<optim::Adam>(net.trainable_params(), /*lr=*/3e-3);
    } else {
      std::vector<Tensor> decay, no_decay;
      for (const Tensor& p : net.trainable_params()) (p.dim() >= 2 ? decay : no_decay).push_back(p);
      opt = std::make_unique<optim::AdamW>(
          std::vector<optim::ParamGroup>{{decay, {.weight_decay = 0.1}},
                                         {no_decay, {.weight_decay = 0.0}}},
          optim::GroupOptions{.lr = 3e-3, .betas = std::pair{0.9, 0.95}});
    }
  }
  Tensor step() override {
    Tensor loss = lm_loss(net(ids), targets);
    opt->zero_grad(set_to_none);
    loss.backward();
    optim::clip_grad_norm_(net, /*max_norm=*/1.0);
    opt->step();
    return loss;
  }
  void feed() override { opt->step(); }
};

// "resnet", "dcgan", "char_lstm" (bptt 35) or "tiny_gpt" (64 tokens); null otherwise.
inline std::unique_ptr<Workload> make_workload(const std::string& model, int64_t batch, Device d) {
  if (model == "resnet") return std::make_unique<ResNetStep>(batch, d);
  if (model == "dcgan") return std::make_unique<DcganStep>(batch, d);
  if (model == "char_lstm") return std::make_unique<TextStep<CharLSTM>>(batch, /*seq=*/35, d);
  if (model == "tiny_gpt") return std::make_unique<TextStep<GPT>>(batch, /*seq=*/64, d);
  return nullptr;
}

}  // namespace zoo
