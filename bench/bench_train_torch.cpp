// bench_train_torch: libtorch's training throughput on synthetic data, the
// twin of minidl's bench_train (same flags, same output).
//
//   bench_train_torch [--model M] [--batch B]
//                     [--steps N] [--warmup W] [--threads T|auto]
//
// One fixed random batch (inputs [B, 1, 28, 28] for lenet, [B, 784] for mlp;
// labels uniform in 0..9) is trained on for W untimed then N timed steps of
// Momentum SGD (lr 0.01, momentum 0.9) on cross entropy. The zoo (resnet,
// dcgan, char_lstm, tiny_gpt) and a user's models (vgg, mobilenet, unet,
// encoder, gru) are bench/zoo_models.h's and bench/user_models.h's models
// built with torch::nn (the same parameter shapes), with the same optimizers
// and step, on fixed random data. --batch, --steps and --warmup default to the model's
// (bench_common.h). Output: '#' comment lines, then `samples/s=R` (the text
// models: `sequences/s=R`; median over chunks of the timed steps) and
// `peak_rss_mb=M` (getrusage ru_maxrss).
#include <torch/torch.h>
#include <torch/version.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench_common.h"

namespace {

// LeNet-5: x [B, 1, 28, 28] -> logits [B, 10]
struct LeNet5Impl : torch::nn::Module {
  torch::nn::Conv2d conv1{torch::nn::Conv2dOptions(1, 6, /*kernel_size=*/5).padding(2)};
  torch::nn::Conv2d conv2{torch::nn::Conv2dOptions(6, 16, /*kernel_size=*/5)};
  torch::nn::Linear fc1{400, 120}, fc2{120, 84}, fc3{84, 10};
  LeNet5Impl() {
    register_module("conv1", conv1);
    register_module("conv2", conv2);
    register_module("fc1", fc1);
    register_module("fc2", fc2);
    register_module("fc3", fc3);
  }
  torch::Tensor forward(torch::Tensor x) {
    x = torch::max_pool2d(torch::relu(conv1(x)), /*kernel_size=*/2);
    x = torch::max_pool2d(torch::relu(conv2(x)), /*kernel_size=*/2).flatten(1);
    return fc3(torch::relu(fc2(torch::relu(fc1(x)))));
  }
};
TORCH_MODULE(LeNet5);

// MLP 784-512-512-10: x [B, 784] -> logits [B, 10]
struct MlpImpl : torch::nn::Module {
  torch::nn::Linear fc1{784, 512}, fc2{512, 512}, fc3{512, 10};
  MlpImpl() {
    register_module("fc1", fc1);
    register_module("fc2", fc2);
    register_module("fc3", fc3);
  }
  torch::Tensor forward(torch::Tensor x) {
    return fc3(torch::relu(fc2(torch::relu(fc1(x)))));
  }
};
TORCH_MODULE(Mlp);

// ---- the model zoo (bench/zoo_models.h's models in torch::nn) ----

constexpr int64_t kVocab = 62;  // the KJV's distinct characters

// ResNet-8: x [N, 1, 28, 28] -> logits [N, 10]. A block: x [N, IN, H, W] -> [N, OUT, H/s, W/s]
struct BasicBlockImpl : torch::nn::Module {
  torch::nn::Conv2d conv1, conv2;
  torch::nn::BatchNorm2d bn1, bn2;
  torch::nn::Sequential shortcut{nullptr};  // 1x1 conv + bn where the shape changes
  BasicBlockImpl(int64_t in, int64_t out, int64_t stride)
      : conv1(torch::nn::Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false)),
        conv2(torch::nn::Conv2dOptions(out, out, 3).padding(1).bias(false)),
        bn1(out),
        bn2(out) {
    register_module("conv1", conv1);
    register_module("bn1", bn1);
    register_module("conv2", conv2);
    register_module("bn2", bn2);
    if (stride != 1 || in != out)
      shortcut = register_module(
          "shortcut",
          torch::nn::Sequential(
              torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 1).stride(stride).bias(false)),
              torch::nn::BatchNorm2d(out)));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    auto h = bn2(conv2(torch::relu(bn1(conv1(x)))));
    return torch::relu(h + (shortcut ? shortcut->forward(x) : x));
  }
};
TORCH_MODULE(BasicBlock);

struct ResNet8Impl : torch::nn::Module {
  torch::nn::Conv2d stem{torch::nn::Conv2dOptions(1, 16, 3).padding(1).bias(false)};
  torch::nn::BatchNorm2d bn{16};
  BasicBlock stage1{16, 16, 1}, stage2{16, 32, 2}, stage3{32, 64, 2};
  torch::nn::Linear fc{64, 10};
  ResNet8Impl() {
    register_module("stem", stem);
    register_module("bn", bn);
    register_module("stage1", stage1);
    register_module("stage2", stage2);
    register_module("stage3", stage3);
    register_module("fc", fc);
  }
  torch::Tensor forward(const torch::Tensor& x) {
    auto h = stage3(stage2(stage1(torch::relu(bn(stem(x))))));
    return fc(h.mean({2, 3}));
  }
};
TORCH_MODULE(ResNet8);

// DCGAN (width w): noise [N, 100, 1, 1] -> images [N, 1, 28, 28]
struct GeneratorImpl : torch::nn::Module {
  torch::nn::ConvTranspose2d conv1, conv2, conv3, conv4;
  torch::nn::BatchNorm2d bn1, bn2, bn3;
  explicit GeneratorImpl(int64_t w)
      : conv1(torch::nn::ConvTranspose2dOptions(100, 4 * w, 4).bias(false)),
        conv2(torch::nn::ConvTranspose2dOptions(4 * w, 2 * w, 3).stride(2).padding(1).bias(false)),
        conv3(torch::nn::ConvTranspose2dOptions(2 * w, w, 4).stride(2).padding(1).bias(false)),
        conv4(torch::nn::ConvTranspose2dOptions(w, 1, 4).stride(2).padding(1).bias(false)),
        bn1(4 * w),
        bn2(2 * w),
        bn3(w) {
    register_module("conv1", conv1);
    register_module("bn1", bn1);
    register_module("conv2", conv2);
    register_module("bn2", bn2);
    register_module("conv3", conv3);
    register_module("bn3", bn3);
    register_module("conv4", conv4);
  }
  torch::Tensor forward(const torch::Tensor& z) {
    auto h = torch::relu(bn2(conv2(torch::relu(bn1(conv1(z))))));
    return torch::tanh(conv4(torch::relu(bn3(conv3(h)))));
  }
};
TORCH_MODULE(Generator);

// images [N, 1, 28, 28] -> probability of being real [N]
struct DiscriminatorImpl : torch::nn::Module {
  torch::nn::Conv2d conv1, conv2, conv3, conv4;
  torch::nn::BatchNorm2d bn2, bn3;
  explicit DiscriminatorImpl(int64_t w)
      : conv1(torch::nn::Conv2dOptions(1, w, 4).stride(2).padding(1).bias(false)),
        conv2(torch::nn::Conv2dOptions(w, 2 * w, 4).stride(2).padding(1).bias(false)),
        conv3(torch::nn::Conv2dOptions(2 * w, 4 * w, 4).stride(2).padding(1).bias(false)),
        conv4(torch::nn::Conv2dOptions(4 * w, 1, 3).bias(false)),
        bn2(2 * w),
        bn3(4 * w) {
    register_module("conv1", conv1);
    register_module("conv2", conv2);
    register_module("bn2", bn2);
    register_module("conv3", conv3);
    register_module("bn3", bn3);
    register_module("conv4", conv4);
  }
  torch::Tensor forward(const torch::Tensor& x) {
    auto h = torch::leaky_relu(bn2(conv2(torch::leaky_relu(conv1(x), 0.2))), 0.2);
    return torch::sigmoid(conv4(torch::leaky_relu(bn3(conv3(h)), 0.2))).reshape({-1});
  }
};
TORCH_MODULE(Discriminator);

// char-LSTM: ids [B, T] -> logits [B, T, 62]; embedding 64, LSTM 2 x 128
struct CharLSTMImpl : torch::nn::Module {
  torch::nn::Embedding encoder{kVocab, 64};
  torch::nn::LSTM rnn{torch::nn::LSTMOptions(64, 128).num_layers(2).batch_first(true)};
  torch::nn::Linear decoder{128, kVocab};
  CharLSTMImpl() {
    register_module("encoder", encoder);
    register_module("rnn", rnn);
    register_module("decoder", decoder);
  }
  torch::Tensor forward(const torch::Tensor& ids) {
    return decoder(std::get<0>(rnn(encoder(ids))));
  }
};
TORCH_MODULE(CharLSTM);

// tiny GPT (nanoGPT, 2 layers x 4 heads x 64, block 64). Attention written
// out as nanoGPT does where PyTorch has no scaled_dot_product_attention (1.13):
// x [B, T, C] -> [B, T, C]
struct CausalSelfAttentionImpl : torch::nn::Module {
  torch::nn::Linear c_attn{64, 3 * 64}, c_proj{64, 64};
  torch::Tensor future;  // [64, 64], true above the diagonal
  CausalSelfAttentionImpl() {
    register_module("c_attn", c_attn);
    register_module("c_proj", c_proj);
    future = register_buffer("future", torch::ones({64, 64}, torch::kBool).triu(1));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    const int64_t b = x.size(0), t = x.size(1), c = x.size(2), heads = 4;
    auto qkv = c_attn(x).chunk(3, 2);
    for (auto& m : qkv) m = m.view({b, t, heads, c / heads}).transpose(1, 2);  // [B, nh, T, hs]
    auto att =
        torch::matmul(qkv[0], qkv[1].transpose(-2, -1)) * (1.0 / std::sqrt(double(c / heads)));
    att = torch::softmax(att.masked_fill(future.slice(0, 0, t).slice(1, 0, t), -INFINITY), -1);
    auto y = torch::matmul(att, qkv[2]);
    return c_proj(y.transpose(1, 2).contiguous().view({b, t, c}));
  }
};
TORCH_MODULE(CausalSelfAttention);

struct BlockImpl : torch::nn::Module {
  torch::nn::LayerNorm ln_1{torch::nn::LayerNormOptions({64})},
      ln_2{torch::nn::LayerNormOptions({64})};
  CausalSelfAttention attn;
  torch::nn::Linear c_fc{64, 4 * 64}, c_proj{4 * 64, 64};
  BlockImpl() {
    register_module("ln_1", ln_1);
    register_module("attn", attn);
    register_module("ln_2", ln_2);
    register_module("c_fc", c_fc);
    register_module("c_proj", c_proj);
  }
  torch::Tensor forward(const torch::Tensor& x) {
    auto h = x + attn(ln_1(x));
    return h + c_proj(torch::gelu(c_fc(ln_2(h))));
  }
};
TORCH_MODULE(Block);

struct GPTImpl : torch::nn::Module {
  torch::nn::Embedding wte{kVocab, 64}, wpe{64, 64};
  Block h0, h1;
  torch::nn::LayerNorm ln_f{torch::nn::LayerNormOptions({64})};
  torch::nn::Linear lm_head{torch::nn::LinearOptions(64, kVocab).bias(false)};
  GPTImpl() {
    register_module("wte", wte);
    register_module("wpe", wpe);
    register_module("h0", h0);
    register_module("h1", h1);
    register_module("ln_f", ln_f);
    register_module("lm_head", lm_head);
  }
  torch::Tensor forward(const torch::Tensor& ids) {
    auto pos = torch::arange(ids.size(1), torch::kLong);
    return lm_head(ln_f(h1(h0(wte(ids) + wpe(pos)))));
  }
};
TORCH_MODULE(GPT);

// ---- training steps: each returns its loss ----

// ---- a user's models (bench/user_models.h's in torch::nn) ----

using torch::nn::Conv2dOptions;

// vgg: x [N, 3, 32, 32] -> logits [N, 10]
struct VggImpl : torch::nn::Module {
  torch::nn::Conv2d c1{Conv2dOptions(3, 32, 3).padding(1)}, c2{Conv2dOptions(32, 32, 3).padding(1)},
      c3{Conv2dOptions(32, 64, 3).padding(1)}, c4{Conv2dOptions(64, 64, 3).padding(1)},
      c5{Conv2dOptions(64, 128, 3).padding(1)};
  torch::nn::BatchNorm2d b1{32}, b2{32}, b3{64}, b4{64}, b5{128};
  torch::nn::Dropout drop{0.5};
  torch::nn::Linear fc1{128 * 4 * 4, 256}, fc2{256, 10};
  VggImpl() {
    register_module("c1", c1), register_module("b1", b1), register_module("c2", c2);
    register_module("b2", b2), register_module("c3", c3), register_module("b3", b3);
    register_module("c4", c4), register_module("b4", b4), register_module("c5", c5);
    register_module("b5", b5), register_module("fc1", fc1), register_module("fc2", fc2);
  }
  torch::Tensor forward(const torch::Tensor& x) {
    auto h = torch::max_pool2d(torch::relu(b2(c2(torch::relu(b1(c1(x)))))), 2);
    h = torch::max_pool2d(torch::relu(b4(c4(torch::relu(b3(c3(h)))))), 2);
    h = torch::max_pool2d(torch::relu(b5(c5(h))), 2);
    return fc2(drop(torch::relu(fc1(h.flatten(1)))));
  }
};
TORCH_MODULE(Vgg);

// mobilenet: depthwise-separable blocks, x [N, 3, 32, 32] -> logits [N, 10]
struct MobileNetImpl : torch::nn::Module {
  static Conv2dOptions depthwise(int64_t c, int64_t stride) {
    return Conv2dOptions(c, c, 3).stride(stride).padding(1).groups(c).bias(false);
  }
  static Conv2dOptions pointwise(int64_t c, int64_t oc) {
    return Conv2dOptions(c, oc, 1).bias(false);
  }
  torch::nn::Conv2d c0{Conv2dOptions(3, 32, 3).stride(2).padding(1).bias(false)},
      d1{depthwise(32, 1)}, p1{pointwise(32, 64)}, d2{depthwise(64, 2)}, p2{pointwise(64, 128)},
      d3{depthwise(128, 1)}, p3{pointwise(128, 128)};
  torch::nn::BatchNorm2d b0{32}, b1{32}, b2{64}, b3{64}, b4{128}, b5{128}, b6{128};
  torch::nn::Linear fc{128, 10};
  MobileNetImpl() {
    register_module("c0", c0), register_module("b0", b0), register_module("d1", d1);
    register_module("b1", b1), register_module("p1", p1), register_module("b2", b2);
    register_module("d2", d2), register_module("b3", b3), register_module("p2", p2);
    register_module("b4", b4), register_module("d3", d3), register_module("b5", b5);
    register_module("p3", p3), register_module("b6", b6), register_module("fc", fc);
  }
  static torch::Tensor relu6(const torch::Tensor& x) { return torch::hardtanh(x, 0, 6); }
  torch::Tensor forward(const torch::Tensor& x) {
    auto h = relu6(b0(c0(x)));
    h = relu6(b2(p1(relu6(b1(d1(h))))));
    h = relu6(b4(p2(relu6(b3(d2(h))))));
    h = relu6(b6(p3(relu6(b5(d3(h))))));
    return fc(h.mean({2, 3}));
  }
};
TORCH_MODULE(MobileNet);

// unet: x [N, 3, 32, 32] -> [N, 3, 32, 32]
struct UNetImpl : torch::nn::Module {
  torch::nn::Conv2d in{Conv2dOptions(3, 32, 3).padding(1)},
      down{Conv2dOptions(32, 64, 3).padding(1)}, mid{Conv2dOptions(64, 64, 3).padding(1)},
      up{Conv2dOptions(64 + 32, 32, 3).padding(1)}, out{Conv2dOptions(32, 3, 1)};
  torch::nn::GroupNorm g1{8, 32}, g2{8, 64}, g3{8, 64}, g4{8, 32};
  UNetImpl() {
    register_module("in", in), register_module("g1", g1), register_module("down", down);
    register_module("g2", g2), register_module("mid", mid), register_module("g3", g3);
    register_module("up", up), register_module("g4", g4), register_module("out", out);
  }
  torch::Tensor forward(const torch::Tensor& x) {
    auto a = torch::silu(g1(in(x)));
    auto b = torch::silu(g3(mid(torch::silu(g2(down(torch::avg_pool2d(a, 2)))))));
    auto b2 = torch::upsample_nearest2d(b, std::vector<int64_t>{2 * b.size(2), 2 * b.size(3)});
    return out(torch::silu(g4(up(torch::cat({b2, a}, 1)))));
  }
};
TORCH_MODULE(UNet);

// encoder: ids [B, 128] -> logits [B, 2]; libtorch 1.13's attention takes [T, B, E]
struct EncoderLayerImpl : torch::nn::Module {
  torch::nn::MultiheadAttention attn{torch::nn::MultiheadAttentionOptions(128, 4)};
  torch::nn::LayerNorm ln1{torch::nn::LayerNormOptions({128})},
      ln2{torch::nn::LayerNormOptions({128})};
  torch::nn::Linear fc1{128, 512}, fc2{512, 128};
  EncoderLayerImpl() {
    register_module("ln1", ln1), register_module("attn", attn), register_module("ln2", ln2);
    register_module("fc1", fc1), register_module("fc2", fc2);
  }
  torch::Tensor forward(const torch::Tensor& x) {  // [B, T, 128]
    auto h = ln1(x).transpose(0, 1);
    auto y =
        x + std::get<0>(attn(h, h, h, torch::Tensor(), /*need_weights=*/false)).transpose(0, 1);
    return y + fc2(torch::gelu(fc1(ln2(y))));
  }
};
TORCH_MODULE(EncoderLayer);
struct EncoderImpl : torch::nn::Module {
  torch::nn::Embedding embed{1000, 128};
  EncoderLayer l0, l1;
  torch::nn::Linear head{128, 2};
  EncoderImpl() {
    register_module("embed", embed), register_module("l0", l0), register_module("l1", l1);
    register_module("head", head);
  }
  torch::Tensor forward(const torch::Tensor& ids) { return head(l1(l0(embed(ids))).mean({1})); }
};
TORCH_MODULE(Encoder);

// gru: ids [B, 64] -> logits [B, 4] from the last hidden state
struct GruClassifierImpl : torch::nn::Module {
  torch::nn::Embedding embed{5000, 64};
  torch::nn::GRU gru{torch::nn::GRUOptions(64, 128).batch_first(true)};
  torch::nn::Linear head{128, 4};
  GruClassifierImpl() {
    register_module("embed", embed), register_module("gru", gru), register_module("head", head);
  }
  torch::Tensor forward(const torch::Tensor& ids) {
    auto h = std::get<1>(gru(embed(ids)));  // [1, B, 128]
    return head(h.reshape({h.size(1), -1}));
  }
};
TORCH_MODULE(GruClassifier);

using Step = std::function<torch::Tensor()>;

// "# parameters N": the twin's trained parameters, to check against minidl's count.
void print_parameters(const std::vector<torch::Tensor>& params) {
  int64_t count = 0;
  for (const auto& p : params) count += p.numel();
  std::printf("# parameters %lld\n", static_cast<long long>(count));
}

// loss(net(x), labels); backward; [clip_grad_norm_(1.0)]; step
template <class Net, class Optimizer, class Loss>
Step supervised_step(Net net, std::shared_ptr<Optimizer> opt, torch::Tensor x, torch::Tensor labels,
                     Loss loss_fn, bool clip) {
  return [=]() mutable {
    auto loss = loss_fn(net->forward(x), labels);
    opt->zero_grad();
    loss.backward();
    if (clip) torch::nn::utils::clip_grad_norm_(net->parameters(), /*max_norm=*/1.0);
    opt->step();
    return loss;
  };
}

torch::Tensor lm_loss(const torch::Tensor& logits, const torch::Tensor& targets) {
  return torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}),
                                              targets.reshape({-1}));
}

// dcgan_mnist's step on fixed noise and targets: the discriminator on real
// and fake images, then the generator; Adam lr 2e-4, betas (0.5, 0.999).
Step dcgan_step(int64_t n) {
  Generator g(64);
  Discriminator d(64);
  auto options = torch::optim::AdamOptions(2e-4).betas({0.5, 0.999});
  auto g_opt = std::make_shared<torch::optim::Adam>(g->parameters(), options);
  auto d_opt = std::make_shared<torch::optim::Adam>(d->parameters(), options);
  auto both = g->parameters();
  for (const auto& p : d->parameters()) both.push_back(p);
  print_parameters(both);
  auto real = torch::rand({n, 1, 28, 28}) * 2 - 1, noise = torch::randn({n, 100, 1, 1});
  auto real_target = torch::rand({n}) * 0.2 + 0.8, zeros = torch::zeros({n}),
       ones = torch::ones({n});
  return [=]() mutable {
    auto fake = g->forward(noise);
    auto d_loss = torch::binary_cross_entropy(d->forward(real), real_target) +
                  torch::binary_cross_entropy(d->forward(fake.detach()), zeros);
    d_opt->zero_grad();
    d_loss.backward();
    d_opt->step();
    auto g_loss = torch::binary_cross_entropy(d->forward(fake), ones);
    g_opt->zero_grad();
    g_loss.backward();
    g_opt->step();
    return d_loss;
  };
}

// tiny_gpt's AdamW: lr 3e-3, betas (0.9, 0.95), weight decay 0.1 on the 2-D
// parameters, none on the others.
std::shared_ptr<torch::optim::AdamW> gpt_optimizer(GPT& net) {
  print_parameters(net->parameters());
  std::vector<torch::Tensor> decay, no_decay;
  for (const auto& p : net->parameters()) (p.dim() >= 2 ? decay : no_decay).push_back(p);
  auto options = [](double wd) {
    return torch::optim::AdamWOptions(3e-3).betas({0.9, 0.95}).weight_decay(wd);
  };
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, std::make_unique<torch::optim::AdamWOptions>(options(0.1)));
  groups.emplace_back(no_decay, std::make_unique<torch::optim::AdamWOptions>(options(0.0)));
  return std::make_shared<torch::optim::AdamW>(groups, options(0.1));
}

// The model's step on one fixed random batch of `batch`.
Step make_step(const std::string& model, int64_t batch) {
  auto images = [&] { return torch::randn({batch, 1, 28, 28}); };
  auto classes = [&] { return torch::randint(0, 10, {batch}, torch::kLong); };
  auto text = [&](int64_t seq) { return torch::randint(0, kVocab, {batch, seq}, torch::kLong); };
  auto ce = [](const torch::Tensor& logits, const torch::Tensor& labels) {
    return torch::nn::functional::cross_entropy(logits, labels);
  };
  auto momentum = [](auto& net, double lr, double wd) {
    print_parameters(net->parameters());
    return std::make_shared<torch::optim::SGD>(
        net->parameters(), torch::optim::SGDOptions(lr).momentum(0.9).weight_decay(wd));
  };
  if (model == "lenet") {
    LeNet5 net;
    return supervised_step(net, momentum(net, 0.01, 0), images(), classes(), ce, false);
  }
  if (model == "mlp") {
    Mlp net;
    return supervised_step(net, momentum(net, 0.01, 0), torch::randn({batch, 784}), classes(), ce,
                           false);
  }
  if (model == "resnet") {
    ResNet8 net;
    return supervised_step(net, momentum(net, 0.05, 5e-4), images(), classes(), ce, false);
  }
  if (model == "dcgan") return dcgan_step(batch);
  if (model == "char_lstm") {
    CharLSTM net;
    print_parameters(net->parameters());
    auto opt =
        std::make_shared<torch::optim::Adam>(net->parameters(), torch::optim::AdamOptions(3e-3));
    return supervised_step(net, opt, text(35), text(35), lm_loss, true);
  }
  if (model == "tiny_gpt") {
    GPT net;
    return supervised_step(net, gpt_optimizer(net), text(64), text(64), lm_loss, true);
  }
  // a user's models (user_models.h's make_user_workload)
  auto adam = [](auto& net, double lr) {
    print_parameters(net->parameters());
    return std::make_shared<torch::optim::Adam>(net->parameters(), torch::optim::AdamOptions(lr));
  };
  auto labels = [&](int64_t k) { return torch::randint(0, k, {batch}, torch::kLong); };
  auto cifar = [&] { return torch::randn({batch, 3, 32, 32}); };
  if (model == "vgg") {
    Vgg net;
    return supervised_step(net, momentum(net, 0.01, 0), cifar(), labels(10), ce, false);
  }
  if (model == "mobilenet") {
    MobileNet net;
    return supervised_step(net, momentum(net, 0.01, 0), cifar(), labels(10), ce, false);
  }
  if (model == "unet") {
    UNet net;
    auto mse = [](const torch::Tensor& y, const torch::Tensor& x) { return torch::mse_loss(y, x); };
    const torch::Tensor x = cifar();  // the target is the input
    return supervised_step(net, adam(net, 1e-3), x, x, mse, false);
  }
  if (model == "encoder") {
    Encoder net;
    print_parameters(net->parameters());
    auto opt =
        std::make_shared<torch::optim::AdamW>(net->parameters(), torch::optim::AdamWOptions(1e-3));
    return supervised_step(net, opt, torch::randint(0, 1000, {batch, 128}, torch::kLong), labels(2),
                           ce, false);
  }
  GruClassifier net;  // gru
  return supervised_step(net, adam(net, 1e-3), torch::randint(0, 5000, {batch, 64}, torch::kLong),
                         labels(4), ce, false);
}

struct Result {
  double samples_per_s, first_loss, last_loss;
};

Result train(const Step& step, int64_t batch, long warmup, long steps) {
  Result r{0, step().item<double>(), 0};
  for (long i = 1; i < warmup; ++i) step();
  // Timed steps in about ten chunks; the median chunk rate resists the odd
  // slow chunk on a shared machine.
  const long chunk = std::max(1L, steps / 10);
  std::vector<double> rates;
  torch::Tensor loss;
  for (long done = 0; done < steps;) {
    const long n = std::min(chunk, steps - done);
    const auto t0 = bench::Clock::now();
    for (long i = 0; i < n; ++i) loss = step();
    rates.push_back(n * static_cast<double>(batch) / bench::seconds_since(t0));
    done += n;
  }
  r.samples_per_s = bench::median(rates);
  r.last_loss = loss.defined() ? loss.item<double>() : r.first_loss;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  bench::reexec_with_env_default(argv, "OPENBLAS_NUM_THREADS", "1");
  const std::string usage = std::string("[--model ") + bench::kTrainModelNames +
                            "] [--batch B] [--steps N] [--warmup W] [--threads T|auto]";
  bench::Flags flags(
      argc, argv,
      {{"model", "lenet"}, {"batch", "0"}, {"steps", "0"}, {"warmup", "0"}, {"threads", "1"}},
      usage.c_str());
  const std::string model = flags.str("model");
  if (!bench::kTrainModels.count(model)) {
    std::fprintf(stderr, "--model: expected %s, got '%s'\n", bench::kTrainModelNames,
                 model.c_str());
    return 2;
  }
  const bench::TrainModel defaults = bench::kTrainModels.at(model);
  auto or_default = [&](const char* flag, long fallback) {
    return flags.integer(flag) == 0 ? fallback : flags.integer(flag);
  };
  const long batch = or_default("batch", defaults.batch),
             steps = or_default("steps", defaults.steps);
  const long warmup = or_default("warmup", defaults.warmup);
  const int threads = bench::threads_flag(flags);  // 0: libtorch's default
  if (batch < 1 || steps < 1 || warmup < 1) {
    std::fprintf(stderr, "--batch, --steps and --warmup must be >= 1, got %ld, %ld, %ld\n", batch,
                 steps, warmup);
    return 2;
  }
  torch::manual_seed(0);
  if (threads > 0) torch::set_num_threads(threads);
  const char* blas_threads = std::getenv("OPENBLAS_NUM_THREADS");
  std::printf("# libtorch %s model=%s batch=%ld steps=%ld warmup=%ld threads=%d%s "
              "OPENBLAS_NUM_THREADS=%s\n", TORCH_VERSION, model.c_str(), batch, steps, warmup,
              torch::get_num_threads(), threads > 0 ? "" : " (its default)",
              blas_threads ? blas_threads : "unset");
  bench::print_load_note();

  const Step step = make_step(model, batch);
  const Result r = train(step, batch, warmup, steps);
  std::printf("# loss first=%.4f last=%.4f\n", r.first_loss, r.last_loss);
  std::printf("%s=%.1f\n", defaults.unit, r.samples_per_s);
  std::printf("peak_rss_mb=%.1f\n", bench::peak_rss_mb());
  return 0;
}
