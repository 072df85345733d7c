// Models a user might bring, beyond the examples' zoo (zoo_models.h): five
// everyday shapes written the way their PyTorch versions read, each trained
// on one fixed random batch by bench_train (bench_train_torch.cpp builds the
// same models in torch::nn). They cover layers the zoo does not use: max
// pooling and dropout (vgg), depthwise convolutions and ReLU6 (mobilenet),
// GroupNorm, SiLU, average pooling, upsampling and concatenation (unet),
// nn::MultiheadAttention (encoder), GRU (gru).
//
//   auto w = zoo::make_user_workload("vgg", /*batch=*/64, Device::CPU);
//   Tensor loss = w->step();
#pragma once
#include <memory>
#include <string>

#include "zoo_models.h"

namespace zoo {

// vgg: CIFAR-size images x [N, 3, 32, 32] -> logits [N, 10]
struct Vgg : nn::Cell {
  nn::Conv2d c1{3, 32, 3, {.padding = 1}}, c2{32, 32, 3, {.padding = 1}},
      c3{32, 64, 3, {.padding = 1}}, c4{64, 64, 3, {.padding = 1}}, c5{64, 128, 3, {.padding = 1}};
  nn::BatchNorm2d b1{32}, b2{32}, b3{64}, b4{64}, b5{128};
  nn::MaxPool2d pool{2};
  nn::Dropout drop{0.5};
  nn::Dense fc1{128 * 4 * 4, 256}, fc2{256, 10};
  Vgg() {
    register_cells({{"c1", c1},
                    {"b1", b1},
                    {"c2", c2},
                    {"b2", b2},
                    {"c3", c3},
                    {"b3", b3},
                    {"c4", c4},
                    {"b4", b4},
                    {"c5", c5},
                    {"b5", b5},
                    {"fc1", fc1},
                    {"fc2", fc2}});
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = pool(relu(b2(c2(relu(b1(c1(x)))))));  // [N, 32, 16, 16]
    h = pool(relu(b4(c4(relu(b3(c3(h)))))));         // [N, 64, 8, 8]
    h = pool(relu(b5(c5(h))));                       // [N, 128, 4, 4]
    return fc2(drop(relu(fc1(h.reshape({h.size(0), -1})))));
  }
};

// mobilenet: depthwise-separable blocks, x [N, 3, 32, 32] -> logits [N, 10]
struct MobileNet : nn::Cell {
  static nn::Conv2dOptions depthwise(int64_t c, int64_t stride) {
    return {.stride = stride, .padding = 1, .groups = c, .has_bias = false};
  }
  nn::Conv2d c0{3, 32, 3, {.stride = 2, .padding = 1, .has_bias = false}},
      d1{32, 32, 3, depthwise(32, 1)}, p1{32, 64, 1, {.has_bias = false}},
      d2{64, 64, 3, depthwise(64, 2)}, p2{64, 128, 1, {.has_bias = false}},
      d3{128, 128, 3, depthwise(128, 1)}, p3{128, 128, 1, {.has_bias = false}};
  nn::BatchNorm2d b0{32}, b1{32}, b2{64}, b3{64}, b4{128}, b5{128}, b6{128};
  nn::Dense fc{128, 10};
  MobileNet() {
    register_cells({{"c0", c0},
                    {"b0", b0},
                    {"d1", d1},
                    {"b1", b1},
                    {"p1", p1},
                    {"b2", b2},
                    {"d2", d2},
                    {"b3", b3},
                    {"p2", p2},
                    {"b4", b4},
                    {"d3", d3},
                    {"b5", b5},
                    {"p3", p3},
                    {"b6", b6},
                    {"fc", fc}});
  }
  static Tensor relu6(const Tensor& x) { return hardtanh(x, 0, 6); }
  Tensor forward(const Tensor& x) override {
    Tensor h = relu6(b0(c0(x)));          // [N, 32, 16, 16]
    h = relu6(b2(p1(relu6(b1(d1(h))))));  // [N, 64, 16, 16]
    h = relu6(b4(p2(relu6(b3(d2(h))))));  // [N, 128, 8, 8]
    h = relu6(b6(p3(relu6(b5(d3(h))))));  // [N, 128, 8, 8]
    return fc(mean(h, {2, 3}));
  }
};

// unet: one level down and up, x [N, 3, 32, 32] -> [N, 3, 32, 32]
struct UNet : nn::Cell {
  nn::Conv2d in{3, 32, 3, {.padding = 1}}, down{32, 64, 3, {.padding = 1}},
      mid{64, 64, 3, {.padding = 1}}, up{64 + 32, 32, 3, {.padding = 1}}, out{32, 3, 1};
  nn::GroupNorm g1{8, 32}, g2{8, 64}, g3{8, 64}, g4{8, 32};
  nn::AvgPool2d pool{2};
  nn::Upsample upsample{{.scale_factor = std::array<double, 2>{2, 2}}};
  UNet() {
    register_cells({{"in", in},
                    {"g1", g1},
                    {"down", down},
                    {"g2", g2},
                    {"mid", mid},
                    {"g3", g3},
                    {"up", up},
                    {"g4", g4},
                    {"out", out}});
  }
  Tensor forward(const Tensor& x) override {
    Tensor a = silu(g1(in(x)));                         // [N, 32, 32, 32]
    Tensor b = silu(g3(mid(silu(g2(down(pool(a)))))));  // [N, 64, 16, 16]
    return out(silu(g4(up(cat({upsample(b), a}, 1)))));
  }
};

// encoder: two pre-norm Transformer layers, ids [B, 128] -> logits [B, 2]
struct EncoderLayer : nn::Cell {
  nn::MultiheadAttention attn{128, 4, {.batch_first = true}};
  nn::LayerNorm ln1{128}, ln2{128};
  nn::Dense fc1{128, 512}, fc2{512, 128};
  EncoderLayer() {
    register_cells({{"ln1", ln1}, {"attn", attn}, {"ln2", ln2}, {"fc1", fc1}, {"fc2", fc2}});
  }
  Tensor forward(const Tensor& x) override {  // x [B, T, 128] -> [B, T, 128]
    Tensor h = ln1(x);
    Tensor y = x + std::get<0>(attn(h, h, h, {}, /*need_weights=*/false));
    return y + fc2(gelu(fc1(ln2(y))));
  }
};
struct Encoder : nn::Cell {
  nn::Embedding embed{1000, 128};
  EncoderLayer l0, l1;
  nn::Dense head{128, 2};
  Encoder() { register_cells({{"embed", embed}, {"l0", l0}, {"l1", l1}, {"head", head}}); }
  Tensor forward(const Tensor& ids) override { return head(mean(l1(l0(embed(ids))), {1})); }
};

// gru: a text classifier, ids [B, 64] -> logits [B, 4] from the last hidden state
struct GruClassifier : nn::Cell {
  nn::Embedding embed{5000, 64};
  nn::GRU gru{64, 128, {.batch_first = true}};
  nn::Dense head{128, 4};
  GruClassifier() { register_cells({{"embed", embed}, {"gru", gru}, {"head", head}}); }
  Tensor forward(const Tensor& ids) override {
    Tensor h = gru(embed(ids)).second;  // [1, B, 128]
    return head(h.reshape({h.size(1), -1}));
  }
};

// One model, its optimizer and a fixed batch: loss(net(x), y), backward, step.
template <class Net, class Opt>
struct UserStep : Workload {
  Net net;
  std::unique_ptr<Opt> opt;
  Tensor x, y;
  bool mse;  // mean squared error against y, else cross entropy on labels y
  UserStep(Tensor x_, Tensor y_, bool mse_, Device d, double lr)
      : x(x_.to(d)), y(y_.to(d)), mse(mse_) {
    net.to(d);
    params = net.trainable_params();
    if constexpr (std::is_same_v<Opt, optim::Momentum>)
      opt = std::make_unique<Opt>(params, lr, /*momentum=*/0.9);
    else
      opt = std::make_unique<Opt>(params, lr);
  }
  Tensor step() override {
    Tensor out = net(x), loss = mse ? mse_loss(out, y) : cross_entropy(out, y);
    opt->zero_grad(set_to_none);
    loss.backward();
    opt->step();
    return loss;
  }
  void feed() override { opt->step(); }
};

// "vgg", "mobilenet" (SGD momentum 0.9, lr 0.01), "unet" (Adam 1e-3, MSE
// against its input), "encoder" (AdamW 1e-3), "gru" (Adam 1e-3); null otherwise.
inline std::unique_ptr<Workload> make_user_workload(const std::string& model, int64_t n, Device d) {
  auto images = [&] { return Tensor::randn({n, 3, 32, 32}); };
  auto labels = [&](int64_t k) { return Tensor::randint(0, k, {n}); };
  if (model == "vgg")
    return std::make_unique<UserStep<Vgg, optim::Momentum>>(images(), labels(10), false, d, 0.01);
  if (model == "mobilenet")
    return std::make_unique<UserStep<MobileNet, optim::Momentum>>(images(), labels(10), false, d,
                                                                  0.01);
  if (model == "unet") {
    Tensor x = images();
    return std::make_unique<UserStep<UNet, optim::Adam>>(x, x, true, d, 1e-3);
  }
  if (model == "encoder")
    return std::make_unique<UserStep<Encoder, optim::AdamW>>(Tensor::randint(0, 1000, {n, 128}),
                                                             labels(2), false, d, 1e-3);
  if (model == "gru")
    return std::make_unique<UserStep<GruClassifier, optim::Adam>>(Tensor::randint(0, 5000, {n, 64}),
                                                                  labels(4), false, d, 1e-3);
  return nullptr;
}

}  // namespace zoo
