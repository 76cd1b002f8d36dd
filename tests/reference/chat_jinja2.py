"""Renders conversations with a tokenizer_config.json's chat template through
Python's Jinja2, set up as transformers' apply_chat_template sets it up
(transformers/utils/chat_template_utils.py: an ImmutableSandboxedEnvironment
with trim_blocks, lstrip_blocks and the loopcontrols extension, its own tojson
filter, raise_exception raising TemplateError; the special token strings as
variables, tools and documents none). The C++ chat template tests compare
against it (tests/data/chat_template_test.cc); chat.js is the JavaScript
reference, which cannot parse every real template.

  python3 chat_jinja2.py TOKENIZER_CONFIG.json IN.json OUT.json

IN.json and OUT.json are as for chat.js: conversations in, and for each
{"plain": ..., "prompt": ...} out (add_generation_prompt false and true), each
a string or {"error": MESSAGE} where the template raises.
"""
import json
import sys

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def token(config, key):
    value = config.get(key)
    if isinstance(value, dict):
        value = value.get("content")
    return value


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: python3 chat_jinja2.py TOKENIZER_CONFIG.json IN.json OUT.json")
    config_path, in_path, out_path = sys.argv[1:]
    with open(config_path, encoding="utf-8") as f:
        config = json.load(f)
    source = config["chat_template"]
    if isinstance(source, list):
        source = {t["name"]: t["template"] for t in source}["default"]
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    template = env.from_string(source)
    tokens = {}
    for key in ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"):
        if token(config, key) is not None:
            tokens[key] = token(config, key)

    def render(messages, add_generation_prompt):
        try:
            return template.render(messages=messages, tools=None, documents=None,
                                   add_generation_prompt=add_generation_prompt, **tokens)
        except jinja2.exceptions.TemplateError as e:
            return {"error": str(e)}

    with open(in_path, encoding="utf-8") as f:
        conversations = json.load(f)
    out = [{"plain": render(m, False), "prompt": render(m, True)} for m in conversations]
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False)


if __name__ == "__main__":
    main()
