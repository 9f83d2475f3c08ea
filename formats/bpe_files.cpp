// defines: the files of a byte-level BPE (formats/bpe_tokenizer.h): read_gpt2_bpe (vocab.json +
//          merges.txt), save_gpt2_files, save_tokenizer_json; the readers' shared pieces
//          (formats/bpe_file_parts.h). file-local: read_text, check_gpt2_shape. Layer formats/.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/check.h"
#include "core/file_io.h"
#include "core/json.h"
#include "formats/bpe_file_parts.h"
#include "formats/bpe_tokenizer.h"

namespace zt {

namespace bpe_files {

using json = nlohmann::json;

std::string to_gpt2_form(const std::string& bytes) {
  std::string s;
  for (unsigned char c : bytes) s += gpt2_byte_to_unicode(c);
  return s;
}

std::vector<std::string> read_vocab(const json& v, const std::string& what, const std::vector<AddedToken>& added,
                                    bool allow_unused) {
  if (!v.is_object()) ZT_THROW(what, ": the vocabulary must be a JSON object of token -> id, found ", v.type_name());
  const auto n_entries = static_cast<int64_t>(v.size());
  int64_t n = n_entries;
  if (allow_unused) {  // ids may leave gaps: N is the largest id + 1, bounded by 2 x the tokens named
    const int64_t cap = 2 * (n_entries + static_cast<int64_t>(added.size()));
    n = 0;
    for (auto it = v.begin(); it != v.end(); ++it)
      n = std::max(n, json_integer(it.value(), what + ": the id of token '" + it.key() + "'", 0, cap - 1) + 1);
  }
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
    } else if (it.key().empty()) {
      ZT_THROW(what, ": token id ", id, " is the empty string: every token holds at least one byte");
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
  if (!allow_unused)
    for (int64_t id = 0; id < n; ++id)
      if (!seen[id]) ZT_THROW(what, ": no token has id ", id, " (ids must be 0..", n - 1, ", each used once)");
  // One text, one id: an added token whose text is also a vocabulary token's (or another added
  // token's) under another id would make encoding pick one of them by accident.
  std::unordered_map<std::string_view, int64_t> id_of_text;
  for (int64_t id = 0; id < n; ++id) {
    if (!seen[id]) continue;
    const auto [it, fresh] = id_of_text.emplace(tokens[id], id);
    if (!fresh)
      ZT_THROW(what, ": the text '", tokens[id].substr(0, 80), "' has two ids, ", it->second, " and ", id,
               " (an added token repeating a vocabulary token under another id?): one id per text is expected");
  }
  return tokens;
}

std::pair<int32_t, int32_t> merge_ids(const std::string& a, const std::string& b, const std::unordered_map<std::string, int32_t>& id_of,
                                      const std::string& where) {
  auto ia = id_of.find(a), ib = id_of.find(b);
  if (ia == id_of.end()) ZT_THROW(where, ": merge '", a, " ", b, "': '", a, "' is not a token of the vocabulary");
  if (ib == id_of.end()) ZT_THROW(where, ": merge '", a, " ", b, "': '", b, "' is not a token of the vocabulary");
  return {ia->second, ib->second};
}

std::unordered_map<std::string, int32_t> ids_by_form(const std::vector<std::string>& tokens) {
  std::unordered_map<std::string, int32_t> m;
  for (size_t id = 0; id < tokens.size(); ++id)
    if (!tokens[id].empty()) m.emplace(to_gpt2_form(tokens[id]), static_cast<int32_t>(id));
  return m;
}

std::pair<std::string, std::string> parse_merge(const json& e, const std::string& where) {
  if (e.is_string()) {  // "a b" (tokenizers < 0.20)
    const std::string s = e.get<std::string>();
    const size_t sp = s.find(' ');
    if (sp == std::string::npos || sp == 0 || sp + 1 == s.size() || s.find(' ', sp + 1) != std::string::npos)
      ZT_THROW(where, ": '", s.substr(0, 80), "' is not a merge: expected two tokens separated by one space");
    return {s.substr(0, sp), s.substr(sp + 1)};
  }
  if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string())  // ["a", "b"]
    return {e[0].get<std::string>(), e[1].get<std::string>()};
  ZT_THROW(where, ": ", e.dump().substr(0, 80), " is not a merge: expected \"a b\" or [\"a\", \"b\"]");
}

void need(bool ok, const std::string& what, const std::string& field, const std::string& found, const std::string& expected) {
  if (!ok) ZT_THROW(what, ": ", field, " is ", found, ": ", expected);
}

std::string describe(const json& j) {
  return j.is_string() ? detail::concat("'", j.get<std::string>().substr(0, 200), "'") : j.dump().substr(0, 200);
}

}  // namespace bpe_files

namespace {

using namespace bpe_files;
using json = nlohmann::json;

std::string read_text(const std::string& path, const std::string& what) {
  std::ifstream f(path, std::ios::binary);
  if (!f) ZT_THROW(what, " '", path, "': cannot open: ", errno_message());
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The writers write GPT-2's shape: GPT-2's pattern, merges applied to every piece, ids 0..N-1.
void check_gpt2_shape(const BpeModel& m, const std::string& path) {
  const bool unused = std::any_of(m.tokens.begin(), m.tokens.end(), [](const std::string& t) { return t.empty(); });
  if (!m.pattern.empty() || m.ignore_merges || unused)
    ZT_THROW("writing '", path, "': the model has ",
             !m.pattern.empty() ? "its own split pattern"
             : m.ignore_merges  ? "ignore_merges"
                                : "unused ids",
             ": only GPT-2's shape of byte-level BPE is written (GPT-2's pattern, merges always applied, ids 0..N-1)");
}

}  // namespace

std::unique_ptr<BpeTokenizer> read_gpt2_bpe(const std::string& vocab_json, const std::string& merges_txt) {
  const std::string vwhat = "tokenizer vocabulary '" + vocab_json + "'";
  const json v = read_json_file(vocab_json, vwhat);
  BpeModel m;
  m.tokens = read_vocab(v, vwhat, {}, false);
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

void save_gpt2_files(const BpeModel& m, const std::string& dir) {
  check_gpt2_shape(m, dir + "/vocab.json");
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
  check_gpt2_shape(m, path);
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
