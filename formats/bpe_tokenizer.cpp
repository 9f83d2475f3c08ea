// defines: BpeTokenizer (constructor, merge_rank, encode_piece, encode, decode, decode_token)
//          (formats/bpe_tokenizer.h); file-local: pair_key, shown
#include "formats/bpe_tokenizer.h"

#include <algorithm>
#include <queue>
#include <unordered_set>

#include "core/check.h"

namespace zt {

namespace {

uint64_t pair_key(int32_t a, int32_t b) { return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b); }

// A token for messages: GPT-2's printable form, which shows spaces and control bytes.
std::string shown(const std::string& bytes) {
  std::string s;
  for (unsigned char c : bytes) s += gpt2_byte_to_unicode(c);
  return s;
}

constexpr size_t kMaxCacheEntries = 1 << 18;  // pieces cached before the cache starts over

}  // namespace

BpeTokenizer::BpeTokenizer(BpeModel model, std::string source) : model_(std::move(model)), source_(std::move(source)) {
  pre_ = model_.pattern.empty()
             ? std::make_unique<Pretokenizer>()
             : std::make_unique<Pretokenizer>(model_.pattern, "tokenizer '" + source_ + "': the split pattern");
  const auto& toks = model_.tokens;
  const auto n = static_cast<int64_t>(toks.size());
  if (n < 256) ZT_THROW("tokenizer '", source_, "': ", n, " tokens: a byte-level BPE vocabulary holds at least the 256 one-byte tokens");
  if (n > INT32_MAX) ZT_THROW("tokenizer '", source_, "': ", n, " ids: more than int32 holds");
  std::unordered_set<int32_t> special_set;
  for (int32_t id : model_.specials) {
    if (id < 0 || id >= n) ZT_THROW("tokenizer '", source_, "': special token id ", id, " is outside the vocabulary [0, ", n, ")");
    if (toks[id].empty()) ZT_THROW("tokenizer '", source_, "': special token id ", id, " has empty text");
    special_set.insert(id);
    special_text_.emplace_back(toks[id], id);
    if (toks[id] == kGpt2EndOfText) eot_ = id;
  }
  // A file's EOS (tokenizer_config.json) separates documents in its place (Llama 3's <|end_of_text|>).
  for (const auto& [id, name] : {std::pair{model_.bos, "BOS"}, std::pair{model_.eos, "EOS"}})
    if (id != -1 && !special_set.count(id))
      ZT_THROW("tokenizer '", source_, "': the ", name, " id ", id, " is not one of its special (added) tokens");
  if (model_.eos >= 0) eot_ = model_.eos;
  // Ordinary tokens: bytes -> id, each text once. An empty token is an unused id (no token has
  // it); at most as many as the used ids, so a file's ids bound the memory it costs.
  std::unordered_map<std::string, int32_t>& id_of = id_of_;
  id_of.reserve(toks.size());
  int64_t unused = 0;
  for (int32_t id = 0; id < n; ++id) {
    if (special_set.count(id)) continue;
    if (toks[id].empty()) {
      ++unused;
      continue;
    }
    auto [it, fresh] = id_of.emplace(toks[id], id);
    if (!fresh) ZT_THROW("tokenizer '", source_, "': token '", shown(toks[id]), "' appears twice (ids ", it->second, " and ", id, ")");
  }
  if (unused > n - unused)
    ZT_THROW("tokenizer '", source_, "': ", unused, " of its ", n,
             " ids are unused: at most half of a vocabulary's ids may be unused");
  for (int b = 0; b < 256; ++b) {
    auto it = id_of.find(std::string(1, static_cast<char>(b)));
    if (it == id_of.end())
      ZT_THROW("tokenizer '", source_, "': no token for the byte 0x", "0123456789abcdef"[b >> 4], "0123456789abcdef"[b & 15],
               " ('", gpt2_byte_to_unicode(static_cast<uint8_t>(b)), "'): a byte-level BPE vocabulary holds all 256 one-byte tokens");
    byte_id_[b] = it->second;
  }
  merge_of_.reserve(model_.merges.size());
  for (size_t r = 0; r < model_.merges.size(); ++r) {
    const auto [a, b] = model_.merges[r];
    if (a < 0 || a >= n || b < 0 || b >= n || special_set.count(a) || special_set.count(b) || toks[a].empty() ||
        toks[b].empty())
      ZT_THROW("tokenizer '", source_, "': merge ", r, " (", a, ", ", b, ") names an id that is not an ordinary token of [0, ", n, ")");
    auto it = id_of.find(toks[a] + toks[b]);
    if (it == id_of.end())
      ZT_THROW("tokenizer '", source_, "': merge ", r, " '", shown(toks[a]), " ", shown(toks[b]), "' makes '",
               shown(toks[a] + toks[b]), "', which is not in the vocabulary");
    auto [at, fresh] = merge_of_.emplace(pair_key(a, b), std::make_pair(static_cast<int32_t>(r), it->second));
    if (!fresh)
      ZT_THROW("tokenizer '", source_, "': merge ", r, " '", shown(toks[a]), " ", shown(toks[b]), "' repeats merge ", at->second.first);
  }
  // Longer specials first, so at one position the longer one wins.
  std::stable_sort(special_text_.begin(), special_text_.end(),
                   [](const auto& x, const auto& y) { return x.first.size() > y.first.size(); });
}

int32_t BpeTokenizer::merge_rank(int32_t left, int32_t right) const {
  auto it = merge_of_.find(pair_key(left, right));
  return it == merge_of_.end() ? -1 : it->second.first;
}

// Hugging Face's merge_all: symbols in a linked list, candidate pairs in a min-heap by
// (rank, position). A popped pair still standing merges; its new neighbours' pairs are pushed.
// With ignore_merges, a piece that is a token is that token, whatever the merges would make.
void BpeTokenizer::encode_piece(std::string_view piece, std::vector<int32_t>& out) const {
  const size_t n = piece.size();
  if (n == 1) {
    out.push_back(byte_id_[static_cast<unsigned char>(piece[0])]);
    return;
  }
  if (model_.ignore_merges) {
    auto it = id_of_.find(std::string(piece));
    if (it != id_of_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  {
    std::lock_guard<std::mutex> lock(cache_mu_);
    auto it = cache_.find(std::string(piece));
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> id(n), prev(n), next(n);  // next == n: none; prev == -1: none
  for (size_t i = 0; i < n; ++i) {
    id[i] = byte_id_[static_cast<unsigned char>(piece[i])];
    prev[i] = static_cast<int32_t>(i) - 1;
    next[i] = static_cast<int32_t>(i + 1);
  }
  struct Cand {
    int32_t rank, pos, left, right;  // the pair (left, right) starting at symbol pos
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
  auto push = [&](int32_t pos) {
    if (pos < 0 || next[pos] >= static_cast<int32_t>(n)) return;
    auto it = merge_of_.find(pair_key(id[pos], id[next[pos]]));
    if (it != merge_of_.end()) heap.push({it->second.first, pos, id[pos], id[next[pos]]});
  };
  for (size_t i = 0; i + 1 < n; ++i) push(static_cast<int32_t>(i));
  std::vector<char> alive(n, 1);
  while (!heap.empty()) {
    const Cand c = heap.top();
    heap.pop();
    const int32_t r = next[c.pos];
    // stale: the symbol was merged away, or it or its right neighbour changed since the push
    if (!alive[c.pos] || r >= static_cast<int32_t>(n) || id[c.pos] != c.left || id[r] != c.right) continue;
    id[c.pos] = merge_of_.at(pair_key(c.left, c.right)).second;
    alive[r] = 0;
    next[c.pos] = next[r];
    if (next[r] < static_cast<int32_t>(n)) prev[next[r]] = c.pos;
    push(prev[c.pos]);
    push(c.pos);
  }
  std::vector<int32_t> ids;
  for (int32_t i = 0; i < static_cast<int32_t>(n); i = next[i]) ids.push_back(id[i]);
  out.insert(out.end(), ids.begin(), ids.end());
  std::lock_guard<std::mutex> lock(cache_mu_);
  if (cache_.size() >= kMaxCacheEntries) cache_.clear();
  cache_.emplace(std::string(piece), std::move(ids));
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 1);
  auto ordinary = [&](std::string_view part) {
    for (std::string_view piece : pre_->split(part)) encode_piece(piece, out);
  };
  // next_at[k]: where special k next occurs at or after pos (npos: nowhere further)
  std::vector<size_t> next_at(special_text_.size(), 0);
  for (size_t k = 0; k < special_text_.size(); ++k) next_at[k] = text.find(special_text_[k].first);
  size_t pos = 0;
  while (pos < text.size()) {
    size_t best = std::string_view::npos, best_k = 0;
    for (size_t k = 0; k < special_text_.size(); ++k) {
      if (next_at[k] != std::string_view::npos && next_at[k] < pos) next_at[k] = text.find(special_text_[k].first, pos);
      if (next_at[k] < best) best = next_at[k], best_k = k;  // ties: the longer (sorted first) wins
    }
    if (best == std::string_view::npos) {
      ordinary(text.substr(pos));
      break;
    }
    if (best > pos) ordinary(text.substr(pos, best - pos));
    out.push_back(special_text_[best_k].second);
    pos = best + special_text_[best_k].first.size();
  }
  return out;
}

std::string BpeTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  const auto n = static_cast<int32_t>(model_.tokens.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= n)
      ZT_THROW("tokenizer '", source_, "': token id ", ids[i], " at position ", i, " is outside the vocabulary [0, ", n, ")");
    if (model_.tokens[ids[i]].empty())
      ZT_THROW("tokenizer '", source_, "': token id ", ids[i], " at position ", i,
               " is an unused id of the vocabulary [0, ", n, "): no token has it");
    out += model_.tokens[ids[i]];
  }
  return out;
}

std::string BpeTokenizer::decode_token(int32_t id) const {
  if (id < 0 || id >= vocab_size())
    ZT_THROW("tokenizer '", source_, "': token id ", id, " is outside the vocabulary [0, ", vocab_size(), ")");
  if (model_.tokens[id].empty())
    ZT_THROW("tokenizer '", source_, "': token id ", id, " is an unused id of the vocabulary [0, ", vocab_size(),
             "): no token has it");
  return model_.tokens[id];
}

}  // namespace zt
