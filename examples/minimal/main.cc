// The smallest complete zerotorch program: a two-block MLP of one's own,
// sharded with ZeRO stage 3 (each block a zt::Unit), trained on synthetic
// regression data from a DeepSpeed-style ds_config.json, then checkpointed.
// Built against the installed package (CMakeLists.txt beside it), run under
// any launcher that sets torchrun's variables:
//
//   zt launch --nproc-per-node 2 -- ./minimal ds_config.json 20
//
// docs/api.md shows this file; CI builds and runs it from an installed copy.
#include <zerotorch/zerotorch.h>

#include <cstdio>
#include <string>

struct BlockImpl : torch::nn::Module {
  explicit BlockImpl(int64_t dim) {
    fc = register_module("fc", torch::nn::Linear(dim, dim));
    norm = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim})));
  }
  torch::Tensor forward(const torch::Tensor& x) { return x + torch::gelu(fc(norm(x))); }
  torch::nn::Linear fc{nullptr};
  torch::nn::LayerNorm norm{nullptr};
};

struct MlpImpl : torch::nn::Module {
  MlpImpl(int64_t in, int64_t dim, int64_t out) {
    embed = register_module("embed", torch::nn::Linear(in, dim));
    for (int i = 0; i < 2; ++i)
      blocks.push_back(register_module("block" + std::to_string(i), zt::Unit<BlockImpl>(dim)));
    head = register_module("head", torch::nn::Linear(dim, out));
  }
  torch::Tensor forward(torch::Tensor x) {
    x = embed(x);
    for (auto& block : blocks) x = block(x);  // call the unit itself, not block->as<BlockImpl>()
    return head(x);
  }
  torch::nn::Linear embed{nullptr}, head{nullptr};
  std::vector<zt::Unit<BlockImpl>> blocks;
};

int main(int argc, char** argv) try {
  const std::string config_path = argc > 1 ? argv[1] : "ds_config.json";
  const int steps = argc > 2 ? std::stoi(argv[2]) : 20;

  zt::comm::RankEnv env = zt::ValueOrThrow(zt::comm::ReadRankEnv());
  std::shared_ptr<zt::comm::ProcessGroup> pg = zt::ValueOrThrow(zt::comm::InitProcessGroup(env, {}));
  zt::ParseOptions parse;
  parse.world_size = pg->size();
  zt::Config config = zt::ValueOrThrow(zt::LoadConfigFile(config_path, parse));

  torch::manual_seed(0);  // every rank builds the same model; the engine broadcasts rank 0's anyway
  auto model = std::make_shared<MlpImpl>(8, 32, 1);
  std::unique_ptr<zt::Engine> engine = zt::ValueOrThrow(zt::Engine::Create(model, config, pg));

  // Each rank draws its own micro-batches of y = sum(sin(x)).
  torch::manual_seed(1 + pg->rank());
  const int64_t micro = config.batch.micro_batch;
  double first = 0, last = 0;
  for (int step = 0; step < steps; ++step) {
    const double loss = engine->TrainBatch([&](int64_t) {
      torch::Tensor x = torch::randn({micro, 8});
      torch::Tensor y = torch::sin(x).sum(1, /*keepdim=*/true);
      return torch::mse_loss(model->forward(x), y);
    });
    if (step == 0) first = loss;
    last = loss;
  }
  zt::ThrowIfError(engine->SaveCheckpoint("minimal_checkpoints"));
  if (pg->rank() == 0) {
    std::printf(
        "minimal: %d steps at ZeRO stage %d on %d ranks, loss %.4f -> %.4f, checkpoint in minimal_checkpoints/\n",
        steps, config.zero.stage, pg->size(), first, last);
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "minimal: %s\n", e.what());
  return 1;
}
