// defines: train_bpe (formats/bpe_trainer.h); file-local: Word, pair_key, count_pieces
#include "formats/bpe_trainer.h"

#include <algorithm>
#include <map>
#include <unordered_map>

#include "core/check.h"

namespace zt {

namespace {

struct Word {
  std::vector<int32_t> ids;  // its tokens now
  int64_t count;             // how often the piece occurs in the texts
};

uint64_t pair_key(int32_t a, int32_t b) { return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b); }

// The pieces of one text between its specials, counted into `counts`.
void count_pieces(std::string_view text, const std::vector<std::string>& specials, const Pretokenizer& pre,
                  std::unordered_map<std::string, int64_t>& counts) {
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t cut = std::string_view::npos, len = 0;
    for (const auto& s : specials) {
      const size_t at = text.find(s, pos);
      if (at < cut || (at == cut && s.size() > len)) cut = at, len = s.size();
    }
    const std::string_view part = text.substr(pos, cut == std::string_view::npos ? std::string_view::npos : cut - pos);
    for (std::string_view piece : pre.split(part)) ++counts[std::string(piece)];
    if (cut == std::string_view::npos) break;
    pos = cut + len;
  }
}

}  // namespace

BpeModel train_bpe(const std::vector<std::string_view>& texts, const BpeTrainOptions& opt,
                   const std::function<void(int64_t, int64_t)>& progress) {
  const int64_t n_special = static_cast<int64_t>(opt.specials.size());
  if (opt.vocab_size < 256 + n_special)
    ZT_THROW("BPE training: vocab_size ", opt.vocab_size, " is too small: it must hold the 256 bytes and the ", n_special,
             " special token(s), at least ", 256 + n_special);
  for (const auto& s : opt.specials)
    if (s.empty()) ZT_THROW("BPE training: a special token is empty");

  // 1. the distinct pieces and their counts, in byte order (deterministic whatever the hashing)
  Pretokenizer pre;
  std::unordered_map<std::string, int64_t> counts;
  for (std::string_view t : texts) count_pieces(t, opt.specials, pre, counts);
  std::map<std::string, int64_t> sorted(counts.begin(), counts.end());

  // 2. the 256 bytes, GPT-2's order
  BpeModel m;
  int32_t byte_id[256];
  for (uint8_t b : gpt2_byte_order()) {
    byte_id[b] = static_cast<int32_t>(m.tokens.size());
    m.tokens.emplace_back(1, static_cast<char>(b));
  }
  std::vector<Word> words;
  words.reserve(sorted.size());
  for (const auto& [piece, count] : sorted) {
    Word w{{}, count};
    for (unsigned char c : piece) w.ids.push_back(byte_id[c]);
    if (w.ids.size() > 1) words.push_back(std::move(w));  // a one-token word has no pair
  }

  // 3. merges
  const int64_t wanted = opt.vocab_size - 256 - n_special;
  std::unordered_map<uint64_t, int64_t> pair_count;
  for (int64_t done = 0; done < wanted; ++done) {
    pair_count.clear();
    for (const Word& w : words)
      for (size_t i = 0; i + 1 < w.ids.size(); ++i) pair_count[pair_key(w.ids[i], w.ids[i + 1])] += w.count;
    uint64_t best = 0;
    int64_t best_count = 0;
    for (const auto& [key, c] : pair_count)
      if (c > best_count || (c == best_count && key < best)) best = key, best_count = c;  // ties: smallest (left, right)
    if (best_count < std::max<int64_t>(opt.min_frequency, 1)) break;
    const auto left = static_cast<int32_t>(best >> 32), right = static_cast<int32_t>(best & 0xffffffffu);
    const auto merged = static_cast<int32_t>(m.tokens.size());
    m.tokens.push_back(m.tokens[left] + m.tokens[right]);
    m.merges.emplace_back(left, right);
    for (Word& w : words) {
      size_t out = 0;
      for (size_t i = 0; i < w.ids.size(); ++out) {
        if (i + 1 < w.ids.size() && w.ids[i] == left && w.ids[i + 1] == right) {
          w.ids[out] = merged;
          i += 2;
        } else {
          w.ids[out] = w.ids[i];
          i += 1;
        }
      }
      w.ids.resize(out);
    }
    std::erase_if(words, [](const Word& w) { return w.ids.size() < 2; });
    if (progress) progress(done + 1, wanted);
  }

  // 4. the specials, last
  for (const auto& s : opt.specials) {
    m.specials.push_back(static_cast<int32_t>(m.tokens.size()));
    m.tokens.push_back(s);
  }
  return m;
}

}  // namespace zt
