// A tiny GPT, top to bottom: nanoGPT's architecture (token and position
// embeddings, pre-LayerNorm blocks of causal self-attention and a GELU MLP,
// a final LayerNorm and a linear head) and its parameter names, so its
// weights load in both, at 2 layers x 4 heads x 64 channels, trained on the
// King James Bible's characters (scripts/get_text.sh) with AdamW in two
// parameter groups (weight decay on matrices only) and gradient clipping;
// it prints text it samples. Unlike nanoGPT, the head's weight is not tied
// to the token embedding.
//
//   build/bin/tiny_gpt                          # 1500 steps (2 minutes on 2 cores), then 300 characters
//   build/bin/tiny_gpt --steps 2000 --save gpt.safetensors
//   build/bin/tiny_gpt --steps 3000 --resume gpt.safetensors   # 1000 more
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>

#include "cli.h"
#include "resume.h"

using namespace minidl;

constexpr int64_t kSteps = 1500, kBatch = 32, kBlock = 64, kLayers = 2, kHeads = 4, kEmbed = 64;
constexpr double kLearningRate = 3e-3, kWeightDecay = 0.1, kClip = 1.0;

// x [B, T, C] -> [B, T, C]: each position attends to itself and those before it
struct CausalSelfAttention : nn::Cell {
  nn::Dense c_attn, c_proj;  // C -> 3C (q, k, v), C -> C
  int64_t heads;

  CausalSelfAttention(int64_t embed, int64_t heads) : c_attn(embed, 3 * embed), c_proj(embed, embed), heads(heads) {
    register_cells({{"c_attn", c_attn}, {"c_proj", c_proj}});
  }
  Tensor forward(const Tensor& x) override {
    const int64_t b = x.size(0), t = x.size(1), c = x.size(2);
    std::vector<Tensor> qkv = chunk(c_attn(x), 3, /*dim=*/2);  // 3 x [B, T, C]
    for (Tensor& m : qkv) m = m.reshape({b, t, heads, c / heads}).transpose(1, 2);  // [B, nh, T, hs]
    Tensor y = scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], {}, /*dropout_p=*/0, /*is_causal=*/true);
    return c_proj(y.transpose(1, 2).reshape({b, t, c}));  // heads side by side again
  }
};

// x [B, T, C] -> [B, T, C]: c_proj(gelu(c_fc(x))), 4C wide inside
struct MLP : nn::Cell {
  nn::Dense c_fc, c_proj;
  explicit MLP(int64_t embed) : c_fc(embed, 4 * embed), c_proj(4 * embed, embed) {
    register_cells({{"c_fc", c_fc}, {"c_proj", c_proj}});
  }
  Tensor forward(const Tensor& x) override { return c_proj(gelu(c_fc(x))); }
};

// x + attn(ln_1(x)), then + mlp(ln_2(.))
struct Block : nn::Cell {
  nn::LayerNorm ln_1, ln_2;
  CausalSelfAttention attn;
  MLP mlp;
  Block(int64_t embed, int64_t heads) : ln_1(embed), ln_2(embed), attn(embed, heads), mlp(embed) {
    register_cells({{"ln_1", ln_1}, {"attn", attn}, {"ln_2", ln_2}, {"mlp", mlp}});
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = x + attn(ln_1(x));
    return h + mlp(ln_2(h));
  }
};

// ids [B, T] -> logits [B, T, V]
struct GPT : nn::Cell {
  struct Transformer : nn::Cell {
    nn::Embedding wte, wpe;
    nn::ModuleList h;
    nn::LayerNorm ln_f;
    Transformer(int64_t vocab, int64_t block, int64_t layers, int64_t heads, int64_t embed)
        : wte(vocab, embed), wpe(block, embed), ln_f(embed) {
      for (int64_t i = 0; i < layers; ++i) h.push_back(std::make_shared<Block>(embed, heads));
      register_cells({{"wte", wte}, {"wpe", wpe}, {"h", h}, {"ln_f", ln_f}});
    }
  } transformer;
  nn::Dense lm_head;

  GPT(int64_t vocab, int64_t block, int64_t layers, int64_t heads, int64_t embed)
      : transformer(vocab, block, layers, heads, embed),
        lm_head(embed, vocab, {.has_bias = false}) {
    register_cells({{"transformer", transformer}, {"lm_head", lm_head}});
  }
  Tensor forward(const Tensor& ids) override {
    Tensor pos = Tensor::arange(ids.size(1), kInt64, ids.device());
    Tensor x = transformer.wte(ids) + transformer.wpe(pos);  // [B, T, C] + [T, C]
    for (size_t i = 0; i < transformer.h.size(); ++i) x = transformer.h[i](x);
    return lm_head(transformer.ln_f(x));
  }
};

// Mean cross entropy of logits [B, T, V] against the next characters [B, T]
Tensor lm_loss(const Tensor& logits, const Tensor& targets) {
  return cross_entropy(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}));
}

// `count` characters drawn one at a time from softmax(logits / temperature)
// of the last position, the context cut to the last `block` characters.
std::string sample(GPT& net, const data::CharCorpus& text, const std::string& prompt, int64_t count,
                   int64_t block, double temperature, Device device) {
  NoGradGuard no_grad;
  net.eval();
  std::string out = prompt;
  for (int64_t i = 0; i < count; ++i) {
    const std::string context = out.substr(out.size() > size_t(block) ? out.size() - block : 0);
    Tensor logits = net(text.encode(context).reshape({1, -1}).to(device));  // [1, T, V]
    Tensor last = logits.reshape({-1, text.vocab_size()}).slice(logits.size(1) - 1, logits.size(1));
    std::vector<float> p = softmax(last / temperature, -1).to_float_vector();
    double u = default_generator().uniform(), acc = 0;
    int64_t id = 0;
    while (id + 1 < text.vocab_size() && (acc += p[id]) <= u) ++id;
    out.push_back(text.vocab()[id]);
  }
  return out;
}

void program(int argc, char** argv) {
  std::string path = data::default_text_path(), device_flag = "cpu", save, resume, init;
  std::string prompt = "And the ";
  int64_t steps = kSteps, batch = kBatch, threads = 0, log_every = 25, sample_chars = 300;
  double lr = kLearningRate, temperature = 0.8;
  uint64_t seed = 0;
  CLI::App app{"Train a tiny GPT on English text and sample from it"};
  app.add_option("--data", path, "a text file (default: the KJV from scripts/get_text.sh)");
  app.add_option("--steps", steps, "training steps in all (a resumed run continues to it)")
      ->check(example::in_range<int64_t>(0, 1'000'000'000));
  app.add_option("--batch", batch, "windows of 64 characters per step")->check(example::in_range<int64_t>(1, 4096));
  app.add_option("--lr", lr, "AdamW's learning rate")->check(example::in_range(0.0, 10.0));
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
  app.add_option("--init", init, "start from these weights (safetensors, nanoGPT's names)");
  example::parse(app, argc, argv);
  if (threads > 0) set_num_threads(static_cast<int>(threads));
  const Device device = example::pick_device(device_flag);

  // 1. The text: 90% to train on, the last 10% to validate.
  data::CharCorpus text(path);
  const int64_t cut = text.size() * 9 / 10;
  Tensor train = text.ids().slice(0, cut), valid = text.ids().slice(cut, text.size());

  // 2. The model, and AdamW with nanoGPT's two groups: weight decay on every
  //    2-D parameter (the matrices and embeddings), none on the biases and
  //    LayerNorms' vectors.
  manual_seed(seed);
  GPT net(text.vocab_size(), kBlock, kLayers, kHeads, kEmbed);
  if (!init.empty()) net.load(init);
  net.to(device);
  std::vector<Tensor> decay, no_decay;
  for (const Tensor& p : net.trainable_params()) (p.dim() >= 2 ? decay : no_decay).push_back(p);
  optim::AdamW optimizer({{decay, {.weight_decay = kWeightDecay}}, {no_decay, {.weight_decay = 0.0}}},
                         {.lr = lr, .betas = std::pair{0.9, 0.95}});
  const example::Trainables state{{{"net", &net}}, {{"optimizer", &optimizer}}};
  int64_t step = resume.empty() ? 0 : example::load_training(resume, state);
  std::printf("tiny_gpt: %lld characters (%lld distinct), %d threads, device %s, from step %lld\n",
              (long long)text.size(), (long long)text.vocab_size(), num_threads(),
              device_name(device), (long long)step);

  // 3. Training: window batch `step` of the stream, forward, loss, backward,
  //    gradient clipping, step.
  net.train();
  for (; step < steps; ++step) {
    data::Batch b = data::random_windows(train, batch, kBlock, seed, step);
    Tensor loss = lm_loss(net(b.data.to(device)), b.labels.to(device));
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
    data::Batch b = data::random_windows(valid, 16, kBlock, seed, 0);
    const double v = lm_loss(net(b.data.to(device)), b.labels.to(device)).item();
    std::printf("validation loss %.4f (%.3f bits per character)\n", v, v / std::log(2.0));
  }
  if (sample_chars > 0)
    std::printf("sample: %s\n", sample(net, text, prompt, sample_chars, kBlock, temperature, device).c_str());
  if (!save.empty()) example::save_training(save, state, step);
}

int main(int argc, char** argv) {
  return example::run_main([&] { program(argc, argv); });
}
