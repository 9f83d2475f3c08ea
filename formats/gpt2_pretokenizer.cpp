// defines: Pretokenizer (pattern, constructors, destructor, split), file_pattern_for_pcre2,
//          gpt2_safe_chunks, gpt2_byte_to_unicode, gpt2_byte_order, gpt2_unicode_to_bytes
//          (formats/gpt2_pretokenizer.h); file-local: pcre2_message, utf8, ByteMap, byte_map,
//          compile_pattern, Compiled
#include "formats/gpt2_pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <array>
#include <cctype>
#include <cstdio>

#include "core/check.h"

namespace zt {

namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof(buf));
  return std::string(reinterpret_cast<const char*>(buf));
}

// UTF-8 of one code point below U+0800 (all the map needs: at most U+0143).
std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

struct ByteMap {
  std::array<std::string, 256> to_unicode;  // byte -> UTF-8 of its character
  std::array<int, 0x144> from_cp;           // code point -> byte, -1 if none
  std::vector<uint8_t> order;               // GPT-2's id order of the 256 bytes
  ByteMap() {
    from_cp.fill(-1);
    auto printable = [](int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); };
    for (int b = 0; b < 256; ++b)
      if (printable(b)) order.push_back(static_cast<uint8_t>(b));
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      const uint32_t cp = printable(b) ? static_cast<uint32_t>(b) : 256u + static_cast<uint32_t>(n++);
      to_unicode[b] = utf8(cp);
      from_cp[cp] = b;
      if (!printable(b)) order.push_back(static_cast<uint8_t>(b));
    }
  }
};

const ByteMap& byte_map() {
  static const ByteMap m;
  return m;
}

}  // namespace

const char* Pretokenizer::pattern() {
  // GPT-2's pattern with \s as Unicode 6.3 and later define white space: PCRE2 (10.42) still
  // counts U+180E MONGOLIAN VOWEL SEPARATOR in \s (it was a space separator until Unicode 6.3),
  // tiktoken and transformers' tokenizers do not. So here \s is \p{White_Space} (Unicode's
  // property; PCRE2's \s is exactly it plus U+180E, checked over every code point) and \S is
  // \P{White_Space}. A plain class, not a lookahead per character ((?:(?!\x{180E})\s)+), which
  // ran out of JIT stack on a run of 10,000 spaces.
  return R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\p{White_Space}\p{L}\p{N}]+)"
         R"(|\p{White_Space}+(?!\P{White_Space})|\p{White_Space}+)";
}

namespace {

// `pattern` compiled for splitting (and JIT-compiled where PCRE2 can): UTF (the subject is UTF-8),
// UCP (\s, \d and classes by Unicode properties), MATCH_INVALID_UTF (invalid sequences match
// nothing: the pieces still tile the text). `jit` says whether the JIT took it.
pcre2_code* compile_pattern(const char* pattern, const std::string& what, bool& jit) {
  int err = 0;
  PCRE2_SIZE at = 0;
  pcre2_code* re = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern), PCRE2_ZERO_TERMINATED,
                                 PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &at, nullptr);
  if (!re) ZT_THROW(what, ": PCRE2 cannot compile the pattern at offset ", at, ": ", pcre2_message(err));
  jit = pcre2_jit_compile(re, PCRE2_JIT_COMPLETE) == 0;
  return re;
}

// GPT-2's pattern, compiled (and JIT-compiled) once per process: a compiled pcre2_code is read-only
// while matching, so every tokenizer and thread shares it; each split() has its own match data.
struct Compiled {
  pcre2_code* re = nullptr;
  bool jit = false;
  Compiled() {
    re = compile_pattern(Pretokenizer::pattern(), "GPT-2 pre-tokenizer", jit);
    if (!jit)
      std::fprintf(stderr, "zt: PCRE2 has no JIT here: GPT-2 pre-tokenization runs in PCRE2's slower interpreter\n");
  }
  ~Compiled() { pcre2_code_free(re); }
};

}  // namespace

Pretokenizer::Pretokenizer() {
  static const Compiled compiled;  // said once, loudly, when there is no JIT
  code_ = compiled.re;
  jit_ = compiled.jit;
}

Pretokenizer::Pretokenizer(const std::string& file_pattern, const std::string& what) {
  const std::string pcre = file_pattern_for_pcre2(file_pattern, what);
  code_ = compile_pattern(pcre.c_str(), what, jit_);
  owned_ = true;
  if (!jit_) std::fprintf(stderr, "zt: PCRE2 has no JIT here: %s runs in PCRE2's slower interpreter\n", what.c_str());
}

Pretokenizer::~Pretokenizer() {
  if (owned_) pcre2_code_free(static_cast<pcre2_code*>(code_));
}

std::string file_pattern_for_pcre2(const std::string& pattern, const std::string& what) {
  std::string out;
  out.reserve(pattern.size() + 64);
  bool in_class = false;  // between an unescaped '[' and its ']'
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\') {
      if (i + 1 == pattern.size()) ZT_THROW(what, ": the pattern ends in a lone '\\'");
      const char e = pattern[++i];
      if (e == 's') {
        out += "\\p{White_Space}";
      } else if (e == 'S') {
        out += "\\P{White_Space}";
      } else if (std::string_view("pPdDrntfex").find(e) != std::string_view::npos ||
                 !std::isalnum(static_cast<unsigned char>(e))) {
        // the same in both: properties, \d (Nd in both), control characters, \x{..}, escaped punctuation
        out += c;
        out += e;
      } else {
        ZT_THROW(what, ": the pattern's escape '\\", e, "' at offset ", i - 1,
                 " is not supported: its meaning differs between PCRE2 and tiktoken's regex engine (or is a "
                 "back-reference); "
                 "expected \\s \\S \\p{..} \\P{..} \\d \\D \\r \\n \\t \\f \\e \\x.. or an escaped symbol");
      }
      continue;
    }
    if (in_class) {
      // Nested classes, POSIX classes ([:alpha:], Unicode under PCRE2's UCP, ASCII in tiktoken's
      // engine) and class set operations (tiktoken's engine has && -- ~~, PCRE2 reads them as
      // characters) mean different things in the two.
      if (c == '[' || ((c == '&' || c == '-' || c == '~') && i + 1 < pattern.size() && pattern[i + 1] == c))
        ZT_THROW(what, ": the pattern's '", pattern.substr(i, c == '[' ? 1 : 2), "' inside a class at offset ", i,
                 " is not supported: nested classes, POSIX classes and class set operations differ between PCRE2 and "
                 "tiktoken's regex engine");
      if (c == ']') in_class = false;
    } else if (c == '[') {
      in_class = true;
      out += c;
      // a ']' right after '[' or '[^' is a literal, not the end of the class
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
      continue;
    } else if (c == '$') {
      ZT_THROW(what, ": the pattern's '$' at offset ", i,
               " is not supported: PCRE2's '$' also matches before a final newline, tiktoken's only at the end");
    }
    out += c;
  }
  if (in_class) ZT_THROW(what, ": the pattern has a '[' class that never closes");
  return out;
}

std::vector<std::string_view> Pretokenizer::split(std::string_view text) const {
  std::vector<std::string_view> pieces;
  auto* re = static_cast<pcre2_code*>(code_);
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(re, nullptr);
  if (!md) ZT_THROW("pre-tokenizer: out of memory for PCRE2 match data");
  pcre2_match_context* mc = nullptr;  // made only when the default JIT stack is too small
  pcre2_jit_stack* stack = nullptr;
  auto free_all = [&] {
    pcre2_match_data_free(md);
    pcre2_match_context_free(mc);
    pcre2_jit_stack_free(stack);
  };
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;   // where the next match is looked for
  size_t done = 0;  // text[0, done) is in pieces
  while (pos < text.size()) {
    int rc = pcre2_match(re, subject, text.size(), pos, 0, md, mc);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT && !mc) {
      // PCRE2's default JIT stack (32 KiB) ran out on a pattern that backtracks deeply: the same
      // match again with a stack that may grow to 256 MiB (same pattern, same result).
      stack = pcre2_jit_stack_create(32 * 1024, 256 * 1024 * 1024, nullptr);
      mc = pcre2_match_context_create(nullptr);
      if (!stack || !mc) {
        free_all();
        ZT_THROW("pre-tokenizer: out of memory for a PCRE2 JIT stack");
      }
      pcre2_jit_stack_assign(mc, nullptr, stack);
      rc = pcre2_match(re, subject, text.size(), pos, 0, md, mc);
    }
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      free_all();
      ZT_THROW("pre-tokenizer: PCRE2 match failed at byte ", pos, ": ", pcre2_message(rc));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    const size_t start = ov[0], end = ov[1];
    if (end == start) {  // an empty match makes no piece (GPT-2's pattern has none; a file's may):
      pos = start + 1;   // look again from the next character
      while (pos < text.size() && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80) ++pos;
      continue;
    }
    if (start > done) pieces.push_back(text.substr(done, start - done));  // what no match took (invalid UTF-8)
    pieces.push_back(text.substr(start, end - start));
    pos = done = end;
  }
  if (done < text.size()) pieces.push_back(text.substr(done));
  free_all();
  return pieces;
}

std::vector<std::string_view> gpt2_safe_chunks(std::string_view text, size_t target) {
  std::vector<std::string_view> chunks;
  target = target == 0 ? 1 : target;
  auto printable = [](char c) { return c > ' ' && c < 0x7F; };
  size_t start = 0;
  while (text.size() - start > target) {
    size_t cut = std::string_view::npos;
    for (size_t nl = text.find('\n', start + target - 1); nl != std::string_view::npos; nl = text.find('\n', nl + 1)) {
      if (nl > 0 && nl + 1 < text.size() && printable(text[nl - 1]) && printable(text[nl + 1])) {
        cut = nl + 1;
        break;
      }
    }
    if (cut == std::string_view::npos) break;
    chunks.push_back(text.substr(start, cut - start));
    start = cut;
  }
  if (start < text.size() || chunks.empty()) chunks.push_back(text.substr(start));
  return chunks;
}

const std::string& gpt2_byte_to_unicode(uint8_t b) { return byte_map().to_unicode[b]; }

const std::vector<uint8_t>& gpt2_byte_order() { return byte_map().order; }

bool gpt2_unicode_to_bytes(std::string_view token, std::string& bytes) {
  const ByteMap& m = byte_map();
  bytes.clear();
  for (size_t i = 0; i < token.size();) {
    const auto c0 = static_cast<unsigned char>(token[i]);
    uint32_t cp;
    if (c0 < 0x80) {
      cp = c0;
      i += 1;
    } else if ((c0 & 0xE0) == 0xC0 && i + 1 < token.size() && (static_cast<unsigned char>(token[i + 1]) & 0xC0) == 0x80) {
      cp = ((c0 & 0x1Fu) << 6) | (static_cast<unsigned char>(token[i + 1]) & 0x3Fu);
      i += 2;
      if (cp < 0x80) return false;  // an overlong encoding is not valid UTF-8
    } else {
      return false;  // not a two-byte sequence: outside U+0000..U+07FF, so outside the map
    }
    if (cp >= m.from_cp.size() || m.from_cp[cp] < 0) return false;
    bytes += static_cast<char>(static_cast<unsigned char>(m.from_cp[cp]));
  }
  return true;
}

}  // namespace zt
