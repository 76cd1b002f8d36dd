// Renders conversations with the chat templates of real tokenizers, through
// transformers.js's apply_chat_template (@lenml/tokenizers, which bundles
// @huggingface/jinja), for the C++ chat template tests to compare against
// (tests/data/chat_template_test.cc).
//
//   node chat.js NAME IN.json OUT.json
//
// NAME: llama3, qwen3, gemma3, deepseek_v3 (the @lenml/tokenizer-NAME
// package, whose models/tokenizer_config.json holds the template). IN.json is
// an array of conversations, each an array of {"role", "content", ...}
// messages; OUT.json gets, for each, {"plain": ..., "prompt": ...}: the
// render with add_generation_prompt false and true, each either a string or
// {"error": MESSAGE} where rendering throws (raise_exception in the template),
// and where it renders, "plain_ids" / "prompt_ids": the token ids of
// apply_chat_template(tokenize=true), for the supervised data tests.
"use strict";
const fs = require("fs");

const [name, input, output] = process.argv.slice(2);
if (!output) {
  console.error("usage: node chat.js NAME IN.json OUT.json");
  process.exit(2);
}
const packages = ["llama3", "qwen3", "gemma3", "deepseek_v3"];
if (!packages.includes(name)) throw new Error(`unknown tokenizer '${name}' (${packages.join(", ")})`);
const tok = require(`@lenml/tokenizer-${name}`).fromPreTrained();

function render(messages, addGenerationPrompt) {
  try {
    return tok.apply_chat_template(messages, { tokenize: false, add_generation_prompt: addGenerationPrompt });
  } catch (e) {
    return { error: e.message };
  }
}

const conversations = JSON.parse(fs.readFileSync(input, "utf8"));
function ids(messages, addGenerationPrompt) {
  try {
    return Array.from(tok.apply_chat_template(messages, { tokenize: true, add_generation_prompt: addGenerationPrompt }));
  } catch (e) {
    return null;
  }
}

const out = conversations.map((m) => ({
  plain: render(m, false),
  prompt: render(m, true),
  plain_ids: ids(m, false),
  prompt_ids: ids(m, true),
}));
fs.writeFileSync(output, JSON.stringify(out));
