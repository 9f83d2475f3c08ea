// defines: read_tokenizer_json (formats/bpe_tokenizer.h) — Hugging Face's tokenizer.json of a
//          byte-level BPE, in GPT-2's shape or the tiktoken family's (Llama 3, cl100k_base,
//          o200k_base as transformers converts them), and the BOS / EOS its config files give.
//          file-local: null_or, only_keys, read_tiktoken_pre_tokenizer, check_tiktoken_document,
//          read_added_tokens, token_text, config_ids, read_special_configs. Layer formats/.
//
// The two shapes differ in the pre-tokenizer only (and in what a tiktoken file may add):
//   GPT-2's     {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true}
//   tiktoken's  {"type": "Sequence", "pretokenizers": [
//                  {"type": "Split", "pattern": {"Regex": "<the encoding's pat_str>"},
//                   "behavior": "Isolated", "invert": false},
//                  {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false, ...}]}
// A tiktoken-family file is read strictly: every key of the document, the pre-tokenizer, the
// decoder and the model must be one this reader implements, with a value it implements; anything
// else is refused naming the file, the key, the value and what is expected, so a file never
// loads as a tokenizer that gives other ids than Hugging Face's. GPT-2's shape is read as it
// always was (the keys that matter are checked; others are left alone).
#include <filesystem>

#include "core/check.h"
#include "core/json.h"
#include "formats/bpe_file_parts.h"
#include "formats/bpe_tokenizer.h"

namespace zt {

namespace {

using namespace bpe_files;
using json = nlohmann::json;

bool null_or(const json& o, const char* key, const json& ok) {
  return !o.contains(key) || o[key].is_null() || o[key] == ok;
}

// Every key of the object `o` (at `field`) must be one of `known`.
void only_keys(const json& o, const std::string& what, const std::string& field,
               std::initializer_list<const char*> known, const std::string& why) {
  for (auto it = o.begin(); it != o.end(); ++it) {
    bool ok = false;
    for (const char* k : known) ok |= it.key() == k;
    std::string names;
    for (const char* k : known) names += std::string(names.empty() ? "" : ", ") + k;
    need(ok, what, field + "." + it.key(), describe(it.value()),
         "a key this reader does not implement (" + why + "; known: " + names + ")");
  }
}

// The tiktoken family's pre-tokenizer (the shape above) -> its split regex.
std::string read_tiktoken_pre_tokenizer(const json& pre, const std::string& what) {
  only_keys(pre, what, "pre_tokenizer", {"type", "pretokenizers"}, "expected a Sequence of a Split and a ByteLevel");
  const json& seq = pre.value("pretokenizers", json());
  need(seq.is_array() && seq.size() == 2 && seq[0].is_object() && seq[1].is_object() &&
           seq[0].value("type", json()) == "Split" && seq[1].value("type", json()) == "ByteLevel",
       what, "pre_tokenizer.pretokenizers", describe(seq),
       "expected the tiktoken family's two: [{\"type\": \"Split\", ...}, {\"type\": \"ByteLevel\", ...}]");
  const json& split = seq[0];
  const std::string sf = "pre_tokenizer.pretokenizers[0]";
  only_keys(split, what, sf, {"type", "pattern", "behavior", "invert"},
            "a Split takes a pattern, a behavior and invert");
  const json& pat = split.value("pattern", json());
  need(pat.is_object() && pat.size() == 1 && pat.contains("Regex") && pat["Regex"].is_string(), what, sf + ".pattern",
       describe(pat), "expected {\"Regex\": \"...\"} (a literal {\"String\": ...} pattern is not implemented)");
  const json& behavior = split.value("behavior", json());
  need(behavior == "Isolated", what, sf + ".behavior", describe(behavior),
       "only \"Isolated\" is implemented (each match a piece of its own, as tiktoken splits)");
  const json& invert = split.value("invert", json(false));
  need(invert == false, what, sf + ".invert", describe(invert),
       "only false is implemented (the matches are the pieces)");
  const json& bl = seq[1];
  const std::string bf = "pre_tokenizer.pretokenizers[1]";
  only_keys(bl, what, bf, {"type", "add_prefix_space", "trim_offsets", "use_regex"}, "a ByteLevel takes these");
  need(null_or(bl, "add_prefix_space", false), what, bf + ".add_prefix_space",
       describe(bl.value("add_prefix_space", json())), "only false is implemented (no space is added before the text)");
  need(bl.value("use_regex", json()) == false, what, bf + ".use_regex", describe(bl.value("use_regex", json())),
       "expected false: the Split before it already cut the text (true would split it again by GPT-2's pattern)");
  need(bl.value("trim_offsets", json(true)).is_boolean(), what, bf + ".trim_offsets",
       describe(bl.value("trim_offsets", json())), "expected true or false (it moves offsets, never ids)");
  return pat["Regex"].get<std::string>();
}

// The rest of a tiktoken-family document: its keys, normalizer, decoder, post-processor and model.
void check_tiktoken_document(const json& j, const std::string& what) {
  only_keys(j, what, "tokenizer",
            {"version", "truncation", "padding", "added_tokens", "normalizer", "pre_tokenizer", "post_processor",
             "decoder", "model"},
            "a tiktoken-family tokenizer.json has these");
  for (const char* key : {"truncation", "padding", "normalizer"})
    need(null_or(j, key, nullptr), what, key, describe(j.value(key, json())),
         "only null is implemented (a tiktoken-family file neither normalizes, truncates nor pads)");
  const json& dec = j.value("decoder", json());
  need(dec.is_null() || (dec.is_object() && dec.value("type", json()) == "ByteLevel"), what, "decoder", describe(dec),
       "expected a ByteLevel decoder or none (tokens decode to their bytes)");
  // The post-processor only adds ids around the text's when asked (TemplateProcessing: Llama 3's
  // <|begin_of_text|>); encode() gives the text's ids alone, as Hugging Face's encode with
  // add_special_tokens=False, and the caller places BOS (bos from tokenizer_config.json).
  const json& post = j.value("post_processor", json());
  auto post_ok = [](const json& p) {
    return p.is_null() || (p.is_object() &&
                           (p.value("type", json()) == "ByteLevel" || p.value("type", json()) == "TemplateProcessing"));
  };
  bool ok = post_ok(post);
  if (post.is_object() && post.value("type", json()) == "Sequence" && post.value("processors", json()).is_array()) {
    ok = true;
    for (const json& p : post["processors"]) ok &= post_ok(p);
  }
  need(ok, what, "post_processor", describe(post),
       "expected none, ByteLevel, TemplateProcessing or a Sequence of them (they add no ids to encode's: the caller "
       "places BOS)");
  const json& model = j["model"];
  only_keys(model, what, "model",
            {"type", "dropout", "unk_token", "continuing_subword_prefix", "end_of_word_suffix", "fuse_unk",
             "byte_fallback", "ignore_merges", "vocab", "merges"},
            "a byte-level BPE model has these");
  need(null_or(model, "unk_token", nullptr), what, "model.unk_token", describe(model.value("unk_token", json())),
       "only null is implemented (byte-level BPE encodes every byte, it has no unknown token)");
  need(model.value("fuse_unk", json(false)).is_boolean(), what, "model.fuse_unk",
       describe(model.value("fuse_unk", json())), "expected true or false (it has no effect without an unknown token)");
}

// added_tokens: [{"id": N, "content": "...", "special": bool, ...}]. `id_cap`: ids must be below it.
std::vector<AddedToken> read_added_tokens(const json& at, const std::string& what, int64_t id_cap) {
  need(at.is_array(), what, "added_tokens", at.type_name(), "expected an array");
  std::vector<AddedToken> added;
  for (size_t i = 0; i < at.size(); ++i) {
    const json& t = at[i];
    const std::string where = "added_tokens[" + std::to_string(i) + "]";
    need(t.is_object() && t.contains("content") && t["content"].is_string() && !t["content"].get<std::string>().empty(),
         what, where, t.dump().substr(0, 200), "expected an object with a non-empty string \"content\" and an \"id\"");
    const int64_t id = json_integer(t.value("id", json()), what + ": " + where + ".id", 0, id_cap - 1);
    added.emplace_back(id, t["content"].get<std::string>());
    const json sp = t.value("special", json(false));
    need(sp.is_boolean(), what, where + ".special", sp.dump(), "expected true or false");
    // Added tokens are matched as their exact text. Hugging Face's lstrip / rstrip (the token
    // swallows the white space beside it) and single_word (only between word boundaries) would
    // give other ids: refused rather than ignored. "normalized" changes nothing here (a byte-level
    // file has no normalizer), so either value is taken.
    for (const char* flag : {"lstrip", "rstrip", "single_word"}) {
      const json f = t.value(flag, json(false));
      need(f.is_boolean(), what, where + "." + flag, f.dump(), "expected true or false");
      need(!f.get<bool>(), what, where + "." + flag, "true",
           "not supported: ZeroTensor matches added tokens as their exact text (false is)");
    }
    const json nz = t.value("normalized", json(false));
    need(nz.is_boolean(), what, where + ".normalized", nz.dump(), "expected true or false");
  }
  return added;
}

// tokenizer_config.json's bos_token / eos_token: a string, {"content": "..."} or null -> the
// special token's id, -1 when absent or null.
int32_t token_text(const json& cfg, const char* key, const BpeModel& m, const std::string& what) {
  if (!cfg.contains(key) || cfg[key].is_null()) return -1;
  const json& v = cfg[key];
  const json text = v.is_object() ? v.value("content", json()) : v;
  need(text.is_string(), what, key, describe(v), "expected a token's text, {\"content\": text} or null");
  for (int32_t id : m.specials)
    if (m.tokens[id] == text.get<std::string>()) return id;
  need(false, what, key, describe(text), "expected one of tokenizer.json's added tokens");
  return -1;
}

// generation_config.json's bos_token_id / eos_token_id: an integer, a list of them, or null.
std::vector<int64_t> config_ids(const json& cfg, const char* key, const std::string& what) {
  std::vector<int64_t> ids;
  if (!cfg.contains(key) || cfg[key].is_null()) return ids;
  const json& v = cfg[key];
  if (v.is_array()) {
    for (size_t i = 0; i < v.size(); ++i)
      ids.push_back(json_integer(v[i], what + ": " + key + "[" + std::to_string(i) + "]", 0, INT32_MAX));
  } else {
    ids.push_back(json_integer(v, what + ": " + key, 0, INT32_MAX));
  }
  return ids;
}

// BOS and EOS from the files beside tokenizer.json (as transformers saves a tokenizer and a
// model): tokenizer_config.json names the tokens, generation_config.json their ids. Where both
// give one, they must agree (the config's id among generation_config's); a disagreement is refused
// naming both files, the keys and the values. Without tokenizer_config.json's, generation_config's
// (first) id is taken.
void read_special_configs(const std::string& path, BpeModel& m) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(path).parent_path();
  std::error_code ec;
  const fs::path tc = dir / "tokenizer_config.json", gc = dir / "generation_config.json";
  const std::string twhat = "tokenizer config '" + tc.string() + "' (beside '" + path + "')";
  const std::string gwhat = "generation config '" + gc.string() + "' (beside '" + path + "')";
  int32_t bos = -1, eos = -1;
  if (fs::is_regular_file(tc, ec)) {
    const json cfg = read_json_file(tc.string(), twhat);
    need(cfg.is_object(), twhat, "the document", cfg.type_name(), "expected an object");
    bos = token_text(cfg, "bos_token", m, twhat);
    eos = token_text(cfg, "eos_token", m, twhat);
  }
  if (fs::is_regular_file(gc, ec)) {
    const json cfg = read_json_file(gc.string(), gwhat);
    need(cfg.is_object(), gwhat, "the document", cfg.type_name(), "expected an object");
    for (auto [key, id] : {std::pair{"bos_token_id", &bos}, std::pair{"eos_token_id", &eos}}) {
      const std::vector<int64_t> ids = config_ids(cfg, key, gwhat);
      if (ids.empty()) continue;
      if (*id == -1) {
        *id = static_cast<int32_t>(ids[0]);
        if (*id >= static_cast<int64_t>(m.tokens.size()) || m.tokens[*id].empty())
          need(false, gwhat, key, std::to_string(*id), "expected the id of one of tokenizer.json's added tokens");
        continue;
      }
      bool found = false;
      for (int64_t x : ids) found |= x == *id;
      need(found, gwhat, key, cfg[key].dump(),
           detail::concat("disagrees with ", twhat, ", whose ", key[0] == 'b' ? "bos_token" : "eos_token", " '",
                          m.tokens[*id], "' is id ", *id));
    }
  }
  m.bos = bos, m.eos = eos;
}

}  // namespace

std::unique_ptr<BpeTokenizer> read_tokenizer_json(const std::string& path) {
  const std::string what = "tokenizer.json '" + path + "'";
  const json j = read_json_file(path, what);
  need(j.is_object() && j.contains("model") && j["model"].is_object(), what, "the document",
       j.is_object() ? "an object without a \"model\" object" : std::string(j.type_name()),
       "expected a Hugging Face tokenizer.json (an object with \"model\")");
  const json& model = j["model"];
  const json type = model.value("type", json("BPE"));
  need(type == "BPE", what, "model.type", describe(type),
       "only BPE models are read from tokenizer.json (SentencePiece / Llama 2: give the tokenizer.model)");
  const json pre = j.value("pre_tokenizer", json());
  const bool tiktoken = pre.is_object() && pre.value("type", json()) == "Sequence";
  BpeModel m;
  if (tiktoken) {
    check_tiktoken_document(j, what);
    m.pattern = read_tiktoken_pre_tokenizer(pre, what);
  } else {
    need(null_or(j, "normalizer", nullptr), what, "normalizer", j.value("normalizer", json()).dump(),
         "GPT-2's byte-level BPE has none (null)");
    need(pre.is_object() && pre.value("type", json()) == "ByteLevel", what, "pre_tokenizer", pre.dump().substr(0, 200),
         "expected GPT-2's {\"type\": \"ByteLevel\"} or the tiktoken family's {\"type\": \"Sequence\", "
         "\"pretokenizers\": [Split, "
         "ByteLevel]}");
    need(null_or(pre, "add_prefix_space", false), what, "pre_tokenizer.add_prefix_space",
         pre.value("add_prefix_space", json()).dump(), "only false (GPT-2's) is supported");
    need(null_or(pre, "use_regex", true), what, "pre_tokenizer.use_regex", pre.value("use_regex", json()).dump(),
         "only true (GPT-2's pattern) is supported");
    const json dec = j.value("decoder", json());
    need(dec.is_null() || (dec.is_object() && dec.value("type", json()) == "ByteLevel"), what, "decoder",
         dec.dump().substr(0, 200), "expected a ByteLevel decoder or none");
  }
  need(null_or(model, "byte_fallback", false), what, "model.byte_fallback", model.value("byte_fallback", json()).dump(),
       "only false is supported");
  need(null_or(model, "dropout", nullptr) || model["dropout"] == 0, what, "model.dropout",
       model.value("dropout", json()).dump(), "BPE dropout is a training-time option: only null is supported");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
    need(null_or(model, key, ""), what, std::string("model.") + key, model.value(key, json()).dump(),
         "only empty or null is supported");
  need(model.contains("vocab") && model.contains("merges"), what, "model", "without \"vocab\" or \"merges\"",
       "a BPE model has both");
  const json& ignore = model.value("ignore_merges", json(false));
  need(ignore.is_boolean() || ignore.is_null(), what, "model.ignore_merges", describe(ignore),
       "expected true, false or null (false)");
  m.ignore_merges = ignore.is_boolean() && ignore.get<bool>();

  const json at = j.value("added_tokens", json::array());
  // GPT-2's shape: ids stay dense. The tiktoken family may leave ids unused (cl100k_base's specials
  // sit at 100257..100260 and 100276), at most as many as it names (read_vocab).
  const int64_t named = static_cast<int64_t>(model["vocab"].size()) +
                        static_cast<int64_t>(at.is_array() ? at.size() : 0);
  const std::vector<AddedToken> added = read_added_tokens(at, what, tiktoken ? 2 * named : named);
  m.tokens = read_vocab(model["vocab"], what + " model.vocab", added, tiktoken);
  for (const auto& [id, text] : added)
    m.specials.push_back(static_cast<int32_t>(id));  // matched as text, special or not
  const auto id_of = ids_by_form(m.tokens);
  const json& merges = model["merges"];
  need(merges.is_array(), what, "model.merges", merges.type_name(), "expected an array");
  m.merges.reserve(merges.size());
  for (size_t r = 0; r < merges.size(); ++r) {
    const std::string where = what + " model.merges[" + std::to_string(r) + "]";
    const auto [a, b] = parse_merge(merges[r], where);
    m.merges.push_back(merge_ids(a, b, id_of, where));
  }
  if (tiktoken) read_special_configs(path, m);
  return std::make_unique<BpeTokenizer>(std::move(m), path);
}

}  // namespace zt
