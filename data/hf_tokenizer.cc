// Implementation of data/hf_tokenizer.h: the loader reads tokenizer.json
// (or vocab.json + merges.txt) key by key, refusing what it does not
// implement; Encode/Decode run the pipeline.
#include "data/hf_tokenizer.h"

#include <unicode/normalizer2.h>
#include <unicode/unistr.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "util/file_io.h"
#include "util/status.h"

namespace zt::data {

using Json = nlohmann::json;

namespace {

// tokenizer.json holds the whole vocabulary (11 MB for Qwen3); far more is
// not a tokenizer.
absl::StatusOr<std::string> ReadText(const std::string& path) { return ReadSmallFile(path, size_t{1} << 30); }

std::string Nfc(const std::string& utf8) {
  UErrorCode err = U_ZERO_ERROR;
  const icu::Normalizer2* nfc = icu::Normalizer2::getNFCInstance(err);
  if (U_FAILURE(err)) return utf8;
  icu::UnicodeString s = icu::UnicodeString::fromUTF8(utf8);
  icu::UnicodeString out = nfc->normalize(s, err);
  if (U_FAILURE(err)) return utf8;
  std::string result;
  out.toUTF8String(result);
  return result;
}

std::string ReplaceAll(std::string s, const std::string& from, const std::string& to) {
  if (from.empty()) return s;
  std::string out;
  size_t at = 0;
  for (size_t hit; (hit = s.find(from, at)) != std::string::npos; at = hit + from.size()) {
    out.append(s, at, hit - at);
    out.append(to);
  }
  out.append(s, at, std::string::npos);
  return out;
}

}  // namespace

// Reads one tokenizer.json into an HfTokenizer; every error names the file
// and the JSON key.
class HfTokenizerLoader {
 public:
  HfTokenizerLoader(HfTokenizer* t, std::string file) : t_(t), file_(std::move(file)) {}

  absl::Status Error(const std::string& key, const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrCat(file_, ": ", key, ": ", what));
  }
  absl::Status Unsupported(const std::string& key, const Json& v) const {
    return Error(key, absl::StrCat("'", v.is_object() && v.contains("type") ? v["type"].dump() : v.dump(),
                                   "' is not supported by zerotorch's tokenizer (BPE models with the normalizers, "
                                   "pre-tokenizers, post-processors and decoders of GPT-2, LLaMA-2/3, Mistral and "
                                   "Qwen2/3)"));
  }

  absl::Status FromJson(const Json& j) {
    if (!j.is_object() || !j.contains("model")) return Error("model", "missing: this is not a tokenizer.json");
    ZT_RETURN_IF_ERROR(Model(j["model"]));
    ZT_RETURN_IF_ERROR(Normalizer(j.value("normalizer", Json()), "normalizer"));
    ZT_RETURN_IF_ERROR(PreTokenizer(j.value("pre_tokenizer", Json()), "pre_tokenizer"));
    ZT_RETURN_IF_ERROR(AddedTokens(j.value("added_tokens", Json::array())));
    ZT_RETURN_IF_ERROR(PostProcessor(j.value("post_processor", Json()), "post_processor"));
    return DecoderOf(j.value("decoder", Json()));
  }

  // GPT-2's original files: vocab.json (token -> id) and merges.txt.
  absl::Status FromVocabAndMerges(const std::string& vocab_path, const std::string& merges_path) {
    ZT_ASSIGN_OR_RETURN(std::string vocab_text, ReadText(vocab_path));
    ZT_ASSIGN_OR_RETURN(std::string merges_text, ReadText(merges_path));
    const Json vocab = Json::parse(vocab_text, nullptr, /*allow_exceptions=*/false);
    if (!vocab.is_object()) return absl::InvalidArgumentError(absl::StrCat(vocab_path, ": not a JSON object of tokens"));
    absl::flat_hash_map<std::string, int32_t> v;
    for (auto it = vocab.begin(); it != vocab.end(); ++it) {
      if (!it.value().is_number_integer()) {
        return absl::InvalidArgumentError(absl::StrCat(vocab_path, ": token '", it.key(), "' has no integer id"));
      }
      v[it.key()] = it.value().get<int32_t>();
    }
    std::vector<std::pair<std::string, std::string>> merges;
    int line_no = 0;
    for (absl::string_view line : absl::StrSplit(merges_text, '\n')) {
      ++line_no;
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (line.empty() || absl::StartsWith(line, "#version")) continue;
      std::vector<std::string> parts = absl::StrSplit(line, ' ');
      if (parts.size() != 2) {
        return absl::InvalidArgumentError(
            absl::StrCat(merges_path, ": line ", line_no, " is not two tokens separated by a space"));
      }
      merges.emplace_back(std::move(parts[0]), std::move(parts[1]));
    }
    absl::StatusOr<Bpe> bpe = Bpe::Create(std::move(v), merges, {});
    if (!bpe.ok()) return absl::InvalidArgumentError(absl::StrCat(merges_path, ": ", bpe.status().message()));
    t_->bpe_.emplace(std::move(*bpe));
    t_->byte_level_ = true;
    t_->split_ = SplitPattern::kGpt2;
    t_->decoder_ = HfTokenizer::Decoder::kByteLevel;
    if (int32_t eot = t_->bpe_->Id("<|endoftext|>"); eot >= 0) t_->added_.push_back({"<|endoftext|>", eot, true});
    return absl::OkStatus();
  }

 private:
  static bool NullOrEmpty(const Json& j, const char* key) {
    return !j.contains(key) || j[key].is_null() || (j[key].is_string() && j[key].get<std::string>().empty());
  }

  absl::Status Model(const Json& m) {
    if (!m.is_object() || m.value("type", std::string("BPE")) != "BPE") return Unsupported("model.type", m);
    if (!m.contains("vocab") || !m["vocab"].is_object()) return Error("model.vocab", "missing or not an object");
    if (!m.contains("merges") || !m["merges"].is_array()) return Error("model.merges", "missing or not an array");
    if (m.contains("dropout") && !m["dropout"].is_null() && m["dropout"].get<double>() != 0.0) {
      return Error("model.dropout", "BPE dropout is for training the tokenizer; set it to null");
    }
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
      if (!NullOrEmpty(m, key)) return Error(absl::StrCat("model.", key), "is not supported (set it to null)");
    }
    absl::flat_hash_map<std::string, int32_t> vocab;
    vocab.reserve(m["vocab"].size());
    for (auto it = m["vocab"].begin(); it != m["vocab"].end(); ++it) {
      if (!it.value().is_number_integer()) return Error("model.vocab", absl::StrCat("'", it.key(), "' has no integer id"));
      vocab[it.key()] = it.value().get<int32_t>();
    }
    std::vector<std::pair<std::string, std::string>> merges;
    merges.reserve(m["merges"].size());
    for (const Json& e : m["merges"]) {
      if (e.is_string()) {
        const std::string s = e.get<std::string>();
        const size_t space = s.find(' ');
        if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
          return Error("model.merges", absl::StrCat("'", s, "' is not two tokens separated by one space"));
        }
        merges.emplace_back(s.substr(0, space), s.substr(space + 1));
      } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
        merges.emplace_back(e[0].get<std::string>(), e[1].get<std::string>());
      } else {
        return Error("model.merges", absl::StrCat("entry ", e.dump(), " is neither \"a b\" nor [\"a\", \"b\"]"));
      }
    }
    BpeOptions o;
    o.ignore_merges = m.value("ignore_merges", false);
    o.byte_fallback = m.value("byte_fallback", false);
    o.fuse_unk = m.value("fuse_unk", false);
    if (m.contains("unk_token") && m["unk_token"].is_string()) o.unk_token = m["unk_token"].get<std::string>();
    absl::StatusOr<Bpe> bpe = Bpe::Create(std::move(vocab), merges, std::move(o));
    if (!bpe.ok()) return Error("model", std::string(bpe.status().message()));
    t_->bpe_.emplace(std::move(*bpe));
    return absl::OkStatus();
  }

  absl::Status Normalizer(const Json& n, const std::string& key) {
    if (n.is_null()) return absl::OkStatus();
    const std::string type = n.value("type", std::string());
    if (type == "Sequence") {
      for (const Json& e : n.value("normalizers", Json::array())) ZT_RETURN_IF_ERROR(Normalizer(e, key + ".normalizers"));
      return absl::OkStatus();
    }
    if (type == "NFC") {
      t_->normalizer_.nfc = true;
      return absl::OkStatus();
    }
    if (type == "Prepend" && n.contains("prepend") && n["prepend"].is_string()) {
      if (!t_->normalizer_.replace.empty()) return Error(key, "Prepend after Replace is not supported");
      t_->normalizer_.prepend = n["prepend"].get<std::string>();
      return absl::OkStatus();
    }
    if (type == "Replace" && n.contains("pattern") && n["pattern"].contains("String") && n.contains("content")) {
      t_->normalizer_.replace.emplace_back(n["pattern"]["String"].get<std::string>(), n["content"].get<std::string>());
      return absl::OkStatus();
    }
    return Unsupported(key, n);
  }

  absl::Status PreTokenizer(const Json& p, const std::string& key) {
    if (p.is_null()) return absl::OkStatus();
    const std::string type = p.value("type", std::string());
    if (type == "Sequence") {
      for (const Json& e : p.value("pretokenizers", Json::array())) {
        ZT_RETURN_IF_ERROR(PreTokenizer(e, key + ".pretokenizers"));
      }
      return absl::OkStatus();
    }
    if (type == "ByteLevel") {
      t_->byte_level_ = true;
      t_->add_prefix_space_ = p.value("add_prefix_space", false);
      if (p.value("use_regex", true)) ZT_RETURN_IF_ERROR(SetSplit(SplitPattern::kGpt2, key));
      return absl::OkStatus();
    }
    if (type == "Split" && p.contains("pattern") && p["pattern"].contains("Regex")) {
      if (p.value("behavior", std::string()) != "Isolated" || p.value("invert", false)) {
        return Error(key, "only Split with behavior \"Isolated\" and invert false is supported");
      }
      absl::StatusOr<SplitPattern> sp = PatternFromRegex(p["pattern"]["Regex"].get<std::string>());
      if (!sp.ok()) return Error(key + ".pattern.Regex", std::string(sp.status().message()));
      return SetSplit(*sp, key);
    }
    return Unsupported(key, p);
  }

  absl::Status SetSplit(SplitPattern p, const std::string& key) {
    if (t_->split_.has_value() && *t_->split_ != p) return Error(key, "two different regex splits");
    t_->split_ = p;
    return absl::OkStatus();
  }

  absl::Status AddedTokens(const Json& a) {
    for (const Json& e : a) {
      if (!e.contains("id") || !e.contains("content")) return Error("added_tokens", "an entry without id or content");
      HfTokenizer::Added added{e["content"].get<std::string>(), e["id"].get<int32_t>(), e.value("special", false)};
      for (const char* flag : {"single_word", "lstrip", "rstrip"}) {
        if (e.value(flag, false)) {
          return Error("added_tokens", absl::StrCat("'", added.content, "' has ", flag, " set, which is not supported"));
        }
      }
      const bool has_normalizer = t_->normalizer_.nfc || !t_->normalizer_.prepend.empty() ||
                                  !t_->normalizer_.replace.empty();
      if (e.value("normalized", false) && has_normalizer && !added.special) {
        return Error("added_tokens", absl::StrCat("'", added.content,
                                                  "' is matched after normalization, which is not supported"));
      }
      if (added.content.empty()) return Error("added_tokens", absl::StrCat("token ", added.id, " is empty"));
      t_->added_.push_back(std::move(added));
    }
    // Longest first: where two start at the same place, the longer wins.
    std::stable_sort(t_->added_.begin(), t_->added_.end(),
                     [](const auto& x, const auto& y) { return x.content.size() > y.content.size(); });
    return absl::OkStatus();
  }

  absl::Status PostProcessor(const Json& p, const std::string& key) {
    if (p.is_null()) return absl::OkStatus();
    const std::string type = p.value("type", std::string());
    if (type == "Sequence") {
      for (const Json& e : p.value("processors", Json::array())) ZT_RETURN_IF_ERROR(PostProcessor(e, key + ".processors"));
      return absl::OkStatus();
    }
    if (type == "ByteLevel") return absl::OkStatus();  // offsets only
    if (type == "TemplateProcessing" && p.contains("single") && p["single"].is_array()) {
      const Json& specials = p.value("special_tokens", Json::object());
      bool after = false;
      for (const Json& piece : p["single"]) {
        if (piece.contains("Sequence")) {
          after = true;
          continue;
        }
        if (!piece.contains("SpecialToken")) return Error(key + ".single", "an entry that is neither Sequence nor SpecialToken");
        const std::string name = piece["SpecialToken"]["id"].get<std::string>();
        if (!specials.contains(name) || !specials[name].contains("ids")) {
          return Error(key + ".special_tokens", absl::StrCat("'", name, "' is used but not defined"));
        }
        for (const Json& id : specials[name]["ids"]) (after ? t_->suffix_ids_ : t_->prefix_ids_).push_back(id.get<int32_t>());
      }
      return absl::OkStatus();
    }
    return Unsupported(key, p);
  }

  absl::Status DecoderOf(const Json& d) {
    if (d.is_null()) return absl::OkStatus();
    const std::string type = d.value("type", std::string());
    if (type == "ByteLevel") {
      t_->decoder_ = HfTokenizer::Decoder::kByteLevel;
      return absl::OkStatus();
    }
    // SentencePiece-style: Replace("▁" -> " "), ByteFallback, Fuse, Strip(" ", n, 0).
    if (type == "Sequence") {
      for (const Json& e : d.value("decoders", Json::array())) {
        const std::string t = e.value("type", std::string());
        if (t == "Replace" && e.contains("pattern") && e["pattern"].value("String", std::string()) == "\xE2\x96\x81" &&
            e.value("content", std::string()) == " ") {
          continue;
        }
        if (t == "ByteFallback" || t == "Fuse") continue;
        if (t == "Strip" && e.value("content", std::string()) == " " && e.value("stop", 0) == 0) {
          t_->strip_start_ = e.value("start", 0);
          continue;
        }
        return Unsupported("decoder.decoders", e);
      }
      t_->decoder_ = HfTokenizer::Decoder::kSentencePiece;
      return absl::OkStatus();
    }
    return Unsupported("decoder", d);
  }

  HfTokenizer* t_;
  std::string file_;
};

absl::StatusOr<std::unique_ptr<HfTokenizer>> HfTokenizer::Load(const std::string& path) {
  namespace fs = std::filesystem;
  std::unique_ptr<HfTokenizer> t(new HfTokenizer());
  std::error_code ec;
  std::string json_path = path;
  if (fs::is_directory(path, ec)) {
    json_path = (fs::path(path) / "tokenizer.json").string();
    if (!fs::exists(json_path, ec)) {
      for (const auto& [v, m] : {std::pair{"vocab.json", "merges.txt"}, std::pair{"encoder.json", "vocab.bpe"}}) {
        const std::string vp = (fs::path(path) / v).string(), mp = (fs::path(path) / m).string();
        if (fs::exists(vp, ec) && fs::exists(mp, ec)) {
          HfTokenizerLoader loader(t.get(), vp);
          ZT_RETURN_IF_ERROR(loader.FromVocabAndMerges(vp, mp));
          t->source_ = vp;
          t->IndexAdded();
          return t;
        }
      }
      return absl::NotFoundError(absl::StrCat("no tokenizer in '", path,
                                              "': it holds neither tokenizer.json nor vocab.json + merges.txt "
                                              "(encoder.json + vocab.bpe)"));
    }
  } else if (!fs::exists(path, ec)) {
    return absl::NotFoundError(absl::StrCat("tokenizer '", path, "' does not exist"));
  }
  ZT_ASSIGN_OR_RETURN(std::string text, ReadText(json_path));
  const Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError(absl::StrCat(json_path, ": not valid JSON"));
  HfTokenizerLoader loader(t.get(), json_path);
  ZT_RETURN_IF_ERROR(loader.FromJson(j));
  t->source_ = json_path;
  t->IndexAdded();
  return t;
}

void HfTokenizer::IndexAdded() {
  for (const Added& a : added_) added_first_byte_[static_cast<unsigned char>(a.content[0])] = true;
}

absl::Status HfTokenizer::EncodeSection(std::string_view section, std::vector<int32_t>* ids) const {
  if (section.empty()) return absl::OkStatus();
  std::string text(section);
  if (normalizer_.nfc) text = Nfc(text);
  if (!normalizer_.prepend.empty()) text = normalizer_.prepend + text;
  for (const auto& [from, to] : normalizer_.replace) text = ReplaceAll(std::move(text), from, to);
  if (add_prefix_space_ && text[0] != ' ') text.insert(text.begin(), ' ');
  ZT_ASSIGN_OR_RETURN(std::u32string cps, DecodeUtf8(text));
  std::vector<std::pair<size_t, size_t>> pieces =
      split_.has_value() ? SplitByPattern(cps, *split_) : std::vector<std::pair<size_t, size_t>>{{0, cps.size()}};
  std::vector<std::string> chars;
  for (const auto& [b, e] : pieces) {
    chars.clear();
    const std::u32string_view piece(cps.data() + b, e - b);
    if (byte_level_) {
      for (unsigned char byte : EncodeUtf8(piece)) chars.push_back(ByteToUnicode()[byte]);
    } else {
      for (char32_t c : piece) chars.push_back(EncodeUtf8(std::u32string_view(&c, 1)));
    }
    bpe_->Encode(chars, ids);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int32_t>> HfTokenizer::Encode(std::string_view text, bool add_special_tokens) const {
  std::vector<int32_t> ids;
  if (add_special_tokens) ids = prefix_ids_;
  size_t start = 0;  // of the section not yet encoded
  for (size_t i = 0; i < text.size();) {
    if (!added_first_byte_[static_cast<unsigned char>(text[i])]) {
      ++i;
      continue;
    }
    const Added* hit = nullptr;
    for (const Added& a : added_) {
      if (text.compare(i, a.content.size(), a.content) == 0) {
        hit = &a;
        break;
      }
    }
    if (hit == nullptr) {
      ++i;
      continue;
    }
    ZT_RETURN_IF_ERROR(EncodeSection(text.substr(start, i - start), &ids));
    ids.push_back(hit->id);
    i += hit->content.size();
    start = i;
  }
  ZT_RETURN_IF_ERROR(EncodeSection(text.substr(start), &ids));
  if (add_special_tokens) ids.insert(ids.end(), suffix_ids_.begin(), suffix_ids_.end());
  return ids;
}

absl::StatusOr<std::string> HfTokenizer::Decode(absl::Span<const int32_t> ids, bool skip_special_tokens) const {
  std::string out;
  for (int32_t id : ids) {
    const Added* added = nullptr;
    for (const Added& a : added_) {
      if (a.id == id) added = &a;
    }
    if (added != nullptr) {
      if (!(skip_special_tokens && added->special)) out += added->content;
      continue;
    }
    if (id < 0 || id >= bpe_->vocab_size()) {
      return absl::OutOfRangeError(absl::StrCat("token id ", id, " is outside the vocabulary (", vocab_size(), ")"));
    }
    const std::string& token = bpe_->Token(id);
    if (decoder_ == Decoder::kByteLevel) {
      ZT_ASSIGN_OR_RETURN(std::u32string cps, DecodeUtf8(token));
      for (char32_t c : cps) {
        const int b = UnicodeToByte(c);
        if (b >= 0) {
          out.push_back(static_cast<char>(b));
        } else {
          out += EncodeUtf8(std::u32string_view(&c, 1));
        }
      }
    } else if (decoder_ == Decoder::kSentencePiece) {
      unsigned int byte = 0;
      if (token.size() == 6 && absl::StartsWith(token, "<0x") && token[5] == '>' &&
          std::sscanf(token.c_str() + 3, "%2x", &byte) == 1) {
        out.push_back(static_cast<char>(byte));
      } else {
        out += ReplaceAll(token, "\xE2\x96\x81", " ");
      }
    } else {
      out += token;
    }
  }
  for (int k = 0; k < strip_start_ && !out.empty() && out[0] == ' '; ++k) out.erase(out.begin());
  return out;
}

int32_t HfTokenizer::vocab_size() const {
  int32_t n = bpe_->vocab_size();
  for (const Added& a : added_) n = std::max(n, a.id + 1);
  return n;
}

int32_t HfTokenizer::TokenId(std::string_view token) const {
  for (const Added& a : added_) {
    if (a.content == token) return a.id;
  }
  return bpe_->Id(token);
}

std::string HfTokenizer::Describe() const {
  const char* split = !split_.has_value()                    ? "no split"
                      : *split_ == SplitPattern::kGpt2       ? "GPT-2 split"
                      : *split_ == SplitPattern::kLlama3     ? "LLaMA-3 split"
                                                             : "Qwen2 split";
  return absl::StrFormat("%s BPE (%s), %d tokens + %d added, from %s", byte_level_ ? "byte-level" : "character",
                         split, bpe_->vocab_size(), added_.size(), source_);
}

}  // namespace zt::data
