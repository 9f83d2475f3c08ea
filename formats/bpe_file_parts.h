// defines: the pieces the byte-level BPE file readers share (formats/bpe_files.cpp: GPT-2's files
//          and the writers; formats/tokenizer_json.cpp: tokenizer.json): AddedToken, read_vocab,
//          merge_ids, ids_by_form, to_gpt2_form, parse_merge, need, describe. Layer formats/.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/json.h"

namespace zt::bpe_files {

// An added (special) token of tokenizer.json: its id and its text, taken as it is.
using AddedToken = std::pair<int64_t, std::string>;

// GPT-2's form of a token (its bytes, each as a printable character).
std::string to_gpt2_form(const std::string& bytes);

// The vocabulary of vocab.json / tokenizer.json's model.vocab: id -> bytes. `added` are tokens
// whose text is taken as it is (special / added tokens); every other key must be in GPT-2's
// byte-level form. One text, one id. Without `allow_unused`, ids must be 0..N-1, each once, N =
// the number of distinct ids. With it (tiktoken-family files), ids may leave gaps, which stay
// empty strings (unused ids); a vocabulary id must then be below 2 x the number of tokens, so
// the vector's size stays bounded by the file.
std::vector<std::string> read_vocab(const nlohmann::json& v, const std::string& what,
                                    const std::vector<AddedToken>& added, bool allow_unused);

// The id of each token by its GPT-2 form (unused ids left out).
std::unordered_map<std::string, int32_t> ids_by_form(const std::vector<std::string>& tokens);

// One merge given as its two tokens in GPT-2's form -> the ids; errors name `where`.
std::pair<int32_t, int32_t> merge_ids(const std::string& a, const std::string& b,
                                      const std::unordered_map<std::string, int32_t>& id_of, const std::string& where);

// One entry of tokenizer.json's model.merges: "a b" (tokenizers < 0.20) or ["a", "b"].
std::pair<std::string, std::string> parse_merge(const nlohmann::json& e, const std::string& where);

// Throws "<what>: <field> is <found>: <expected>" unless ok.
void need(bool ok, const std::string& what, const std::string& field, const std::string& found,
          const std::string& expected);

// A JSON value for a message: a string quoted, anything else dumped (cut to 200 characters).
std::string describe(const nlohmann::json& j);

}  // namespace zt::bpe_files
