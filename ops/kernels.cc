// Run-time choice of the optimizer kernel variant (ops/kernels.h): CPU
// features from __builtin_cpu_supports (which also checks that the OS saves
// the wide registers), the ZT_CPU_ISA override, and the once-per-process pick.
// The variants themselves are in kernels_<isa>.cc.
#include "ops/kernels.h"

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ops/kernel_variants.h"
#include "util/error.h"

namespace zt::ops::kernels {
namespace {

// The CPU features `isa` needs that this CPU lacks; empty when it can run it.
std::vector<std::string> MissingFeatures(Isa isa) {
  std::vector<std::string> missing;
#if defined(ZT_OPS_X86_VARIANTS)
  __builtin_cpu_init();  // safe to repeat; needed if called before main()
  auto need = [&](bool present, const char* name) {
    if (!present) missing.push_back(name);
  };
  switch (isa) {
    case Isa::kGeneric: break;
    case Isa::kAvx2:
      need(__builtin_cpu_supports("avx2"), "avx2");
      need(__builtin_cpu_supports("fma"), "fma");
      need(__builtin_cpu_supports("f16c"), "f16c");
      break;
    case Isa::kAvx512:
      need(__builtin_cpu_supports("avx512f"), "avx512f");
      need(__builtin_cpu_supports("avx512bw"), "avx512bw");
      need(__builtin_cpu_supports("avx512vl"), "avx512vl");
      need(__builtin_cpu_supports("avx512dq"), "avx512dq");
      need(__builtin_cpu_supports("f16c"), "f16c");
      break;
  }
#else
  if (isa != Isa::kGeneric) missing.push_back("an x86-64 build");
#endif
  return missing;
}

const KernelTable* TableOf(Isa isa) {
  switch (isa) {
    case Isa::kGeneric: return &internal::GenericKernels();
#if defined(ZT_OPS_X86_VARIANTS)
    case Isa::kAvx2: return &internal::Avx2Kernels();
    case Isa::kAvx512: return &internal::Avx512Kernels();
#else
    case Isa::kAvx2:
    case Isa::kAvx512: return nullptr;
#endif
  }
  return nullptr;
}

std::string AllNames() {
  std::vector<std::string> names;
  for (Isa isa : kAllIsas) names.push_back(IsaName(isa));
  return absl::StrJoin(names, ", ");
}

}  // namespace

const char* IsaName(Isa isa) {
  switch (isa) {
    case Isa::kGeneric: return "generic";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
  }
  return "unknown";
}

const KernelTable* KernelsFor(Isa isa) {
  if (!MissingFeatures(isa).empty()) return nullptr;
  return TableOf(isa);
}

namespace {

// ChooseIsa without the throw: ActiveKernels keeps the status to rethrow it.
absl::StatusOr<Isa> ChooseIsaOrError(std::string_view requested_view) {
  // absl::StrCat takes absl::string_view, which need not be std::string_view.
  const std::string requested(requested_view);
  if (requested.empty()) {
    for (Isa isa : {Isa::kAvx512, Isa::kAvx2}) {
      if (KernelsFor(isa) != nullptr) return isa;
    }
    return Isa::kGeneric;
  }
  for (Isa isa : kAllIsas) {
    if (requested != IsaName(isa)) continue;
    const std::vector<std::string> missing = MissingFeatures(isa);
    if (!missing.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("ZT_CPU_ISA=", requested,
                       " asks for optimizer kernels this machine cannot run (missing: ", absl::StrJoin(missing, ", "),
                       "); set ZT_CPU_ISA to an ISA this CPU has, or unset it ", "to use the best one"));
    }
    return isa;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "ZT_CPU_ISA=", requested, " is not an ISA name; use one of: ", AllNames(), " (or unset it to use the best one)"));
}

}  // namespace

Isa ChooseIsa(std::string_view requested) { return ValueOrThrow(ChooseIsaOrError(requested)); }

const KernelTable& ActiveKernels() {
  // Decided once: the environment is read and the CPU probed on the first
  // call only, so every optimizer in the process runs the same variant.
  static const absl::StatusOr<Isa> chosen = [] {
    const char* env = std::getenv("ZT_CPU_ISA");
    return ChooseIsaOrError(env == nullptr ? std::string_view() : std::string_view(env));
  }();
  if (!chosen.ok()) throw Error(chosen.status());
  return *TableOf(*chosen);
}

Isa ActiveIsa() { return ActiveKernels().isa; }

}  // namespace zt::ops::kernels
