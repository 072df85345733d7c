// Layers: hand-computed forwards, gradient checks of inputs and parameters,
// option handling and errors.
#include <doctest/doctest.h>
#include <minidl/minidl.h>

#include <array>
#include <cmath>

#include "cell_gradcheck.h"
#include "check_close.h"
#include "gradcheck.h"

using namespace minidl;
using testing::cell_param_gradcheck;
using testing::check_close;
using testing::gradcheck;

// ---- Dense ----
TEST_CASE("Dense forward equals x W^T + b by hand") {
  nn::Dense fc{2,
               3,
               {.weight_init = Tensor::of({1, 0, 0, 1, 1, 1}, {3, 2}),
                .bias_init = Tensor::of({0.5, -0.5, 1})}};
  CHECK(fc.weight.shape() == Shape{3, 2});
  // x = [[1, 2], [3, 4]]: row 0 -> [1 + .5, 2 - .5, 1 + 2 + 1] = [1.5, 1.5, 4]
  //                       row 1 -> [3 + .5, 4 - .5, 3 + 4 + 1] = [3.5, 3.5, 8]
  Tensor y = fc(Tensor::of({1, 2, 3, 4}, {2, 2}));
  CHECK(y.shape() == Shape{2, 3});
  check_close(y, {1.5, 1.5, 4, 3.5, 3.5, 8});
  // Leading dims are kept: [2, 1, 2] -> [2, 1, 3]; one sample [2] -> [3].
  Tensor y3 = fc(Tensor::of({1, 2, 3, 4}, {2, 1, 2}));
  CHECK(y3.shape() == Shape{2, 1, 3});
  check_close(y3, {1.5, 1.5, 4, 3.5, 3.5, 8});
  check_close(fc(Tensor::of({1, 2})), {1.5, 1.5, 4});
}

TEST_CASE("Dense options: no bias, activation by name and by function") {
  nn::Dense nobias{2, 2, {.weight_init = "ones", .has_bias = false}};
  CHECK(!nobias.bias.defined());
  CHECK(nobias.named_parameters().keys() == std::vector<std::string>{"weight"});
  check_close(nobias(Tensor::of({1, -3}, {1, 2})), {-2, -2});

  nn::Dense relu_fc{2,
                    2,
                    {.weight_init = Tensor::of({1, 0, 0, 1}, {2, 2}),
                     .bias_init = "zeros",
                     .activation = "relu"}};
  check_close(relu_fc(Tensor::of({1, -3}, {1, 2})), {1, 0});
  nn::Dense twice{
      1, 1, {.weight_init = "ones", .bias_init = "zeros", .activation = [](const Tensor& x) {
               return x * 2.0;
             }}};
  check_close(twice(Tensor::of({3}, {1, 1})), {6});
  CHECK_THROWS_WITH_AS(nn::Dense(2, 2, {.activation = "mish"}),
                       doctest::Contains("unknown activation 'mish'"), Error);
}

TEST_CASE("Dense gradients match finite differences") {
  manual_seed(7);
  nn::Dense fc{4, 3, {.activation = "tanh"}};
  Tensor x = Tensor::randn({5, 4});
  CHECK_GRADCHECK_RESULT(gradcheck([&](const std::vector<Tensor>& in) { return fc(in[0]); }, {x}));
  CHECK_GRADCHECK_RESULT(cell_param_gradcheck(fc, [&] { return fc(x); }));
}

TEST_CASE("Dense rejects a wrong input width with both shapes") {
  nn::Dense fc{400, 120};
  CHECK_THROWS_WITH_AS(fc(Tensor::zeros({2, 10})),
                       doctest::Contains("Dense(400, 120): expected input [N, 400], got [2, 10]"),
                       Error);
  CHECK_THROWS_AS(nn::Dense(0, 3), Error);
}

// ---- MatMul ----
TEST_CASE("MatMul multiplies two inputs, optionally transposed") {
  nn::MatMul mm;
  Tensor a = Tensor::of({1, 2, 3, 4}, {2, 2}), b = Tensor::of({5, 6, 7, 8}, {2, 2});
  // [[1*5 + 2*7, 1*6 + 2*8], [3*5 + 4*7, 3*6 + 4*8]]
  check_close(mm(a, b), {19, 22, 43, 50});
  nn::MatMul mm_bt{false, true};
  // a b^T = [[1*5 + 2*6, 1*7 + 2*8], [3*5 + 4*6, 3*7 + 4*8]]
  check_close(mm_bt(a, b), {17, 23, 39, 53});
  CHECK_THROWS_WITH_AS(mm(a), doctest::Contains("forward(x) is not implemented"), Error);
  Tensor x = Tensor::randn({3, 4}), y = Tensor::randn({4, 2});
  CHECK_GRADCHECK_RESULT(
      gradcheck([&](const std::vector<Tensor>& in) { return mm(in[0], in[1]); }, {x, y}));
}

// ---- initializers ----
TEST_CASE("default Dense and Conv2d init is PyTorch's U(-1/sqrt(fan_in), 1/sqrt(fan_in))") {
  manual_seed(0);
  auto check_uniform = [](const Tensor& t, double bound) {
    auto v = t.to_float_vector();
    double sum = 0, sq = 0, lo = 1e9, hi = -1e9;
    for (float f : v) {
      sum += f;
      sq += double(f) * f;
      lo = std::min<double>(lo, f);
      hi = std::max<double>(hi, f);
    }
    const double n = double(v.size()), mean = sum / n, sd = std::sqrt(sq / n - mean * mean);
    INFO("bound " << bound << " min " << lo << " max " << hi << " std " << sd);
    CHECK(lo >= -bound);
    CHECK(hi <= bound);
    CHECK(hi > 0.95 * bound);  // the whole interval is used
    CHECK(lo < -0.95 * bound);
    CHECK(sd == doctest::Approx(bound / std::sqrt(3.0)).epsilon(0.05));  // U(-b, b): std b/sqrt(3)
  };
  nn::Dense fc{400, 120};
  check_uniform(fc.weight, 1 / std::sqrt(400.0));
  CHECK(fc.bias.shape() == Shape{120});
  for (float b : fc.bias.to_float_vector()) CHECK(std::abs(b) <= 1 / std::sqrt(400.0));
  nn::Conv2d conv{6, 16, 5};  // fan_in = 6 * 5 * 5 = 150
  check_uniform(conv.weight, 1 / std::sqrt(150.0));
  for (float b : conv.bias.to_float_vector()) CHECK(std::abs(b) <= 1 / std::sqrt(150.0));
}

TEST_CASE("named initializers and their statistics") {
  manual_seed(5);
  auto stats = [](const Tensor& t) {
    auto v = t.to_float_vector();
    double sum = 0, sq = 0, amax = 0;
    for (float f : v) {
      sum += f;
      sq += double(f) * f;
      amax = std::max<double>(amax, std::abs(f));
    }
    const double n = double(v.size()), mean = sum / n;
    return std::array<double, 3>{mean, std::sqrt(sq / n - mean * mean), amax};
  };
  Tensor t = Tensor::empty({100, 200});  // fan_in 200, fan_out 100
  const nn::init::Fans fans = nn::init::fans_of(t.shape());
  CHECK(fans.in == 200);
  CHECK(fans.out == 100);
  CHECK(nn::init::fans_of({16, 6, 5, 5}).in == 150);
  CHECK(nn::init::fans_of({16, 6, 5, 5}).out == 400);

  nn::Initializer("zeros")(t, fans);
  CHECK(stats(t)[2] == 0);
  nn::Initializer("ones")(t, fans);
  CHECK(stats(t)[0] == 1);
  nn::Initializer("normal")(t, fans);   // N(0, 0.01^2)
  CHECK(std::abs(stats(t)[0]) < 5e-4);  // standard error of the mean is 7e-5
  CHECK(stats(t)[1] == doctest::Approx(0.01).epsilon(0.02));
  nn::Initializer(nn::init::normal(2.0, 3.0))(t, fans);
  CHECK(stats(t)[0] == doctest::Approx(3).epsilon(0.01));
  CHECK(stats(t)[1] == doctest::Approx(2).epsilon(0.02));
  nn::Initializer(nn::init::uniform(1, 3))(t, fans);  // mean 2, std 2/sqrt(12)
  for (float f : t.to_float_vector()) REQUIRE((f >= 1 && f <= 3));
  CHECK(stats(t)[1] == doctest::Approx(2 / std::sqrt(12.0)).epsilon(0.02));
  nn::Initializer("xavier_uniform")(t, fans);  // bound sqrt(6 / 300)
  CHECK(stats(t)[2] <= std::sqrt(6.0 / 300));
  CHECK(stats(t)[1] == doctest::Approx(std::sqrt(6.0 / 300) / std::sqrt(3.0)).epsilon(0.02));
  nn::Initializer("xavier_normal")(t, fans);  // std sqrt(2 / 300)
  CHECK(stats(t)[1] == doctest::Approx(std::sqrt(2.0 / 300)).epsilon(0.02));
  nn::Initializer("he_uniform")(t, fans);  // a = sqrt(5): bound 1/sqrt(200)
  CHECK(stats(t)[2] <= 1 / std::sqrt(200.0));
  CHECK(stats(t)[2] > 0.99 / std::sqrt(200.0));
  nn::Initializer(nn::init::he_uniform(0))(t, fans);  // bound sqrt(6 / 200)
  CHECK(stats(t)[2] <= std::sqrt(6.0 / 200));
  CHECK(stats(t)[2] > 0.99 * std::sqrt(6.0 / 200));
  nn::Initializer("he_normal")(t, fans);  // std sqrt(2 / 200)
  CHECK(stats(t)[1] == doctest::Approx(0.1).epsilon(0.02));
  nn::Initializer("uniform")(t, fans);  // U(-0.07, 0.07)
  CHECK(stats(t)[2] <= 0.07);
  CHECK(stats(t)[2] > 0.069);

  CHECK_THROWS_WITH_AS(nn::Initializer("glorot"),
                       doctest::Contains("unknown initializer 'glorot' (known: fan_in_uniform"),
                       Error);
}

TEST_CASE("initializers as functions, and seeded reproducibility") {
  nn::Dense custom{2,
                   2,
                   {.weight_init = [](Tensor& w) { w.fill_(0.25); },
                    .bias_init = [](Tensor& b, nn::init::Fans f) { b.fill_(double(f.in)); }}};
  CHECK(custom.weight.to_float_vector() == std::vector<float>(4, 0.25f));
  CHECK(custom.bias.to_float_vector() == std::vector<float>{2, 2});  // the weight's fan_in
  CHECK_THROWS_WITH_AS(nn::Dense(2, 2, {.weight_init = Tensor::ones({3})}),
                       doctest::Contains("do not fit a parameter of shape [2, 2]"), Error);
  manual_seed(42);
  nn::Dense a{8, 8};
  manual_seed(42);
  nn::Dense b{8, 8};
  CHECK(a.weight.to_float_vector() == b.weight.to_float_vector());
  CHECK(a.bias.to_float_vector() == b.bias.to_float_vector());
}

// ---- Conv2d ----
TEST_CASE("Conv2d forward by hand, and its padding modes") {
  // x = 1..9 as [1, 1, 3, 3]; a 2x2 kernel of ones sums each window, bias 1.
  nn::Conv2d conv{1, 1, 2, {.weight_init = "ones", .bias_init = "ones"}};
  Tensor x = Tensor::of({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 1, 3, 3});
  // windows: 1+2+4+5=12, 2+3+5+6=16, 4+5+7+8=24, 5+6+8+9=28, each + 1
  Tensor y = conv(x);
  CHECK(y.shape() == Shape{1, 1, 2, 2});
  check_close(y, {13, 17, 25, 29});

  // padding 1, stride 2 on the same input: output 2x2 over the padded 5x5
  nn::Conv2d strided{
      1, 1, 2, {.stride = 2, .padding = 1, .has_bias = false, .weight_init = "ones"}};
  // windows at rows/cols {-1,0} and {1,2}: [1], [2+3], [4+7], [5+6+8+9]
  check_close(strided(x), {1, 5, 11, 28});

  nn::Conv2d same{1, 2, 3, {.pad_mode = "same"}};
  CHECK(same.padding == 1);
  CHECK(same(Tensor::randn({2, 1, 5, 5})).shape() == Shape{2, 2, 5, 5});
  nn::Conv2d valid{1, 2, 3, {.pad_mode = "valid"}};
  CHECK(valid(Tensor::randn({2, 1, 5, 5})).shape() == Shape{2, 2, 3, 3});
  nn::Conv2d lenet1{1, 6, 5, {.padding = 2}};
  CHECK(lenet1(Tensor::randn({1, 1, 28, 28})).shape() == Shape{1, 6, 28, 28});

  CHECK_THROWS_WITH_AS(nn::Conv2d(1, 1, 4, {.pad_mode = "same"}),
                       doctest::Contains("pad_mode \"same\" needs stride 1 and an odd kernel"),
                       Error);
  CHECK_THROWS_WITH_AS(nn::Conv2d(1, 1, 3, {.stride = 2, .pad_mode = "same"}),
                       doctest::Contains("got stride 2 and kernel 3"), Error);
  CHECK_THROWS_WITH_AS(nn::Conv2d(1, 1, 3, {.pad_mode = "full"}),
                       doctest::Contains("unknown pad_mode 'full'"), Error);
  CHECK_THROWS_WITH_AS(nn::Conv2d(1, 1, 3, {.padding = 1, .pad_mode = "valid"}),
                       doctest::Contains("padding 1 needs pad_mode \"pad\""), Error);
  CHECK_THROWS_WITH_AS(lenet1(Tensor::zeros({1, 3, 28, 28})),
                       doctest::Contains("expected input [N, 1, H, W], got [1, 3, 28, 28]"), Error);
}

TEST_CASE("Conv2d gradients match finite differences") {
  manual_seed(11);
  nn::Conv2d conv{2, 3, 3, {.stride = 2, .padding = 1}};
  Tensor x = Tensor::randn({2, 2, 5, 5});
  CHECK_GRADCHECK_RESULT(gradcheck([&](const std::vector<Tensor>& in) { return conv(in[0]); }, {x}));
  CHECK_GRADCHECK_RESULT(cell_param_gradcheck(conv, [&] { return conv(x); }));
}

// ---- pooling ----
TEST_CASE("MaxPool2d and AvgPool2d by hand, with gradients") {
  // 4x4 input 0..15 (row-major); 2x2 windows, stride 2
  Tensor x = Tensor::arange(16).reshape({1, 1, 4, 4});
  nn::MaxPool2d maxpool{2};
  nn::AvgPool2d avgpool{2};
  CHECK(maxpool.stride == 2);  // stride defaults to the kernel
  check_close(maxpool(x), {5, 7, 13, 15});
  // means: (0+1+4+5)/4 = 2.5, (2+3+6+7)/4 = 4.5, 10.5, 12.5
  check_close(avgpool(x), {2.5, 4.5, 10.5, 12.5});
  // overlapping 3x3 windows with stride 1: maxima 10, 11, 14, 15
  check_close(nn::MaxPool2d(3, 1)(x), {10, 11, 14, 15});
  Tensor r = Tensor::randn({2, 2, 4, 4});
  CHECK_GRADCHECK_RESULT(
      gradcheck([&](const std::vector<Tensor>& in) { return maxpool(in[0]); }, {r}, {.eps = 1e-3}));
  CHECK_GRADCHECK_RESULT(gradcheck([&](const std::vector<Tensor>& in) { return avgpool(in[0]); }, {r}));
  CHECK_THROWS_AS(nn::MaxPool2d(0), Error);
  CHECK_THROWS_AS(nn::AvgPool2d(2, 1, 2), Error);
}

// ---- activations ----
TEST_CASE("ReLU, Sigmoid, Tanh and Softmax by hand, with gradients") {
  Tensor x = Tensor::of({-1, 0, 2}, {1, 3});
  check_close(nn::ReLU()(x), {0, 0, 2});
  check_close(nn::Sigmoid()(x),
              {float(1 / (1 + std::exp(1.0))), 0.5f, float(1 / (1 + std::exp(-2.0)))});
  check_close(nn::Tanh()(x), {float(std::tanh(-1.0)), 0, float(std::tanh(2.0))});
  // softmax([-1, 0, 2]) = e^x / (e^-1 + 1 + e^2)
  const double z = std::exp(-1.0) + 1 + std::exp(2.0);
  check_close(nn::Softmax()(x),
              {float(std::exp(-1.0) / z), float(1 / z), float(std::exp(2.0) / z)});
  // along dim 0 of [2, 1]: each column sums to one
  check_close(nn::Softmax(0)(Tensor::of({0, 0}, {2, 1})), {0.5, 0.5});

  Tensor r = Tensor::of({-1.3f, 0.4f, 2.1f, -0.2f, 0.9f, -2.2f}, {2, 3});
  nn::ReLU relu_cell;
  nn::Sigmoid sigmoid_cell;
  nn::Tanh tanh_cell;
  nn::Softmax softmax_cell{1};
  for (nn::Cell* c : std::vector<nn::Cell*>{&relu_cell, &sigmoid_cell, &tanh_cell, &softmax_cell}) {
    INFO(c->type_name());
    CHECK_GRADCHECK_RESULT(gradcheck([&](const std::vector<Tensor>& in) { return (*c)(in[0]); }, {r}));
  }
}

// ---- Flatten, Dropout ----
TEST_CASE("Flatten keeps the batch dim and shares storage") {
  Tensor x = Tensor::arange(24).reshape({2, 3, 2, 2});
  Tensor y = nn::Flatten()(x);
  CHECK(y.shape() == Shape{2, 12});
  CHECK(y.to_float_vector() == x.to_float_vector());
  CHECK(nn::Flatten(2)(x).shape() == Shape{2, 3, 4});
  CHECK_GRADCHECK_RESULT(gradcheck([](const std::vector<Tensor>& in) { return nn::Flatten()(in[0]); },
                            {Tensor::randn({2, 2, 3})}));
}

TEST_CASE("Dropout: scaled mask in training, identity in eval") {
  manual_seed(3);
  nn::Dropout drop{0.25};
  Tensor x = Tensor::ones({100, 100}).requires_grad_();
  Tensor y = drop(x);
  int64_t zeros = 0;
  for (float v : y.to_float_vector()) {
    if (v == 0)
      ++zeros;
    else
      REQUIRE(v == doctest::Approx(1 / 0.75));  // kept values scaled by 1 / (1 - p)
  }
  CHECK(double(zeros) / 1e4 == doctest::Approx(0.25).epsilon(0.08));
  // dy/dx is the same scaled mask: for x = 1 it equals y.
  y.sum().backward();
  CHECK(x.grad().to_float_vector() == y.to_float_vector());
  drop.eval();
  Tensor z = drop(x);
  CHECK(z.to_float_vector() == x.to_float_vector());
  CHECK(nn::Dropout(0)(x).same(x));
  CHECK_THROWS_WITH_AS(nn::Dropout(1.0), doctest::Contains("0 <= p < 1, got 1"), Error);
  CHECK_THROWS_AS(nn::Dropout(-0.1), Error);
}

// ---- containers ----
TEST_CASE("SequentialCell chains owned cells named 0, 1, ...") {
  manual_seed(9);
  nn::SequentialCell mlp{std::make_shared<nn::Dense>(4, 8), std::make_shared<nn::ReLU>(),
                         std::make_shared<nn::Dense>(8, 2)};
  mlp.push_back(std::make_shared<nn::Softmax>());
  CHECK(mlp.size() == 4);
  CHECK(mlp.named_parameters().keys() ==
        std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"});
  Tensor x = Tensor::randn({3, 4});
  Tensor manual = mlp[3](mlp[2](mlp[1](mlp[0](x))));
  CHECK(mlp(x).to_float_vector() == manual.to_float_vector());
  CHECK_GRADCHECK_RESULT(cell_param_gradcheck(mlp, [&] { return mlp(x); }));
  CHECK_THROWS_WITH_AS(mlp[4], doctest::Contains("index 4 out of range for 4 cells"), Error);
  CHECK_THROWS_AS(mlp.push_back(nullptr), Error);
  mlp.eval();
  CHECK(!mlp[0].is_training());
}

TEST_CASE("WithLossCell returns the loss of the network's output") {
  manual_seed(4);
  nn::Dense net{3, 2};
  nn::MSELoss mse;
  nn::WithLossCell with_loss{net, mse};
  Tensor x = Tensor::randn({4, 3}), target = Tensor::randn({4, 2});
  Tensor loss = with_loss(x, target);
  CHECK(loss.shape() == Shape{});
  CHECK(loss.item() == doctest::Approx(mse(net(x), target).item()));
  CHECK(with_loss.named_parameters().keys() ==
        std::vector<std::string>{"network.weight", "network.bias"});
  loss.backward();
  CHECK(net.weight.grad().defined());
  CHECK_THROWS_AS(with_loss(x), Error);

  auto owned = nn::WithLossCell(std::make_shared<nn::Dense>(3, 2), std::make_shared<nn::MSELoss>());
  CHECK(owned(x, target).shape() == Shape{});
}
