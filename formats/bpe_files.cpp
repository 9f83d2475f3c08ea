// defines: the files of a byte-level BPE (formats/bpe_tokenizer.h): read_gpt2_bpe (vocab.json +
//          merges.txt), read_tokenizer_json (Hugging Face), save_gpt2_files, save_tokenizer_json.
//          Layer formats/.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/check.h"
#include "core/file_io.h"
#include "core/json.h"
#include "formats/bpe_tokenizer.h"

namespace zt {

namespace {

using json = nlohmann::json;

std::string read_text(const std::string& path, const std::string& what) {
  std::ifstream f(path, std::ios::binary);
  if (!f) ZT_THROW(what, " '", path, "': cannot open: ", errno_message());
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// GPT-2's form of a token (its bytes, each as a printable character).
std::string to_gpt2_form(const std::string& bytes) {
  std::string s;
  for (unsigned char c : bytes) s += gpt2_byte_to_unicode(c);
  return s;
}

// The vocabulary of vocab.json / tokenizer.json's model.vocab: id -> bytes. `added` (id -> text)
// are tokens whose text is taken as it is (special / added tokens); every other key must be in
// GPT-2's byte-level form. Ids must be 0..N-1, each once, N = the number of distinct ids.
std::vector<std::string> read_vocab(const json& v, const std::string& what, const std::vector<std::pair<int64_t, std::string>>& added) {
  if (!v.is_object()) ZT_THROW(what, ": the vocabulary must be a JSON object of token -> id, found ", v.type_name());
  const auto n_entries = static_cast<int64_t>(v.size());
  int64_t n = n_entries;
  for (const auto& [id, text] : added) n = std::max(n, id + 1);
  std::vector<std::string> tokens(static_cast<size_t>(n));
  std::vector<char> seen(static_cast<size_t>(n), 0);
  std::string bytes;
  for (auto it = v.begin(); it != v.end(); ++it) {
    const int64_t id = json_integer(it.value(), what + ": the id of token '" + it.key() + "'", 0, n - 1);
    if (seen[id]) ZT_THROW(what, ": id ", id, " is given to two tokens (one is '", it.key(), "')");
    seen[id] = 1;
    bool is_added = false;
    for (const auto& [aid, text] : added) is_added |= aid == id && text == it.key();
    if (is_added) {
      tokens[id] = it.key();
    } else if (!gpt2_unicode_to_bytes(it.key(), bytes)) {
      ZT_THROW(what, ": token '", it.key(), "' (id ", id,
               ") holds a character that is not one of GPT-2's 256 byte-level characters (not a byte-level BPE vocabulary?)");
    } else {
      tokens[id] = bytes;
    }
  }
  for (const auto& [id, text] : added) {
    if (seen[id] && tokens[id] != text)
      ZT_THROW(what, ": added token '", text, "' has id ", id, ", which the vocabulary gives to another token");
    tokens[id] = text;
    seen[id] = 1;
  }
  for (int64_t id = 0; id < n; ++id)
    if (!seen[id]) ZT_THROW(what, ": no token has id ", id, " (ids must be 0..", n - 1, ", each used once)");
  // One text, one id: an added token whose text is also a vocabulary token's (or another added
  // token's) under another id would make encoding pick one of them by accident.
  std::unordered_map<std::string_view, int64_t> id_of_text;
  for (int64_t id = 0; id < n; ++id) {
    const auto [it, fresh] = id_of_text.emplace(tokens[id], id);
    if (!fresh)
      ZT_THROW(what, ": the text '", tokens[id].substr(0, 80), "' has two ids, ", it->second, " and ", id,
               " (an added token repeating a vocabulary token under another id?): one id per text is expected");
  }
  return tokens;
}

// One merge given as its two tokens in GPT-2's form -> the ids.
std::pair<int32_t, int32_t> merge_ids(const std::string& a, const std::string& b, const std::unordered_map<std::string, int32_t>& id_of,
                                      const std::string& where) {
  auto ia = id_of.find(a), ib = id_of.find(b);
  if (ia == id_of.end()) ZT_THROW(where, ": merge '", a, " ", b, "': '", a, "' is not a token of the vocabulary");
  if (ib == id_of.end()) ZT_THROW(where, ": merge '", a, " ", b, "': '", b, "' is not a token of the vocabulary");
  return {ia->second, ib->second};
}

std::unordered_map<std::string, int32_t> ids_by_form(const std::vector<std::string>& tokens) {
  std::unordered_map<std::string, int32_t> m;
  for (size_t id = 0; id < tokens.size(); ++id) m.emplace(to_gpt2_form(tokens[id]), static_cast<int32_t>(id));
  return m;
}

void need(bool ok, const std::string& what, const std::string& field, const std::string& found, const std::string& expected) {
  if (!ok) ZT_THROW(what, ": ", field, " is ", found, ": ", expected);
}

std::string describe(const json& j) { return j.is_string() ? detail::concat("'", j.get<std::string>(), "'") : j.dump(); }

}  // namespace

std::unique_ptr<BpeTokenizer> read_gpt2_bpe(const std::string& vocab_json, const std::string& merges_txt) {
  const std::string vwhat = "tokenizer vocabulary '" + vocab_json + "'";
  const json v = read_json_file(vocab_json, vwhat);
  BpeModel m;
  m.tokens = read_vocab(v, vwhat, {});
  for (size_t id = 0; id < m.tokens.size(); ++id)
    if (m.tokens[id] == kGpt2EndOfText) m.specials.push_back(static_cast<int32_t>(id));
  const auto id_of = ids_by_form(m.tokens);
  const std::string text = read_text(merges_txt, "tokenizer merges");
  std::istringstream in(text);
  std::string line;
  for (int64_t lineno = 1; std::getline(in, line); ++lineno) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (lineno == 1 && line.rfind("#version", 0) == 0)) continue;
    const size_t sp = line.find(' ');
    const std::string where = "tokenizer merges '" + merges_txt + "' line " + std::to_string(lineno);
    if (sp == std::string::npos || sp == 0 || sp + 1 == line.size() || line.find(' ', sp + 1) != std::string::npos)
      ZT_THROW(where, ": '", line.substr(0, 80), "' is not a merge: expected two tokens separated by one space");
    m.merges.push_back(merge_ids(line.substr(0, sp), line.substr(sp + 1), id_of, where));
  }
  return std::make_unique<BpeTokenizer>(std::move(m), vocab_json);
}

std::unique_ptr<BpeTokenizer> read_tokenizer_json(const std::string& path) {
  const std::string what = "tokenizer.json '" + path + "'";
  const json j = read_json_file(path, what);
  need(j.is_object() && j.contains("model") && j["model"].is_object(), what, "the document",
       j.is_object() ? "an object without a \"model\" object" : std::string(j.type_name()),
       "expected a Hugging Face tokenizer.json (an object with \"model\")");
  const json& model = j["model"];
  const json type = model.value("type", json("BPE"));
  need(type == "BPE", what, "model.type", describe(type),
       "only BPE models are read from tokenizer.json (SentencePiece / Llama: give the tokenizer.model)");
  auto null_or = [&](const json& o, const char* key, const json& ok) { return !o.contains(key) || o[key].is_null() || o[key] == ok; };
  need(null_or(j, "normalizer", nullptr), what, "normalizer", j.value("normalizer", json()).dump(),
       "GPT-2's byte-level BPE has none (null)");
  const json pre = j.value("pre_tokenizer", json());
  need(pre.is_object() && pre.value("type", json()) == "ByteLevel", what, "pre_tokenizer", pre.dump().substr(0, 200),
       "expected GPT-2's {\"type\": \"ByteLevel\"}");
  need(null_or(pre, "add_prefix_space", false), what, "pre_tokenizer.add_prefix_space", pre.value("add_prefix_space", json()).dump(),
       "only false (GPT-2's) is supported");
  need(null_or(pre, "use_regex", true), what, "pre_tokenizer.use_regex", pre.value("use_regex", json()).dump(),
       "only true (GPT-2's pattern) is supported");
  const json dec = j.value("decoder", json());
  need(dec.is_null() || (dec.is_object() && dec.value("type", json()) == "ByteLevel"), what, "decoder", dec.dump().substr(0, 200),
       "expected a ByteLevel decoder or none");
  need(null_or(model, "byte_fallback", false), what, "model.byte_fallback", model.value("byte_fallback", json()).dump(), "only false is supported");
  need(null_or(model, "dropout", nullptr) || model["dropout"] == 0, what, "model.dropout", model.value("dropout", json()).dump(),
       "BPE dropout is a training-time option: only null is supported");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
    need(null_or(model, key, ""), what, std::string("model.") + key, model.value(key, json()).dump(), "only empty or null is supported");
  need(model.contains("vocab") && model.contains("merges"), what, "model", "without \"vocab\" or \"merges\"", "a BPE model has both");

  // added_tokens: [{"id": N, "content": "...", "special": bool, ...}]
  std::vector<std::pair<int64_t, std::string>> added;
  const json at = j.value("added_tokens", json::array());
  need(at.is_array(), what, "added_tokens", at.type_name(), "expected an array");
  const int64_t id_cap = static_cast<int64_t>(model["vocab"].size()) + static_cast<int64_t>(at.size());  // ids stay dense
  for (size_t i = 0; i < at.size(); ++i) {
    const json& t = at[i];
    const std::string where = "added_tokens[" + std::to_string(i) + "]";
    need(t.is_object() && t.contains("content") && t["content"].is_string() && !t["content"].get<std::string>().empty(), what, where,
         t.dump().substr(0, 200), "expected an object with a non-empty string \"content\" and an \"id\"");
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
  BpeModel m;
  m.tokens = read_vocab(model["vocab"], what + " model.vocab", added);
  for (const auto& [id, text] : added) m.specials.push_back(static_cast<int32_t>(id));  // matched as text, special or not
  const auto id_of = ids_by_form(m.tokens);
  const json& merges = model["merges"];
  need(merges.is_array(), what, "model.merges", merges.type_name(), "expected an array");
  for (size_t r = 0; r < merges.size(); ++r) {
    const json& e = merges[r];
    const std::string where = what + " model.merges[" + std::to_string(r) + "]";
    std::string a, b;
    if (e.is_string()) {  // "a b" (tokenizers < 0.20)
      const std::string s = e.get<std::string>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || sp == 0 || sp + 1 == s.size() || s.find(' ', sp + 1) != std::string::npos)
        ZT_THROW(where, ": '", s.substr(0, 80), "' is not a merge: expected two tokens separated by one space");
      a = s.substr(0, sp), b = s.substr(sp + 1);
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {  // ["a", "b"]
      a = e[0].get<std::string>(), b = e[1].get<std::string>();
    } else {
      ZT_THROW(where, ": ", e.dump().substr(0, 80), " is not a merge: expected \"a b\" or [\"a\", \"b\"]");
    }
    m.merges.push_back(merge_ids(a, b, id_of, where));
  }
  return std::make_unique<BpeTokenizer>(std::move(m), path);
}

void save_gpt2_files(const BpeModel& m, const std::string& dir) {
  std::filesystem::create_directories(dir);
  nlohmann::ordered_json v = nlohmann::ordered_json::object();  // in id order, as GPT-2's encoder.json
  for (size_t id = 0; id < m.tokens.size(); ++id) {
    const bool special = std::find(m.specials.begin(), m.specials.end(), static_cast<int32_t>(id)) != m.specials.end();
    v[special ? m.tokens[id] : to_gpt2_form(m.tokens[id])] = id;
  }
  const std::string vj = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::strict) + "\n";
  AtomicFile fv(dir + "/vocab.json", "tokenizer vocabulary");
  fv.write(vj.data(), vj.size());
  fv.commit();
  std::string merges = "#version: 0.2\n";
  for (const auto& [a, b] : m.merges) merges += to_gpt2_form(m.tokens[a]) + " " + to_gpt2_form(m.tokens[b]) + "\n";
  AtomicFile fm(dir + "/merges.txt", "tokenizer merges");
  fm.write(merges.data(), merges.size());
  fm.commit();
}

void save_tokenizer_json(const BpeModel& m, const std::string& path) {
  using ojson = nlohmann::ordered_json;
  ojson added = ojson::array();
  for (int32_t id : m.specials)
    added.push_back({{"id", id}, {"content", m.tokens[id]}, {"single_word", false}, {"lstrip", false},
                     {"rstrip", false}, {"normalized", true}, {"special", true}});
  ojson vocab = ojson::object();
  for (size_t id = 0; id < m.tokens.size(); ++id) {
    const bool special = std::find(m.specials.begin(), m.specials.end(), static_cast<int32_t>(id)) != m.specials.end();
    vocab[special ? m.tokens[id] : to_gpt2_form(m.tokens[id])] = id;
  }
  ojson merges = ojson::array();
  for (const auto& [a, b] : m.merges) merges.push_back(to_gpt2_form(m.tokens[a]) + " " + to_gpt2_form(m.tokens[b]));
  const ojson byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
  ojson j;
  j["version"] = "1.0";
  j["truncation"] = nullptr;
  j["padding"] = nullptr;
  j["added_tokens"] = added;
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = byte_level;
  j["post_processor"] = byte_level;
  j["decoder"] = byte_level;
  j["model"] = {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", ""},
                {"end_of_word_suffix", ""}, {"fuse_unk", false}, {"byte_fallback", false}, {"vocab", vocab}, {"merges", merges}};
  const std::string text = j.dump(2) + "\n";
  AtomicFile f(path, "tokenizer.json");
  f.write(text.data(), text.size());
  f.commit();
}

}  // namespace zt
