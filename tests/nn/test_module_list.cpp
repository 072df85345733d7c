// ModuleList and ModuleDict: order, names that compose into state_dict paths,
// typed access, and errors.
#include <doctest/doctest.h>
#include <minidl/minidl.h>

using namespace minidl;

namespace {
struct Block : nn::Cell {
  nn::LayerNorm norm{4};
  nn::Dense fc{4, 4};
  Block() { register_cells({{"norm", norm}, {"fc", fc}}); }
  Tensor forward(const Tensor& x) override { return x + fc(norm(x)); }
};

struct Net : nn::Cell {
  nn::ModuleList blocks;
  nn::ModuleDict heads;
  Net() {
    for (int i = 0; i < 3; ++i) blocks.push_back(std::make_shared<Block>());
    heads.insert("cls", std::make_shared<nn::Dense>(4, 2));
    heads.insert("reg", std::make_shared<nn::Dense>(4, 1, nn::DenseOptions{.has_bias = false}));
    register_cells({{"blocks", blocks}, {"heads", heads}});
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = x;
    for (auto& b : blocks) h = (*b)(h);
    return heads["cls"](h);
  }
};
}  // namespace

TEST_CASE("ModuleList and ModuleDict names compose into state_dict paths, in order") {
  Net net;
  std::vector<std::string> want;
  for (int i = 0; i < 3; ++i)
    for (const char* p : {"norm.weight", "norm.bias", "fc.weight", "fc.bias"})
      want.push_back(cat("blocks.", i, ".", p));
  for (const char* p : {"heads.cls.weight", "heads.cls.bias", "heads.reg.weight"})
    want.push_back(p);
  CHECK(net.state_dict().keys() == want);
  CHECK(net(Tensor::randn({5, 4})).shape() == Shape{5, 2});
  CHECK(net.blocks.size() == 3);
  CHECK(&net.blocks.at<Block>(1) == net.blocks.begin()[1].get());
  CHECK(net.heads.keys() == std::vector<std::string>{"cls", "reg"});
  CHECK(net.heads.contains("reg"));
  CHECK_FALSE(net.heads.contains("box"));
  CHECK(net.heads.at<nn::Dense>("reg").out_features == 1);
  int n = 0;
  for (const auto& [name, cell] : net.heads) n += cell->parameters().size();
  CHECK(n == 3);
}

TEST_CASE("ModuleList and ModuleDict errors") {
  nn::ModuleList list{std::make_shared<nn::ReLU>()};
  CHECK_THROWS_WITH(list[1], doctest::Contains("ModuleList: index 1 out of range for 1 cells"));
  CHECK_THROWS_WITH(list.push_back(nullptr),
                    doctest::Contains("ModuleList::push_back: cell 1 is null"));
  CHECK_THROWS_WITH(list.at<nn::Dense>(0), doctest::Contains("not the type asked for"));
  CHECK_THROWS_WITH(list(Tensor::zeros({1})), doctest::Contains("ModuleList"));
  nn::ModuleDict dict{{"a", std::make_shared<nn::ReLU>()}, {"b", std::make_shared<nn::ReLU>()}};
  CHECK_THROWS_WITH(dict["c"],
                    doctest::Contains("ModuleDict: no cell named 'c' (it holds 2: a, b)"));
  CHECK_THROWS(dict.insert("a", std::make_shared<nn::ReLU>()));  // taken
  CHECK_THROWS(dict.insert("x.y", std::make_shared<nn::ReLU>()));
  CHECK_THROWS_WITH(dict.insert("z", nullptr),
                    doctest::Contains("ModuleDict::insert: cell 'z' is null"));
}
