// defines: Gpt2Pretokenizer — GPT-2's pre-tokenization (text -> the pieces BPE merges within),
//          through PCRE2 with Unicode properties; gpt2_byte_to_unicode / gpt2_unicode_to_byte,
//          GPT-2's map between bytes and the printable characters its vocabulary files use.
//          Layer formats/.
//
// The pattern (GPT-2's encoder.py, also Hugging Face's ByteLevel pre-tokenizer):
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// compiled with PCRE2_UTF | PCRE2_UCP (\s, \p{L}, \p{N} by Unicode properties; \s without
// U+180E, which PCRE2 still counts and Unicode 6.3 and later do not: pattern() says how), JIT-compiled
// when PCRE2 has a JIT for this CPU (a slower interpreter otherwise, said once on stderr).
//
// Invalid UTF-8 (the decision, docs/formats.md "Tokenizer files"): byte-level BPE can encode any
// bytes, so the text is never refused. PCRE2_MATCH_INVALID_UTF makes the matcher treat an invalid
// sequence as a character no pattern item matches; split() returns the bytes between two matches
// (each run of invalid bytes) as a piece of its own. So the pieces always tile the input exactly:
// concatenating them gives the text back, byte for byte.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace zt {

class Gpt2Pretokenizer {
 public:
  Gpt2Pretokenizer();  // the pattern, compiled once per process (zt::Error with PCRE2's message if it cannot)
  ~Gpt2Pretokenizer();
  Gpt2Pretokenizer(const Gpt2Pretokenizer&) = delete;
  Gpt2Pretokenizer& operator=(const Gpt2Pretokenizer&) = delete;

  // The pieces of `text`, in order, tiling it exactly (views into `text`).
  std::vector<std::string_view> split(std::string_view text) const;
  bool jit() const { return jit_; }  // true when the pattern runs JIT-compiled

  static const char* pattern();

 private:
  void* code_ = nullptr;  // the process's one compiled pcre2_code_8* (kept out of this header; not owned)
  bool jit_ = false;
};

// `text` cut into chunks of about `target` bytes (at least one) that GPT-2's pre-tokenization
// splits exactly as it splits the whole: each cut is right after a '\n' with a printable ASCII
// byte on both sides (such a '\n' is always a piece of its own, so no piece spans it). A chunk
// is longer than `target` where no such place comes sooner. Lets a caller encode a large text in
// steps (zt-tokenize's progress) with the same ids as one encode() — for specials without '\n'.
std::vector<std::string_view> gpt2_safe_chunks(std::string_view text, size_t target);

// GPT-2's bytes_to_unicode (encoder.py): the 188 printable bytes '!'..'~', '¡'..'¬', '®'..'ÿ'
// map to themselves; the other 68 bytes, in increasing order, to U+0100, U+0101, ... So a space
// (0x20) is 'Ġ' (U+0120) and a newline (0x0A) is 'Ċ' (U+010A). The result is UTF-8.
const std::string& gpt2_byte_to_unicode(uint8_t b);
// The inverse over one token string of vocab.json / merges.txt: its bytes, or false when it holds a
// character outside the 256 of the map (or is not valid UTF-8).
bool gpt2_unicode_to_bytes(std::string_view token, std::string& bytes);
// The 256 bytes in GPT-2's vocabulary order (the order of bytes_to_unicode's list: the printable
// ones first, then the rest): GPT-2's token ids 0..255 are these bytes.
const std::vector<uint8_t>& gpt2_byte_order();

}  // namespace zt
