// ConfigDifferences: compares two configs field by field through the key
// table (every bound row), plus the few fields no row binds.
#include <algorithm>

#include "config/schema.h"

namespace zt {

std::vector<std::string> ConfigDifferences(const Config& a, const Config& b) {
  using config_internal::Schema;
  std::vector<std::string> out;
  auto differ = [&](const std::string& path) {
    if (std::find(out.begin(), out.end(), path) == out.end()) out.push_back(path);
  };
  for (const config_internal::KeySpec& spec : Schema::Get().keys()) {
    if (std::holds_alternative<std::monostate>(spec.field)) continue;
    if (config_internal::GetField(spec, a) != config_internal::GetField(spec, b)) differ(spec.path);
  }
  if (a.batch.world_size != b.batch.world_size) differ("world size");
  if (a.optimizer.present != b.optimizer.present) differ("optimizer");
  std::vector<std::string> run_time_a = a.run_time_autos, run_time_b = b.run_time_autos;
  std::sort(run_time_a.begin(), run_time_a.end());
  std::sort(run_time_b.begin(), run_time_b.end());
  if (run_time_a != run_time_b) differ("keys left to run time");
  return out;
}

}  // namespace zt
