// What a program of its own takes from zerotorch besides the engine: the
// distributed sampler (shuffle, shard, resume), DeepSpeed's csv_monitor
// files, PEFT's adapter_config.json, and a checkpoint exported as
// safetensors. Usage: tools OUT_DIR [CHECKPOINT_DIR]
#include <zerotorch/zerotorch.h>

#include <cstdio>
#include <string>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: tools OUT_DIR [CHECKPOINT_DIR]\n");
    return 2;
  }
  const std::string out = argv[1];
  // Rank 1 of 2 over 10 samples: 5 indices, the same every run with this seed.
  zt::data::SamplerOptions so;
  so.num_samples = 10;
  so.world_size = 2;
  so.rank = 1;
  so.seed = 42;
  zt::data::SampleStream stream(zt::ValueOrThrow(zt::data::DistributedSampler::Create(so)));
  const std::vector<int64_t> batch = stream.Next(5);
  std::printf("tools: sampler gave %zu indices for rank 1 of 2\n", batch.size());

  zt::monitor::MonitorOptions mo;
  mo.output_path = out;
  mo.job_name = "tools";
  auto csv = zt::ValueOrThrow(zt::monitor::CsvMonitor::Create(mo));
  zt::ThrowIfError(csv->Write({{"Train/Samples/train_loss", 1.5, 8}}));
  zt::ThrowIfError(csv->Flush());

  zt::LoraRecord record;
  record.options.r = 8;
  record.options.targets = {"c_attn"};
  zt::ThrowIfError(zt::WritePeftAdapterConfig(out, record, "gpt2"));

  if (argc > 2) {
    auto checkpoint = zt::ValueOrThrow(zt::ckpt::ZeroCheckpoint::Open(argv[2]));
    const zt::ckpt::ExportResult r =
        zt::ValueOrThrow(zt::ckpt::ExportSafetensors(*checkpoint, out + "/model.safetensors"));
    std::printf("tools: exported %lld tensors\n", static_cast<long long>(r.tensors));
  }
  std::printf("tools: OK\n");
  return 0;
}
