// A character-level LSTM language model, top to bottom, in the shape of
// PyTorch's examples/word_language_model (encoder, rnn, decoder: the same
// parameter names, so its weights load in both): it reads the King James
// Bible (scripts/get_text.sh) in random windows, learns to predict each next
// character, and prints text it samples.
//
//   build/bin/char_lstm                         # 300 steps, then 300 sampled characters
//   build/bin/char_lstm --steps 2000 --save lstm.safetensors
//   build/bin/char_lstm --steps 3000 --resume lstm.safetensors   # 1000 more
#include <cmath>
#include <cstdio>
#include <string>

#include "cli.h"
#include "resume.h"

using namespace minidl;

constexpr int64_t kSteps = 300, kBatch = 32, kSeq = 64, kEmbed = 64, kHidden = 256, kLayers = 2;
constexpr double kLearningRate = 3e-3, kClip = 1.0;

// ids [B, T] -> logits [B, T, V], and the state after the last step
struct CharLSTM : nn::Cell {
  nn::Embedding encoder;
  nn::LSTM rnn;
  nn::Dense decoder;

  CharLSTM(int64_t vocab, int64_t embed, int64_t hidden, int64_t layers)
      : encoder(vocab, embed),
        rnn(embed, hidden, {.num_layers = layers, .batch_first = true}),
        decoder(hidden, vocab) {
    register_cells({{"encoder", encoder}, {"rnn", rnn}, {"decoder", decoder}});
  }
  std::pair<Tensor, nn::LSTMState> forward(const Tensor& ids, const nn::LSTMState& state = {}) {
    auto [h, next] = rnn(encoder(ids), state);  // [B, T, H]
    return {decoder(h), next};
  }
};

// Mean cross entropy of logits [B, T, V] against the next characters [B, T]
Tensor lm_loss(const Tensor& logits, const Tensor& targets) {
  return cross_entropy(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}));
}

// `count` characters drawn one at a time from softmax(logits / temperature),
// after feeding `prompt`.
std::string sample(CharLSTM& net, const data::CharCorpus& text, const std::string& prompt,
                   int64_t count, double temperature, Device device) {
  NoGradGuard no_grad;
  net.eval();
  auto [logits, state] = net.forward(text.encode(prompt).reshape({1, -1}).to(device));
  std::string out = prompt;
  for (int64_t i = 0; i < count; ++i) {
    Tensor last = logits.reshape({-1, text.vocab_size()}).slice(logits.size(1) - 1, logits.size(1));
    std::vector<float> p = softmax(last / temperature, -1).to_float_vector();
    double u = default_generator().uniform(), acc = 0;
    int64_t id = 0;
    while (id + 1 < text.vocab_size() && (acc += p[id]) <= u) ++id;
    out.push_back(text.vocab()[id]);
    std::tie(logits, state) = net.forward(Tensor::of_ints({id}, {1, 1}).to(device), state);
  }
  return out;
}

void program(int argc, char** argv) {
  std::string path = data::default_text_path(), device_flag = "cpu", save, resume, init;
  std::string prompt = "And the ";
  int64_t steps = kSteps, batch = kBatch, seq = kSeq, hidden = kHidden, threads = 0;
  int64_t log_every = 25, sample_chars = 300;
  double lr = kLearningRate, temperature = 0.8;
  uint64_t seed = 0;
  CLI::App app{"Train a character-level LSTM on English text and sample from it"};
  app.add_option("--data", path, "a text file (default: the KJV from scripts/get_text.sh)");
  app.add_option("--steps", steps, "training steps in all (a resumed run continues to it)")
      ->check(example::in_range<int64_t>(0, 1'000'000'000));
  app.add_option("--batch", batch, "windows per step")->check(example::in_range<int64_t>(1, 4096));
  app.add_option("--seq", seq, "characters per window")->check(example::in_range<int64_t>(1, 4096));
  app.add_option("--hidden", hidden, "LSTM hidden size")->check(example::in_range<int64_t>(1, 4096));
  app.add_option("--lr", lr, "Adam's learning rate")->check(example::in_range(0.0, 10.0));
  app.add_option("--seed", seed, "initial weights, windows and sampling");
  app.add_option("--log-every", log_every, "print the loss every N steps")
      ->check(example::in_range<int64_t>(1, 1'000'000));
  app.add_option("--sample", sample_chars, "characters to sample at the end")
      ->check(example::in_range<int64_t>(0, 1'000'000));
  app.add_option("--prompt", prompt, "text the sample starts from");
  app.add_option("--temperature", temperature, "sampling temperature")->check(example::in_range(0.01, 100.0));
  app.add_option("--threads", threads, "compute threads (default: OMP_NUM_THREADS or all cores)")
      ->check(example::in_range<int64_t>(1, 1024));
  app.add_option("--device", device_flag, "cpu, cuda, or auto")->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  app.add_option("--save", save, "save the training state (weights, optimizer, steps) at the end");
  app.add_option("--resume", resume, "continue from a --save file");
  app.add_option("--init", init, "start from these weights (safetensors, PyTorch's names)");
  example::parse(app, argc, argv);
  if (threads > 0) set_num_threads(static_cast<int>(threads));
  const Device device = example::pick_device(device_flag);

  // 1. The text: 90% to train on, the last 10% to validate.
  data::CharCorpus text(path);
  const int64_t cut = text.size() * 9 / 10;
  Tensor train = text.ids().slice(0, cut), valid = text.ids().slice(cut, text.size());

  // 2. The model and optimizer; --resume restores both and the steps taken.
  manual_seed(seed);
  CharLSTM net(text.vocab_size(), kEmbed, hidden, kLayers);
  if (!init.empty()) net.load(init);
  net.to(device);
  optim::Adam optimizer(net.trainable_params(), lr);
  const example::Trainables state{{{"net", &net}}, {{"optimizer", &optimizer}}};
  int64_t step = resume.empty() ? 0 : example::load_training(resume, state);
  std::printf("char_lstm: %lld characters (%lld distinct), %d threads, device %s, from step %lld\n",
              (long long)text.size(), (long long)text.vocab_size(), num_threads(),
              device_name(device), (long long)step);

  // 3. Training: window batch `step` of the stream, forward, loss, backward,
  //    gradient clipping, step.
  net.train();
  for (; step < steps; ++step) {
    data::Batch b = data::random_windows(train, batch, seq, seed, step);
    Tensor loss = lm_loss(net.forward(b.data.to(device)).first, b.labels.to(device));
    optimizer.zero_grad();
    loss.backward();
    optim::clip_grad_norm_(net, kClip);
    optimizer.step();
    if ((step + 1) % log_every == 0)
      std::printf("step %lld loss %.6f\n", (long long)step + 1, loss.item());
  }

  // 4. Validation loss on 16 windows of held-out text, and a sample.
  {
    NoGradGuard no_grad;
    net.eval();
    data::Batch b = data::random_windows(valid, 16, seq, seed, 0);
    const double v = lm_loss(net.forward(b.data.to(device)).first, b.labels.to(device)).item();
    std::printf("validation loss %.4f (%.3f bits per character)\n", v, v / std::log(2.0));
  }
  if (sample_chars > 0)
    std::printf("sample: %s\n", sample(net, text, prompt, sample_chars, temperature, device).c_str());
  if (!save.empty()) example::save_training(save, state, step);
}

int main(int argc, char** argv) {
  return example::run_main([&] { program(argc, argv); });
}
