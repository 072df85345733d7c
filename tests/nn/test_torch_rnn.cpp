// nn::Embedding, RNN, LSTM, GRU and their cells against PyTorch 1.13: the layers load
// PyTorch's parameters by their names (load_state_dict) and give its outputs,
// states and gradients (input, initial state, every parameter) within 1e-5
// relative; cases from tests/reference/rnn.json (make_rnn.py), on
// kReferenceDevice (tests/cuda/reference_rnn.cpp runs them on the CUDA device).
#include <fstream>
#include <memory>

#include "torch_reference.h"

using namespace minidl;
using namespace minidl::testing;

namespace {

// The case's layer, with minidl's own initial parameters.
std::shared_ptr<nn::Cell> make_layer(const std::string& op, const Attrs& a) {
  if (op == "embedding") {
    std::optional<int64_t> pad;
    if (!a["padding_idx"].is_null()) pad = a["padding_idx"].get<int64_t>();
    return std::make_shared<nn::Embedding>(a["num_embeddings"], a["embedding_dim"], pad);
  }
  const int64_t in = a["input_size"], hidden = a["hidden_size"];
  if (op == "rnn_cell") return std::make_shared<nn::RNNCell>(in, hidden, true, a["nonlinearity"]);
  if (op == "lstm_cell") return std::make_shared<nn::LSTMCell>(in, hidden);
  if (op == "gru_cell") return std::make_shared<nn::GRUCell>(in, hidden);
  if (op == "lstm")
    return std::make_shared<nn::LSTM>(
        in, hidden,
        nn::LSTMOptions{.num_layers = a["num_layers"],
                        .bias = a["bias"],
                        .batch_first = a["batch_first"],
                        .bidirectional = a.value("bidirectional", false),
                        .proj_size = a.value("proj_size", int64_t{0})});
  nn::RNNOptions opt{.num_layers = a["num_layers"],
                     .bias = a["bias"],
                     .batch_first = a["batch_first"],
                     .bidirectional = a.value("bidirectional", false)};
  if (op == "rnn") opt.nonlinearity = a["nonlinearity"];
  if (op == "rnn") return std::make_shared<nn::RNN>(in, hidden, opt);
  REQUIRE(op == "gru");
  return std::make_shared<nn::GRU>(in, hidden, opt);
}

// The forward's outputs: (y, h_n[, c_n]), (h'[, c']) or (weight[ids]).

Outputs forward(const std::string& op, nn::Cell& layer, const Inputs& in) {
  const Tensor h0 = in.size() > 1 ? in[1] : Tensor();
  if (op == "embedding" || op == "rnn_cell" || op == "gru_cell")
    return {in.size() > 1 ? layer(in[0], in[1]) : layer(in[0])};
  if (op == "lstm_cell") {
    nn::LSTMState s =
        static_cast<nn::LSTMCell&>(layer)(in[0], {h0, in.size() > 2 ? in[2] : Tensor()});
    return {s.h, s.c};
  }
  if (op == "lstm") {
    auto [y, s] = static_cast<nn::LSTM&>(layer)(in[0], {h0, in.size() > 2 ? in[2] : Tensor()});
    return {y, s.h, s.c};
  }
  auto [y, h] = op == "rnn" ? static_cast<nn::RNN&>(layer)(in[0], h0)
                            : static_cast<nn::GRU&>(layer)(in[0], h0);
  return {y, h};
}

}  // namespace

TEST_CASE(
    "PyTorch reference: Embedding, RNN (tanh, relu), LSTM, GRU and cells with PyTorch's "
    "parameters") {
  std::ifstream in(std::string(MINIDL_TEST_REFERENCE_DIR) + "/rnn.json");
  REQUIRE(in.good());
  const nlohmann::json file = nlohmann::json::parse(in);
  int checked = 0;
  for (const nlohmann::json& c : file.at("cases")) {
    const std::string name = c.at("name"), op = c.at("op");
    CAPTURE(name);
    const Attrs& a = c.at("attrs");
    const size_t n_in = a.at("num_inputs");
    const std::vector<std::string> params = a.at("params");
    Inputs inputs;  // the forward's inputs
    TensorDict state;
    for (size_t i = 0; i < c.at("inputs").size(); ++i) {
      Tensor t = tensor_from_json(c["inputs"][i]);
      if (i >= n_in) {
        state.insert(params[i - n_in], t);
      } else {
        t = t.to(kReferenceDevice);
        inputs.push_back(c["inputs"][i]["requires_grad"].get<bool>() ? t.requires_grad_() : t);
      }
    }
    const std::shared_ptr<nn::Cell> layer = make_layer(op, a);
    layer->load_state_dict(state);  // strict: PyTorch's names are minidl's
    layer->to(kReferenceDevice);
    const Outputs outs = forward(op, *layer, inputs);
    REQUIRE(outs.size() == c.at("outputs").size());
    Tensor loss;
    for (size_t k = 0; k < outs.size(); ++k) {
      CAPTURE(k);
      const double err = reference_error(outs[k], tensor_from_json(c["outputs"][k]));
      INFO("output " << k << " " << to_string(outs[k].shape()) << ": relative error " << err);
      CHECK(err <= 1e-5);
      Tensor term = sum(mul(outs[k], tensor_from_json(c["cotangents"][k]).to(kReferenceDevice)));
      loss = loss.defined() ? add(loss, term) : term;
    }
    loss.backward();
    auto check_grad = [&](const std::string& what, const Tensor& got, const nlohmann::json& want) {
      const Tensor w = tensor_from_json(want);
      const double err = reference_error(got.defined() ? got : Tensor::zeros(w.shape()), w);
      INFO("gradient of " << what << ": relative error " << err);
      CHECK(err <= 1e-5);
    };
    for (size_t i = 0; i < n_in; ++i)
      if (!c["grads"][i].is_null()) check_grad(cat("input ", i), inputs[i].grad(), c["grads"][i]);
    const TensorDict named = layer->named_parameters();
    for (size_t i = 0; i < params.size(); ++i)
      check_grad(params[i], named.at(params[i]).grad(), c["grads"][n_in + i]);
    ++checked;
  }
  CHECK(checked == 50);
  MESSAGE("rnn: " << checked << " PyTorch reference cases");
}
