// ConfigReferenceMarkdown: docs/config_reference.md, generated from the key
// table so the documented keys, types and defaults are exactly the parsed ones.
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "config/schema.h"

namespace zt {
namespace {

using config_internal::EnumChoice;
using config_internal::KeySpec;
using config_internal::Kind;
using config_internal::Schema;
using config_internal::Support;

std::string Cell(const std::string& text) { return absl::StrReplaceAll(text, {{"|", "\\|"}, {"\n", " "}}); }

std::string AppliesText(const KeySpec& spec) {
  if (spec.applies_to == 0) return "";
  const bool optimizer = spec.path.rfind("optimizer.", 0) == 0;
  const KeySpec* type_row = Schema::Get().FindPath(optimizer ? "optimizer.type" : "scheduler.type");
  std::vector<std::string> names;
  for (const EnumChoice& c : type_row->choices) {
    if (spec.applies_to & (1u << c.value)) names.push_back(c.name);
  }
  return absl::StrCat(" (", absl::StrJoin(names, ", "), ")");
}

std::string KeyRow(const KeySpec& spec) {
  std::string meaning = spec.meaning;
  for (const std::string& alias : spec.aliases) absl::StrAppend(&meaning, " Also accepted as `", alias, "`.");
  if (!spec.ignored_reason.empty()) absl::StrAppend(&meaning, " **Ignored by this build:** ", spec.ignored_reason, ".");
  return absl::StrCat("| `", spec.path, "`", AppliesText(spec), " | ", Cell(config_internal::TypeColumn(spec)), " | ",
                      Cell(config_internal::DefaultColumn(spec)), " | ", Cell(meaning), " |\n");
}

// What "auto" becomes at the Trainer's default arguments, for the reference.
std::string TrainerDefaultText(const KeySpec& spec) {
  const config_internal::TrainerAuto& t = *spec.trainer_auto;
  switch (t.input) {
    case config_internal::RunInput::kTrainingSteps: return "left to run time";
    case config_internal::RunInput::kHiddenSize:
      return t.stage3_only ? "left to run time at stage 3; the default below it" : "left to run time";
    case config_internal::RunInput::kNone: break;
  }
  if (t.default_value.is_null()) return spec.batch ? "derived" : spec.derive_text;
  if (t.default_value.is_array()) {
    std::vector<std::string> parts;
    for (const config_internal::Json& e : t.default_value) parts.push_back(config_internal::ShortNumber(e));
    return absl::StrCat("[", absl::StrJoin(parts, ", "), "]");
  }
  return config_internal::ShortNumber(t.default_value);
}

void AppendAutoSection(std::string& out) {
  absl::StrAppend(
      &out, "## \"auto\" values\n\n",
      "Any key that takes a value may be written as `\"auto\"`, as Hugging Face's DeepSpeed templates do. "
      "zerotorch fills it the way the Hugging Face Trainer does (transformers' `HfTrainerDeepSpeedConfig`) and "
      "reports each resolution as a note; a key written with a value is never changed. In order:\n\n",
      "1. a value passed for that key with `zt config check --auto KEY=VALUE` (from C++: "
      "`ParseOptions::auto_values`; `zt train` passes its flags) is used when given; otherwise\n",
      "2. the batch keys are derived by the batch-size rules above;\n",
      "3. the keys of the first table take what the Trainer writes at its default arguments, except the values "
      "only the run knows: the number of training steps and the model's hidden size (`ParseOptions::hidden_size`). "
      "`zt config check` accepts those and notes what fills each; a config that still has one cannot train "
      "(`zt::CheckAutosResolved`);\n",
      "4. the keys of the second table are derived from other keys;\n",
      "5. every other key takes its default. Keys whose default is \"required\" have none, so "
      "`\"auto\"` there needs a value.\n\n",
      "docs/config.md, \"Hugging Face Trainer configs\", maps each Trainer argument to its `zt train` flag.\n\n",
      "| key | the Trainer fills it with | at the Trainer's defaults |\n|---|---|---|\n");
  std::set<std::string> listed;
  for (const KeySpec& spec : Schema::Get().keys()) {
    if (!spec.trainer_auto || !listed.insert(spec.path).second) continue;
    // The Trainer fills the optimizer keys whatever the type: no type list.
    const std::string types = spec.path.rfind("scheduler.", 0) == 0 ? AppliesText(spec) : "";
    absl::StrAppend(&out, "| `", spec.path, "`", types, " | ", Cell(spec.trainer_auto->rule), " | ",
                    Cell(TrainerDefaultText(spec)), " |\n");
  }
  absl::StrAppend(&out, "\n| key | \"auto\" becomes |\n|---|---|\n");
  for (const KeySpec& spec : Schema::Get().keys()) {
    if (spec.trainer_auto || (spec.derive == nullptr && spec.derive_auto == nullptr)) continue;
    absl::StrAppend(&out, "| `", spec.path, "`", AppliesText(spec), " | ", Cell(spec.derive_text), " |\n");
  }
  absl::StrAppend(&out, "\n");
}

void AppendLegacySection(std::string& out) {
  absl::StrAppend(&out, "## Legacy spellings\n\n",
                  "Older DeepSpeed spellings are still read; each use adds a one-line deprecation note.\n\n",
                  "| written | read as | how |\n|---|---|---|\n");
  for (const config_internal::LegacySpelling& l : Schema::Get().legacy()) {
    absl::StrAppend(&out, "| `", l.old_path, "` | `", l.new_path, "` | ", Cell(l.mapping), " |\n");
  }
  absl::StrAppend(&out, "\n");
}

void AppendUnsupportedSection(std::string& out) {
  absl::StrAppend(&out, "## Not supported\n\n",
                  "DeepSpeed features zerotorch does not implement. Configs that carry them switched off still "
                  "load: a block is accepted when it is absent, `null`, `false`, `{}`, `{\"enabled\": false}` "
                  "(or `\"auto\"`), or has only false values; a key is accepted at the value shown. Anything else "
                  "is an error naming the feature.\n\n",
                  "| key | accepted | what it is |\n|---|---|---|\n");
  for (const KeySpec& spec : Schema::Get().keys()) {
    if (spec.support != Support::kUnsupported) continue;
    std::string accepted = spec.kind == Kind::kObject ? "off" : config_internal::DefaultColumn(spec);
    std::string what = spec.meaning;
    if (!spec.unsupported_hint.empty()) absl::StrAppend(&what, "; ", spec.unsupported_hint);
    std::string name = absl::StrCat("`", spec.path, "`", AppliesText(spec));
    for (const std::string& alias : spec.aliases) absl::StrAppend(&name, " (or `", alias, "`)");
    absl::StrAppend(&out, "| ", name, " | ", Cell(accepted), " | ", Cell(what), " |\n");
  }
  absl::StrAppend(&out, "\n");
}

}  // namespace

std::string ConfigReferenceMarkdown() {
  const Schema& schema = Schema::Get();
  std::string out =
      "# Config reference\n\n"
      "<!-- Generated by `zt config reference` from config/schema_*.cc. Do not edit by hand; regenerate with\n"
      "     build/bin/zt config reference > docs/config_reference.md -->\n\n"
      "zerotorch reads DeepSpeed-style JSON configs (`ds_config.json`). Every key DeepSpeed users rely on is "
      "listed here with its type, default and meaning; `zt config check FILE` validates a file against this "
      "table and `zt config check --print FILE` prints it with every default filled in.\n\n"
      "Unlike DeepSpeed, unknown keys are errors everywhere (with the nearest valid key suggested), integers "
      "written as floats (`5e8`) are accepted only when integral, booleans must be JSON booleans, and names "
      "of choices (`\"cpu\"`, `\"AdamW\"`) are matched case-insensitively. `//` and `/* */` comments are "
      "allowed. See docs/config.md for how to check a config.\n\n";
  std::set<std::string> listed;
  for (const config_internal::Section& section : schema.sections()) {
    absl::StrAppend(&out, "## ", section.title, "\n\n", section.intro, "\n\n");
    std::string rows;
    for (const KeySpec& spec : schema.keys()) {
      if (spec.section != section.title || spec.support == Support::kUnsupported) continue;
      if (spec.kind == Kind::kObject) continue;  // blocks are the section headings
      absl::StrAppend(&rows, KeyRow(spec));
    }
    if (!rows.empty()) absl::StrAppend(&out, "| key | type | default | meaning |\n|---|---|---|---|\n", rows, "\n");
  }
  AppendAutoSection(out);
  AppendLegacySection(out);
  AppendUnsupportedSection(out);
  return out;
}

}  // namespace zt
