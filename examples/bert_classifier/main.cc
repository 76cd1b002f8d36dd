// A user's own model trained with zerotorch: a small BERT-style encoder with
// a classification head (the sequence-classification task BERT is usually
// fine-tuned for), sharded with ZeRO stage 3 (every encoder layer a
// zt::Unit), trained from ds_config.json on several ranks, evaluated with
// the accuracy counted across ranks, checkpointed, resumed and exported.
//
//   zt launch --nproc-per-node 2 -- ./bert_classifier --steps 40 --out run   # trains, saves, exports
//   zt launch --nproc-per-node 2 -- ./bert_classifier --steps 60 --out run --resume
//
// The data is made up so that the example needs no download: sentences of
// random "words" in which a few are positive or negative cues; the label is
// whether positive cues outnumber negative ones. A model must attend over
// the whole sentence to learn it.
#include <zerotorch/zerotorch.h>

#include <cstdio>
#include <cstring>
#include <string>

namespace {

constexpr int64_t kVocab = 96, kSeq = 24, kDim = 64, kHeads = 4, kLayers = 3, kClasses = 2;
constexpr int64_t kCls = 0, kPad = 1, kPositive = 2, kNegative = 3;  // special tokens and the two cues

struct EncoderLayerImpl : torch::nn::Module {
  EncoderLayerImpl() {
    qkv = register_module("qkv", torch::nn::Linear(kDim, 3 * kDim));
    out = register_module("out", torch::nn::Linear(kDim, kDim));
    ln_1 = register_module("ln_1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({kDim})));
    ln_2 = register_module("ln_2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({kDim})));
    fc = register_module("fc", torch::nn::Linear(kDim, 4 * kDim));
    proj = register_module("proj", torch::nn::Linear(4 * kDim, kDim));
  }
  // x: [batch, seq, dim]; key_mask: [batch, 1, 1, seq], -inf at padding.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& key_mask) {
    const int64_t b = x.size(0), t = x.size(1), hd = kDim / kHeads;
    std::vector<torch::Tensor> q_k_v = qkv(x).view({b, t, 3, kHeads, hd}).permute({2, 0, 3, 1, 4}).unbind(0);
    torch::Tensor scores = torch::matmul(q_k_v[0], q_k_v[1].transpose(-2, -1)) / std::sqrt(static_cast<double>(hd));
    torch::Tensor attended = torch::matmul(torch::softmax(scores + key_mask, -1), q_k_v[2]);
    torch::Tensor h = ln_1(x + out(attended.transpose(1, 2).reshape({b, t, kDim})));
    return ln_2(h + proj(torch::gelu(fc(h))));
  }
  torch::nn::Linear qkv{nullptr}, out{nullptr}, fc{nullptr}, proj{nullptr};
  torch::nn::LayerNorm ln_1{nullptr}, ln_2{nullptr};
};

struct BertClassifierImpl : torch::nn::Module {
  BertClassifierImpl() {
    tokens = register_module("token_embeddings", torch::nn::Embedding(kVocab, kDim));
    positions = register_module("position_embeddings", torch::nn::Embedding(kSeq, kDim));
    for (int64_t i = 0; i < kLayers; ++i) {
      layers.push_back(register_module("layer" + std::to_string(i), zt::Unit<EncoderLayerImpl>()));
    }
    pooler = register_module("pooler", torch::nn::Linear(kDim, kDim));
    classifier = register_module("classifier", torch::nn::Linear(kDim, kClasses));
  }
  // ids: [batch, seq] -> logits [batch, classes], from the [CLS] position.
  torch::Tensor forward(const torch::Tensor& ids) {
    torch::Tensor key_mask = torch::zeros(ids.sizes(), torch::kFloat)
                                 .masked_fill(ids == kPad, -std::numeric_limits<float>::infinity())
                                 .view({ids.size(0), 1, 1, ids.size(1)});
    torch::Tensor x = tokens(ids) + positions(torch::arange(ids.size(1)));
    for (auto& layer : layers) x = layer(x, key_mask);  // the unit itself gathers its shards
    return classifier(torch::tanh(pooler(x.select(1, 0))));
  }
  torch::nn::Embedding tokens{nullptr}, positions{nullptr};
  std::vector<zt::Unit<EncoderLayerImpl>> layers;
  torch::nn::Linear pooler{nullptr}, classifier{nullptr};
};

// Sentences [CLS] w1 ... wn [PAD]...: 8 to 23 words, 0-4 cues of each kind.
struct Batch {
  torch::Tensor ids, labels;
};
Batch MakeSentences(int64_t n, uint64_t seed) {
  torch::Generator gen = at::detail::createCPUGenerator(seed);
  torch::Tensor ids = torch::randint(kNegative + 1, kVocab, {n, kSeq}, gen);
  torch::Tensor lengths = torch::randint(8, kSeq, {n}, gen);
  torch::Tensor positive = torch::randint(0, 5, {n}, gen), negative = torch::randint(0, 5, {n}, gen);
  torch::Tensor labels = torch::empty({n}, torch::kLong);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t len = lengths[i].item<int64_t>();
    int64_t pos = positive[i].item<int64_t>(), neg = negative[i].item<int64_t>();
    if (pos == neg) ++pos;  // no ties
    torch::Tensor slots = torch::randperm(len, gen) + 1;
    for (int64_t k = 0; k < pos + neg && k < len; ++k)
      ids[i][slots[k].item<int64_t>()] = k < pos ? kPositive : kNegative;
    ids[i].narrow(0, len + 1, kSeq - len - 1).fill_(kPad);
    labels[i] = pos > neg ? 1 : 0;
  }
  ids.select(1, 0).fill_(kCls);
  return {ids, labels};
}

struct Args {
  std::string config = "ds_config.json", out = "bert_run";
  int steps = 40;
  bool resume = false;
};
Args ParseArgs(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--config") {
      a.config = value();
    } else if (arg == "--out") {
      a.out = value();
    } else if (arg == "--steps") {
      a.steps = std::stoi(value());
    } else if (arg == "--resume") {
      a.resume = true;
    } else {
      throw std::invalid_argument("unknown argument '" + arg + "' (--config FILE --out DIR --steps N --resume)");
    }
  }
  return a;
}

// Accuracy on the evaluation set, each rank scoring its share and the counts
// summed over the ranks (every rank runs the same number of forwards: at
// stage 3 a forward is a collective).
double Evaluate(zt::Engine& engine, BertClassifierImpl& model, const Batch& eval) {
  torch::NoGradGuard no_grad;
  zt::comm::ProcessGroup& pg = engine.process_group();
  const int64_t share = eval.ids.size(0) / pg.size();
  torch::Tensor ids = eval.ids.narrow(0, pg.rank() * share, share);
  torch::Tensor labels = eval.labels.narrow(0, pg.rank() * share, share);
  torch::Tensor counts = torch::zeros({2}, torch::kDouble);
  counts[0] = (model.forward(ids).argmax(-1) == labels).sum().item<double>();
  counts[1] = static_cast<double>(share);
  zt::ThrowIfError(pg.AllReduce(counts, zt::comm::ReduceOp::kSum)->Wait());
  return counts[0].item<double>() / counts[1].item<double>();
}

}  // namespace

int main(int argc, char** argv) try {
  const Args args = ParseArgs(argc, argv);
  zt::comm::RankEnv env = zt::ValueOrThrow(zt::comm::ReadRankEnv());
  std::shared_ptr<zt::comm::ProcessGroup> pg = zt::ValueOrThrow(zt::comm::InitProcessGroup(env, {}));
  zt::ParseOptions parse;
  parse.world_size = pg->size();
  zt::Config config = zt::ValueOrThrow(zt::LoadConfigFile(args.config, parse));

  torch::manual_seed(42);
  auto model = std::make_shared<BertClassifierImpl>();
  std::unique_ptr<zt::Engine> engine = zt::ValueOrThrow(zt::Engine::Create(model, config, pg));
  const std::string checkpoints = args.out + "/checkpoints";
  if (args.resume) {
    zt::ValueOrThrow(engine->LoadCheckpoint(checkpoints));
    if (pg->rank() == 0) std::printf("bert_classifier: resumed at step %lld\n", (long long)engine->global_steps());
  }

  const Batch train = MakeSentences(4096, 1), eval = MakeSentences(512, 2);
  const int64_t micro = config.batch.micro_batch, global = config.batch.train_batch;
  double loss = 0;
  while (engine->global_steps() < args.steps) {
    // Step s uses sentences [s * global, (s + 1) * global) of the training
    // set (wrapping around), this rank its micro-batches of them: a resumed
    // run continues exactly where the saved one stopped.
    const int64_t step = engine->global_steps();
    loss = engine->TrainBatch([&](int64_t m) {
      const int64_t first = (step * global + (m * pg->size() + pg->rank()) * micro) % (train.ids.size(0) - micro);
      return torch::cross_entropy_loss(model->forward(train.ids.narrow(0, first, micro)),
                                       train.labels.narrow(0, first, micro));
    });
    if (engine->global_steps() % 20 == 0 || engine->global_steps() == args.steps) {
      const double accuracy = Evaluate(*engine, *model, eval);
      if (pg->rank() == 0) {
        std::printf("bert_classifier: step %lld loss %.4f eval accuracy %.3f\n", (long long)engine->global_steps(),
                    loss, accuracy);
      }
    }
  }
  zt::ThrowIfError(engine->SaveCheckpoint(checkpoints));
  zt::ThrowIfError(engine->ExportWeights(args.out + "/model.safetensors"));
  if (pg->rank() == 0) {
    std::printf("bert_classifier: %d steps at ZeRO stage %d on %d ranks; checkpoint %s, weights %s/model.safetensors\n",
                args.steps, config.zero.stage, pg->size(), checkpoints.c_str(), args.out.c_str());
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bert_classifier: %s\n", e.what());
  return 1;
}
