// Implementation of tokenizer/hf_tokenizer.h: the loader reads tokenizer.json
// (or vocab.json + merges.txt) key by key, refusing what it does not
// implement; Encode/Decode run the pipeline.
#include "tokenizer/hf_tokenizer.h"

#include <unicode/locid.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "util/file_io.h"
#include "util/json_reader.h"
#include "util/limits.h"
#include "util/status.h"
#include "util/strings.h"

namespace zt::data {

using Json = nlohmann::ordered_json;  // as util/json_reader reads it
using Vocabulary = absl::flat_hash_map<std::string, int32_t>;

namespace {

// tokenizer.json holds the whole vocabulary (11 MB for Qwen3); far more is
// not a tokenizer.
absl::StatusOr<std::string> ReadText(const std::string& path) { return ReadSmallFile(path, size_t{1} << 30); }

// NFC or NFD of `cps`; unchanged if ICU fails (it does not on valid text).
std::u32string IcuNormalize(const std::u32string& cps, bool nfd) {
  UErrorCode err = U_ZERO_ERROR;
  const icu::Normalizer2* n = nfd ? icu::Normalizer2::getNFDInstance(err) : icu::Normalizer2::getNFCInstance(err);
  if (U_FAILURE(err)) return cps;
  const icu::UnicodeString s =
      icu::UnicodeString::fromUTF32(reinterpret_cast<const UChar32*>(cps.data()), static_cast<int32_t>(cps.size()));
  const icu::UnicodeString out = n->normalize(s, err);
  if (U_FAILURE(err)) return cps;
  std::u32string result;
  for (int32_t i = 0; i < out.length(); i = out.moveIndex32(i, 1)) result.push_back(out.char32At(i));
  return result;
}

// Appends the full lowercase of one character (U+0130 is two), without
// context: Rust's char::to_lowercase, which the `tokenizers` library applies
// character by character, so a word-final capital sigma becomes σ, not ς.
void AppendLower(char32_t c, std::u32string* out) {
  if (c < 0x80) {
    out->push_back(c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c);
    return;
  }
  icu::UnicodeString s(static_cast<UChar32>(c));
  s.toLower(icu::Locale::getRoot());
  for (int32_t i = 0; i < s.length(); i = s.moveIndex32(i, 1)) out->push_back(s.char32At(i));
}

// BertNormalizer's classes, as the `tokenizers` library's normalizers/bert.rs
// defines them. Control: Unicode categories Cc, Cf, Co (unicode_categories'
// is_other), except \t \n \r, which are whitespace.
bool IsBertControl(char32_t c) {
  if (c == '\t' || c == '\n' || c == '\r') return false;
  const int8_t t = u_charType(static_cast<UChar32>(c));
  return t == U_CONTROL_CHAR || t == U_FORMAT_CHAR || t == U_PRIVATE_USE_CHAR;
}

// CJK ideographs, the ranges of bert.rs. They are those of BERT's Python
// _is_chinese_char except that Rust starts the Extension E range at U+2B920
// where BERT has U+2B820; tokenizer.json means the Rust library, so U+2B820
// to U+2B91F are not spaced out here either.
bool IsBertChinese(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

// BertPreTokenizer's punctuation: ASCII punctuation (which includes symbols
// such as $ + < = > ^ ` | ~) and the Unicode P* categories.
bool IsBertPunctuation(char32_t c) {
  if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126)) return true;
  switch (u_charType(static_cast<UChar32>(c))) {
    case U_CONNECTOR_PUNCTUATION:
    case U_DASH_PUNCTUATION:
    case U_START_PUNCTUATION:
    case U_END_PUNCTUATION:
    case U_INITIAL_PUNCTUATION:
    case U_FINAL_PUNCTUATION:
    case U_OTHER_PUNCTUATION: return true;
    default: return false;
  }
}

// BertPreTokenizer: words between whitespace, each punctuation character a
// word of its own.
std::vector<std::pair<size_t, size_t>> BertSplit(std::u32string_view cps) {
  std::vector<std::pair<size_t, size_t>> pieces;
  size_t start = 0;
  for (size_t i = 0; i <= cps.size(); ++i) {
    const bool end = i == cps.size();
    if (end || IsWhitespace(cps[i]) || IsBertPunctuation(cps[i])) {
      if (i > start) pieces.emplace_back(start, i);
      if (!end && !IsWhitespace(cps[i])) pieces.emplace_back(i, i + 1);
      start = i + 1;
    }
  }
  return pieces;
}

// Every occurrence of `from` in `s` replaced, left to right (UTF-8 bytes or
// code points).
template <typename Str>
Str ReplaceAll(const Str& s, const Str& from, const Str& to) {
  if (from.empty()) return s;
  Str out;
  size_t at = 0;
  for (size_t hit; (hit = s.find(from, at)) != Str::npos; at = hit + from.size()) {
    out.append(s, at, hit - at);
    out.append(to);
  }
  out.append(s, at, Str::npos);
  return out;
}

// The WordPiece decoder's cleanup, applied to each token as the `tokenizers`
// library does (so " do not" never matches within one BERT token).
std::string WordPieceCleanup(std::string s) {
  static const std::pair<const char*, const char*> kRules[] = {
      {" .", "."},   {" ?", "?"},           {" !", "!"},   {" ,", ","},     {" ' ", "'"},    {" n't", "n't"},
      {" 'm", "'m"}, {" do not", " don't"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"},
  };
  for (const auto& [from, to] : kRules) s = ReplaceAll<std::string>(s, from, to);
  return s;
}

// UTF-32 of a UTF-8 string from tokenizer.json (nlohmann validated it).
std::u32string U32(const std::string& utf8) {
  absl::StatusOr<std::u32string> cps = DecodeUtf8(utf8);
  return cps.ok() ? *std::move(cps) : std::u32string();
}

}  // namespace

// Reads one tokenizer.json into an HfTokenizer; every error names the file
// and the JSON key.
// A tokenizer's JSON file (tokenizer.json, vocab.json), read bounded: at
// most `max_depth` levels (real tokenizer.json files nest about 6; the
// loader walks sub-trees recursively, so thousands would overflow the
// stack), no object larger than the vocabulary limit (the largest object is
// the vocabulary), errors as InvalidArgument naming the file.
absl::StatusOr<Json> ReadTokenizerJson(const std::string& text, const std::string& path, int max_depth) {
  JsonReadLimits limits;
  limits.max_depth = max_depth;
  limits.max_object_keys = LimitValue(Limit::kTokenizerVocab);
  limits.object_keys_note = LimitNote(Limit::kTokenizerVocab);
  auto parsed = ReadJsonText(text, path, limits);
  if (!parsed.ok()) return absl::InvalidArgumentError(parsed.status().message());
  return parsed;
}

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
                                   "Qwen2/3; WordPiece models with BERT's)"));
  }

  // A token id from the file: an integer in [0, the vocabulary limit), read
  // as 64 bits first (nlohmann's get<int32_t> wraps 2^32 + 5 to 5).
  absl::StatusOr<int32_t> TokenId(const Json& v, const std::string& key, const std::string& token) const {
    if (!v.is_number_integer()) return Error(key, absl::StrCat("'", token, "' has no integer id"));
    const int64_t limit = LimitValue(Limit::kTokenizerVocab);
    if (v.is_number_unsigned() ? v.get<uint64_t>() >= static_cast<uint64_t>(limit) : v.get<int64_t>() < 0) {
      return Error(key, absl::StrCat("'", token, "' has id ", v.dump(), "; ids lie in [0, ", limit,
                                     "): ", LimitNote(Limit::kTokenizerVocab)));
    }
    return static_cast<int32_t>(v.get<int64_t>());
  }
  // model.vocab: token -> id (ReadTokenizerJson bounded how many).
  absl::StatusOr<Vocabulary> Vocab(const Json& v, const std::string& key) const {
    Vocabulary vocab;
    vocab.reserve(v.size());
    for (auto it = v.begin(); it != v.end(); ++it) {
      ZT_ASSIGN_OR_RETURN(vocab[it.key()], TokenId(it.value(), key, it.key()));
    }
    return vocab;
  }

  absl::Status FromJson(const Json& j) {
    if (!j.is_object() || !j.contains("model")) return Error("model", "missing: this is not a tokenizer.json");
    ZT_RETURN_IF_ERROR(Model(j["model"]));
    ZT_RETURN_IF_ERROR(Normalizer(j.value("normalizer", Json()), "normalizer"));
    ZT_RETURN_IF_ERROR(PreTokenizer(j.value("pre_tokenizer", Json()), "pre_tokenizer"));
    ZT_RETURN_IF_ERROR(AddedTokens(j.value("added_tokens", Json::array())));
    ZT_RETURN_IF_ERROR(PostProcessor(j.value("post_processor", Json()), "post_processor"));
    ZT_RETURN_IF_ERROR(DecoderOf(j.value("decoder", Json())));
    if (t_->bert_split_ && (t_->byte_level_ || t_->split_.has_value())) {
      return Error("pre_tokenizer", "BertPreTokenizer together with ByteLevel or Split is not supported");
    }
    if (t_->wordpiece_.has_value() && t_->byte_level_) {
      return Error("pre_tokenizer", "a WordPiece model with ByteLevel is not supported");
    }
    return absl::OkStatus();
  }

  // GPT-2's original files: vocab.json (token -> id) and merges.txt.
  absl::Status FromVocabAndMerges(const std::string& vocab_path, const std::string& merges_path) {
    ZT_ASSIGN_OR_RETURN(std::string vocab_text, ReadText(vocab_path));
    ZT_ASSIGN_OR_RETURN(std::string merges_text, ReadText(merges_path));
    ZT_ASSIGN_OR_RETURN(const Json vocab, ReadTokenizerJson(vocab_text, vocab_path, /*max_depth=*/1));
    if (!vocab.is_object())
      return absl::InvalidArgumentError(absl::StrCat(vocab_path, ": not a JSON object of tokens"));
    const HfTokenizerLoader in_vocab(t_, vocab_path);
    ZT_ASSIGN_OR_RETURN(Vocabulary v, in_vocab.Vocab(vocab, "token ids"));
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
    if (m.is_object() && m.value("type", std::string()) == "WordPiece") return WordPieceModel(m);
    if (!m.is_object() || m.value("type", std::string("BPE")) != "BPE") return Unsupported("model.type", m);
    if (!m.contains("vocab") || !m["vocab"].is_object()) return Error("model.vocab", "missing or not an object");
    if (!m.contains("merges") || !m["merges"].is_array()) return Error("model.merges", "missing or not an array");
    if (m.contains("dropout") && !m["dropout"].is_null() && m["dropout"].get<double>() != 0.0) {
      return Error("model.dropout", "BPE dropout is for training the tokenizer; set it to null");
    }
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
      if (!NullOrEmpty(m, key)) return Error(absl::StrCat("model.", key), "is not supported (set it to null)");
    }
    ZT_ASSIGN_OR_RETURN(Vocabulary vocab, Vocab(m["vocab"], "model.vocab"));
    if (static_cast<int64_t>(m["merges"].size()) > LimitValue(Limit::kTokenizerMerges)) {
      return Error("model.merges", absl::StrCat(m["merges"].size(), " merges; ", LimitNote(Limit::kTokenizerMerges)));
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

  // {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix":
  // "##", "max_input_chars_per_word": 100, "vocab": {...}}.
  absl::Status WordPieceModel(const Json& m) {
    if (!m.contains("vocab") || !m["vocab"].is_object()) return Error("model.vocab", "missing or not an object");
    if (!m.contains("unk_token") || !m["unk_token"].is_string()) {
      return Error("model.unk_token", "missing or not a string (BERT's is \"[UNK]\")");
    }
    std::string prefix = "##";
    if (m.contains("continuing_subword_prefix")) {
      if (!m["continuing_subword_prefix"].is_string()) return Error("model.continuing_subword_prefix", "not a string");
      prefix = m["continuing_subword_prefix"].get<std::string>();
    }
    int max_chars = 100;
    if (m.contains("max_input_chars_per_word")) {
      if (!m["max_input_chars_per_word"].is_number_unsigned()) {
        return Error("model.max_input_chars_per_word", "not a non-negative integer");
      }
      max_chars = m["max_input_chars_per_word"].get<int>();
    }
    ZT_ASSIGN_OR_RETURN(Vocabulary vocab, Vocab(m["vocab"], "model.vocab"));
    absl::StatusOr<WordPiece> wp =
        WordPiece::Create(std::move(vocab), m["unk_token"].get<std::string>(), std::move(prefix), max_chars);
    if (!wp.ok()) return Error("model", std::string(wp.status().message()));
    t_->wordpiece_.emplace(std::move(*wp));
    return absl::OkStatus();
  }

  void AddStep(HfTokenizer::NormalizeStep::Kind kind, std::u32string text = {}, std::u32string with = {}) {
    t_->normalizer_.push_back({kind, std::move(text), std::move(with)});
  }

  static bool BoolOr(const Json& j, const char* key, bool fallback) {
    return j.contains(key) && j[key].is_boolean() ? j[key].get<bool>() : fallback;
  }

  absl::Status Normalizer(const Json& n, const std::string& key) {
    if (n.is_null()) return absl::OkStatus();
    const std::string type = n.value("type", std::string());
    if (type == "Sequence") {
      for (const Json& e : n.value("normalizers", Json::array()))
        ZT_RETURN_IF_ERROR(Normalizer(e, key + ".normalizers"));
      return absl::OkStatus();
    }
    using Step = HfTokenizer::NormalizeStep;
    if (type == "NFC" || type == "NFD") {
      AddStep(type == "NFC" ? Step::kNfc : Step::kNfd);
      return absl::OkStatus();
    }
    if (type == "Lowercase" || type == "StripAccents") {
      AddStep(type == "Lowercase" ? Step::kLowercase : Step::kStripMarks);
      return absl::OkStatus();
    }
    if (type == "Prepend" && n.contains("prepend") && n["prepend"].is_string()) {
      AddStep(Step::kPrepend, U32(n["prepend"].get<std::string>()));
      return absl::OkStatus();
    }
    if (type == "Replace" && n.contains("pattern") && n["pattern"].contains("String") && n.contains("content")) {
      AddStep(Step::kReplace, U32(n["pattern"]["String"].get<std::string>()), U32(n["content"].get<std::string>()));
      return absl::OkStatus();
    }
    if (type == "BertNormalizer") {
      // The `tokenizers` library's order: clean, CJK, strip accents, lowercase;
      // strip_accents null follows lowercase.
      const bool lowercase = BoolOr(n, "lowercase", true);
      if (BoolOr(n, "clean_text", true)) AddStep(Step::kBertClean);
      if (BoolOr(n, "handle_chinese_chars", true)) AddStep(Step::kBertChinese);
      if (BoolOr(n, "strip_accents", lowercase)) {
        AddStep(Step::kNfd);
        AddStep(Step::kStripMarks);
      }
      if (lowercase) AddStep(Step::kLowercase);
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
    if (type == "BertPreTokenizer") {
      t_->bert_split_ = true;
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
      HfTokenizer::Added added{e["content"].get<std::string>(), 0, e.value("special", false)};
      ZT_ASSIGN_OR_RETURN(added.id, TokenId(e["id"], "added_tokens", added.content));
      for (const char* flag : {"single_word", "lstrip", "rstrip"}) {
        if (e.value(flag, false)) {
          return Error("added_tokens",
                       absl::StrCat("'", added.content, "' has ", flag, " set, which is not supported"));
        }
      }
      if (e.value("normalized", false) && !t_->normalizer_.empty() && !added.special) {
        return Error("added_tokens",
                     absl::StrCat("'", added.content, "' is matched after normalization, which is not supported"));
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
      for (const Json& e : p.value("processors", Json::array()))
        ZT_RETURN_IF_ERROR(PostProcessor(e, key + ".processors"));
      return absl::OkStatus();
    }
    if (type == "ByteLevel") return absl::OkStatus();  // offsets only
    if (type == "BertProcessing") {
      // {"sep": ["[SEP]", 102], "cls": ["[CLS]", 101]}: [CLS] text [SEP].
      int32_t ids[2];
      const char* names[2] = {"cls", "sep"};
      for (int k = 0; k < 2; ++k) {
        const Json& e = p.value(names[k], Json());
        if (!e.is_array() || e.size() != 2 || !e[0].is_string() || !e[1].is_number_integer()) {
          return Error(absl::StrCat(key, ".", names[k]), "missing or not [\"token\", id]");
        }
        ZT_ASSIGN_OR_RETURN(ids[k], TokenId(e[1], absl::StrCat(key, ".", names[k]), e[0].get<std::string>()));
      }
      t_->prefix_ids_.push_back(ids[0]);
      t_->suffix_ids_.push_back(ids[1]);
      return absl::OkStatus();
    }
    if (type == "TemplateProcessing" && p.contains("single") && p["single"].is_array()) {
      const Json& specials = p.value("special_tokens", Json::object());
      bool after = false;
      for (const Json& piece : p["single"]) {
        if (piece.contains("Sequence")) {
          after = true;
          continue;
        }
        if (!piece.contains("SpecialToken"))
          return Error(key + ".single", "an entry that is neither Sequence nor SpecialToken");
        // nlohmann's const operator[] on a non-object or a missing key is
        // undefined behaviour (an assertion in debug builds), not an error.
        const Json& special = piece["SpecialToken"];
        if (!special.is_object() || !special.contains("id") || !special["id"].is_string()) {
          return Error(key + ".single", "a SpecialToken without a string \"id\"");
        }
        const std::string name = special["id"].get<std::string>();
        if (!specials.contains(name) || !specials[name].contains("ids")) {
          return Error(key + ".special_tokens", absl::StrCat("'", name, "' is used but not defined"));
        }
        for (const Json& id : specials[name]["ids"]) {
          ZT_ASSIGN_OR_RETURN(const int32_t v, TokenId(id, key + ".special_tokens", name));
          (after ? t_->suffix_ids_ : t_->prefix_ids_).push_back(v);
        }
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
    if (type == "WordPiece") {
      if (d.contains("prefix") && !d["prefix"].is_string()) return Error("decoder.prefix", "not a string");
      t_->wordpiece_prefix_ = d.value("prefix", std::string("##"));
      t_->wordpiece_cleanup_ = BoolOr(d, "cleanup", true);
      t_->decoder_ = HfTokenizer::Decoder::kWordPiece;
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

absl::StatusOr<HfTokenizer::Files> HfTokenizer::Locate(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  Files files;
  if (fs::is_directory(path, ec)) {
    const std::string json = (fs::path(path) / "tokenizer.json").string();
    if (fs::exists(json, ec)) {
      files.json = json;
      return files;
    }
    for (const auto& [v, m] : {std::pair{"vocab.json", "merges.txt"}, std::pair{"encoder.json", "vocab.bpe"}}) {
      const std::string vp = (fs::path(path) / v).string(), mp = (fs::path(path) / m).string();
      if (fs::exists(vp, ec) && fs::exists(mp, ec)) {
        files.vocab = vp;
        files.merges = mp;
        return files;
      }
    }
    return absl::NotFoundError(absl::StrCat("no tokenizer in '", path,
                                            "': it holds neither tokenizer.json nor vocab.json + merges.txt "
                                            "(encoder.json + vocab.bpe)"));
  }
  if (!fs::exists(path, ec)) return absl::NotFoundError(absl::StrCat("tokenizer '", path, "' does not exist"));
  files.json = path;
  return files;
}

absl::StatusOr<std::unique_ptr<HfTokenizer>> HfTokenizer::Load(const std::string& path) {
  ZT_ASSIGN_OR_RETURN(const Files files, Locate(path));
  std::unique_ptr<HfTokenizer> t(new HfTokenizer());
  if (files.json.empty()) {
    HfTokenizerLoader loader(t.get(), files.vocab);
    try {
      ZT_RETURN_IF_ERROR(loader.FromVocabAndMerges(files.vocab, files.merges));
    } catch (const Json::exception& e) {
      return absl::InvalidArgumentError(
          absl::StrCat(files.vocab, ": an entry has the wrong JSON type (", e.what(), ")"));
    }
    t->source_ = files.vocab;
    t->IndexAdded();
    return t;
  }
  const std::string& json_path = files.json;
  ZT_ASSIGN_OR_RETURN(std::string text, ReadText(json_path));
  // Not JSON: llama2.c's binary tokenizer.bin.
  const size_t bom = text.compare(0, 3, "\xEF\xBB\xBF") == 0 ? 3 : 0;  // JSON may start with a UTF-8 BOM
  if (const size_t first = text.find_first_not_of(" \t\r\n", bom); first != std::string::npos && text[first] != '{') {
    absl::StatusOr<Llama2cTokenizer> l = Llama2cTokenizer::Open(json_path);
    if (!l.ok()) {
      return absl::Status(l.status().code(), absl::StrCat("tokenizer ", json_path,
                                                          " is not a tokenizer.json, nor a llama2.c tokenizer.bin: ",
                                                          l.status().message()));
    }
    t->llama2c_ = std::move(*l);
    t->source_ = json_path;
    return t;
  }
  ZT_ASSIGN_OR_RETURN(const Json j, ReadTokenizerJson(text, json_path, /*max_depth=*/64));
  HfTokenizerLoader loader(t.get(), json_path);
  // A field of the wrong JSON type where the loader reads it directly is
  // nlohmann's type_error: the file's error, not a crash.
  try {
    ZT_RETURN_IF_ERROR(loader.FromJson(j));
  } catch (const Json::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(json_path, ": a field has the wrong JSON type for a tokenizer.json (", e.what(), ")"));
  }
  t->source_ = json_path;
  t->IndexAdded();
  return t;
}

void HfTokenizer::IndexAdded() {
  for (const Added& a : added_) added_first_byte_[static_cast<unsigned char>(a.content[0])] = true;
}

absl::Status HfTokenizer::EncodeSection(std::string_view section, std::vector<int32_t>* ids) const {
  if (section.empty()) return absl::OkStatus();
  ZT_ASSIGN_OR_RETURN(std::u32string cps, DecodeUtf8(section));
  using Step = NormalizeStep;
  for (const NormalizeStep& step : normalizer_) {
    std::u32string out;
    switch (step.kind) {
      case Step::kNfc:
      case Step::kNfd: cps = IcuNormalize(cps, step.kind == Step::kNfd); continue;
      case Step::kPrepend:
        if (!cps.empty()) cps = step.text + cps;
        continue;
      case Step::kReplace: cps = ReplaceAll<std::u32string>(cps, step.text, step.with); continue;
      case Step::kLowercase:
        out.reserve(cps.size());
        for (char32_t c : cps) AppendLower(c, &out);
        break;
      case Step::kStripMarks:
        out.reserve(cps.size());
        for (char32_t c : cps) {
          if (u_charType(static_cast<UChar32>(c)) != U_NON_SPACING_MARK) out.push_back(c);
        }
        break;
      case Step::kBertClean:
        out.reserve(cps.size());
        for (char32_t c : cps) {
          if (c == 0 || c == 0xFFFD || IsBertControl(c)) continue;
          out.push_back(c == '\t' || c == '\n' || c == '\r' || IsWhitespace(c) ? U' ' : c);
        }
        break;
      case Step::kBertChinese:
        out.reserve(cps.size());
        for (char32_t c : cps) {
          if (IsBertChinese(c)) {
            out += U' ';
            out += c;
            out += U' ';
          } else {
            out.push_back(c);
          }
        }
        break;
    }
    cps = std::move(out);
  }
  if (cps.empty()) return absl::OkStatus();
  if (add_prefix_space_ && cps[0] != U' ') cps.insert(cps.begin(), U' ');
  const std::vector<std::pair<size_t, size_t>> pieces = bert_split_ ? BertSplit(cps)
                                                        : split_.has_value()
                                                            ? SplitByPattern(cps, *split_)
                                                            : std::vector<std::pair<size_t, size_t>>{{0, cps.size()}};
  std::vector<std::string> chars;
  for (const auto& [b, e] : pieces) {
    const std::u32string_view piece(cps.data() + b, e - b);
    if (wordpiece_.has_value()) {
      wordpiece_->Encode(piece, ids);
      continue;
    }
    chars.clear();
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
  if (llama2c_.has_value()) return llama2c_->Encode(text, /*bos=*/add_special_tokens, /*eos=*/false);
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
  if (llama2c_.has_value()) {
    // run.c's decode, token after token (a piece after BOS loses its leading
    // space); skipped special tokens still count as the previous token.
    int32_t prev = -1;
    for (int32_t id : ids) {
      if (id < 0 || id >= vocab_size()) {
        return absl::OutOfRangeError(absl::StrCat("token id ", id, " is outside the vocabulary (", vocab_size(), ")"));
      }
      if (!(skip_special_tokens && id <= Llama2cTokenizer::kEos)) out += llama2c_->Decode(prev, id);
      prev = id;
    }
    return out;
  }
  if (decoder_ == Decoder::kWordPiece) {
    // The decoder sees every token, added ones included, as in the
    // `tokenizers` library: joined by spaces, a prefixed piece glued on.
    bool first = true;
    for (int32_t id : ids) {
      const Added* added = nullptr;
      for (const Added& a : added_) {
        if (a.id == id) added = &a;
      }
      if (added != nullptr && skip_special_tokens && added->special) continue;
      if (added == nullptr && (id < 0 || id >= ModelVocabSize())) {
        return absl::OutOfRangeError(absl::StrCat("token id ", id, " is outside the vocabulary (", vocab_size(), ")"));
      }
      std::string token = added != nullptr ? added->content : ModelToken(id);
      if (!first) {
        token = absl::StartsWith(token, wordpiece_prefix_) ? token.substr(wordpiece_prefix_.size()) : " " + token;
      }
      out += wordpiece_cleanup_ ? WordPieceCleanup(std::move(token)) : token;
      first = false;
    }
    return out;
  }
  for (int32_t id : ids) {
    const Added* added = nullptr;
    for (const Added& a : added_) {
      if (a.id == id) added = &a;
    }
    if (added != nullptr) {
      if (!(skip_special_tokens && added->special)) out += added->content;
      continue;
    }
    if (id < 0 || id >= ModelVocabSize()) {
      return absl::OutOfRangeError(absl::StrCat("token id ", id, " is outside the vocabulary (", vocab_size(), ")"));
    }
    const std::string& token = ModelToken(id);
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
        out += ReplaceAll<std::string>(token, "\xE2\x96\x81", " ");
      }
    } else {
      out += token;
    }
  }
  for (int k = 0; k < strip_start_ && !out.empty() && out[0] == ' '; ++k) out.erase(out.begin());
  return out;
}

int32_t HfTokenizer::ModelVocabSize() const {
  return wordpiece_.has_value() ? wordpiece_->vocab_size() : bpe_->vocab_size();
}

const std::string& HfTokenizer::ModelToken(int32_t id) const {
  return wordpiece_.has_value() ? wordpiece_->Token(id) : bpe_->Token(id);
}

int32_t HfTokenizer::ModelId(std::string_view token) const {
  return wordpiece_.has_value() ? wordpiece_->Id(token) : bpe_->Id(token);
}

int32_t HfTokenizer::vocab_size() const {
  if (llama2c_.has_value()) return static_cast<int32_t>(llama2c_->vocab_size());
  int32_t n = ModelVocabSize();
  for (const Added& a : added_) n = std::max(n, a.id + 1);
  return n;
}

int32_t HfTokenizer::TokenId(std::string_view token) const {
  if (llama2c_.has_value()) {
    // The special pieces are "<unk>", "\n<s>\n" and "\n</s>\n" in the file.
    if (token == "<unk>") return 0;
    if (token == "<s>") return Llama2cTokenizer::kBos;
    if (token == "</s>") return Llama2cTokenizer::kEos;
    return llama2c_->Id(std::string(token));
  }
  for (const Added& a : added_) {
    if (a.content == token) return a.id;
  }
  return ModelId(token);
}

std::string HfTokenizer::Describe() const {
  if (llama2c_.has_value()) {
    return absl::StrFormat("llama2.c tokenizer.bin (BPE by score, byte fallback), %d tokens, from %s",
                           llama2c_->vocab_size(), source_);
  }
  if (wordpiece_.has_value()) {
    const bool lowercase = std::any_of(normalizer_.begin(), normalizer_.end(),
                                       [](const NormalizeStep& s) { return s.kind == NormalizeStep::kLowercase; });
    return absl::StrFormat("WordPiece (%s%s), %d tokens + %d added, from %s", bert_split_ ? "BERT" : "no split",
                           lowercase ? ", lowercase" : "", wordpiece_->vocab_size(), added_.size(), source_);
  }
  const char* split = !split_.has_value()                ? "no split"
                      : *split_ == SplitPattern::kGpt2   ? "GPT-2 split"
                      : *split_ == SplitPattern::kLlama3 ? "LLaMA-3 split"
                                                         : "Qwen2 split";
  return absl::StrFormat("%s BPE (%s), %d tokens + %d added, from %s", byte_level_ ? "byte-level" : "character", split,
                         bpe_->vocab_size(), added_.size(), source_);
}

}  // namespace zt::data
