// defines: Pretokenizer — byte-level BPE's pre-tokenization (text -> the pieces BPE merges
//          within) through PCRE2 with Unicode properties: GPT-2's pattern, or the split regex a
//          tokenizer.json gives (Llama 3, cl100k_base); gpt2_byte_to_unicode /
//          gpt2_unicode_to_byte, GPT-2's map between bytes and the printable characters its
//          vocabulary files use. Layer formats/.
//
// The pattern (GPT-2's encoder.py, also Hugging Face's ByteLevel pre-tokenizer):
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// compiled with PCRE2_UTF | PCRE2_UCP (\s, \p{L}, \p{N} by Unicode properties; \s without
// U+180E, which PCRE2 still counts and Unicode 6.3 and later do not: \p{White_Space}, pattern() says why), JIT-compiled
// when PCRE2 has a JIT for this CPU (a slower interpreter otherwise, said once on stderr).
//
// A file's pattern (tiktoken's regex dialect, as tiktoken and Hugging Face run it) is compiled the
// same way, with the same flags, after file_pattern_for_pcre2 rewrites the few escapes whose
// meaning differs between PCRE2 and tiktoken's engine: \s and \S become \p{White_Space} and
// \P{White_Space} (Unicode's White_Space property, which tiktoken's \s is and which does not hold
// U+180E), and escapes that mean something else in PCRE2 (\w, \b, \h, \v, \R, ...) or a '$' outside
// a class (PCRE2's matches before a final newline too) are refused naming the pattern and the place.
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

class Pretokenizer {
 public:
  Pretokenizer();  // GPT-2's pattern, compiled once per process (zt::Error with PCRE2's message if it cannot)
  // A file's split regex (tiktoken's dialect), rewritten by file_pattern_for_pcre2 and compiled for
  // this object; errors name `what` (the file and key it came from).
  Pretokenizer(const std::string& file_pattern, const std::string& what);
  ~Pretokenizer();
  Pretokenizer(const Pretokenizer&) = delete;
  Pretokenizer& operator=(const Pretokenizer&) = delete;

  // The pieces of `text`, in order, tiling it exactly (views into `text`).
  std::vector<std::string_view> split(std::string_view text) const;
  bool jit() const { return jit_; }  // true when the pattern runs JIT-compiled

  static const char* pattern();  // GPT-2's

 private:
  void* code_ = nullptr;  // a compiled pcre2_code_8* (kept out of this header)
  bool owned_ = false;    // false: GPT-2's, shared by the process; true: this object's file pattern
  bool jit_ = false;
};

// A pattern in tiktoken's regex dialect (a tokenizer.json's Split regex) as PCRE2 must see it to
// split the same way: \s -> \p{White_Space}, \S -> \P{White_Space}, inside classes too. Throws
// zt::Error naming `what`, the escape and its offset for a construct whose meaning differs (\w \W
// \b \B \h \H \v \V \R \X \N \K \G \A \z \Z \Q \E \C, \u, back-references \1.. and \g, '$' outside a class).
std::string file_pattern_for_pcre2(const std::string& pattern, const std::string& what);

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
