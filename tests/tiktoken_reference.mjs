// defines: the independent reference for tiktoken-family tokenizer.json (tests/test_tiktoken.cpp):
//          OpenAI's tiktoken (npm `tiktoken` 1.0.22, its Rust core compiled to WASM) converts one
//          of its encodings to a Hugging Face tokenizer.json and encodes a set of texts.
//
//   node tests/tiktoken_reference.mjs --tiktoken DIR --encoding NAME --out OUT [--corpus FILE]...
//
// DIR is the npm package (…/node_modules/tiktoken); NAME gpt2, cl100k_base or o200k_base;
// --skip FILE (a JSON array of code points) leaves code points out of the sweep below. Writes
//   OUT/tokenizer.json  the tiktoken family's shape, as transformers' TikTokenConverter writes it:
//                       vocab = the ranks, each token in GPT-2's byte-level form; merges recovered
//                       from the ranks (below); a Sequence of Split (the encoding's pat_str,
//                       Isolated) and ByteLevel (use_regex false); ignore_merges true (a piece that
//                       is a token is that token, as tiktoken does); the specials as added tokens.
//   OUT/cases.json      [{"name", "text", "ids"}]: each text (valid UTF-8: tiktoken takes JS
//                       strings) and tiktoken's ids for it, specials allowed (encode(text, "all")).
//
// Merges, the way transformers recovers them (convert_slow_tokenizer.TikTokenConverter): for each
// token of rank r, every split into two tokens l + r' gives the merge (l, r'), ranked by r, then
// by (rank l, rank r'). So Hugging Face's BPE merges any adjacent pair whose concatenation is a
// token, lowest concatenation rank first: tiktoken's byte_pair_merge.
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";

const args = { corpus: [], skip: null };
for (let i = 2; i < process.argv.length; i += 2) {
  const key = process.argv[i].replace(/^--/, "");
  if (key === "corpus") args.corpus.push(process.argv[i + 1]);
  else args[key] = process.argv[i + 1];
}
for (const k of ["tiktoken", "encoding", "out"])
  if (!args[k]) throw new Error(`tiktoken_reference.mjs: --${k} is required (usage at the top of the file)`);

const require = createRequire(import.meta.url);
const tiktoken = require(path.join(args.tiktoken, "tiktoken.cjs"));
const version = JSON.parse(fs.readFileSync(path.join(args.tiktoken, "package.json"), "utf8")).version;
if (version !== "1.0.22") throw new Error(`tiktoken_reference.mjs: npm tiktoken ${version} at ${args.tiktoken}, expected the pinned 1.0.22`);
const spec = JSON.parse(fs.readFileSync(path.join(args.tiktoken, "encoders", `${args.encoding}.json`), "utf8"));

// bpe_ranks: "! <first rank> <base64 token> <base64 token> ..."; "! N" restarts the count at N
// ('!' is not a base64 character, so it cannot be a token).
const ranks = new Map();  // token bytes as a latin1 string -> rank
{
  const parts = spec.bpe_ranks.split(/\s+/).filter((s) => s.length);
  let rank = 0;
  for (let i = 0; i < parts.length; i++) {
    if (parts[i] === "!") rank = parseInt(parts[++i], 10);
    else ranks.set(Buffer.from(parts[i], "base64").toString("latin1"), rank++);
  }
}

// GPT-2's bytes_to_unicode: the printable bytes as themselves, the other 68 as U+0100...
const byteChar = new Array(256);
{
  const printable = (b) => (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
  let n = 0;
  for (let b = 0; b < 256; b++) byteChar[b] = String.fromCodePoint(printable(b) ? b : 256 + n++);
}
const form = (latin1) => Array.from(latin1, (c) => byteChar[c.charCodeAt(0)]).join("");

const vocab = {};
const merges = [];
for (const [tok, rank] of ranks) {
  vocab[form(tok)] = rank;
  if (tok.length === 1) continue;
  const local = [];
  for (let k = 1; k < tok.length; k++) {
    const l = tok.slice(0, k), r = tok.slice(k);
    if (ranks.has(l) && ranks.has(r)) local.push([ranks.get(l), ranks.get(r), l, r]);
  }
  local.sort((x, y) => x[0] - y[0] || x[1] - y[1]);
  for (const m of local) merges.push([rank, m[2], m[3]]);
}
merges.sort((x, y) => x[0] - y[0]);  // stable: each token's splits keep their order

const added = Object.entries(spec.special_tokens).map(([content, id]) => ({
  id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true,
}));
added.sort((a, b) => a.id - b.id);
const tokenizerJson = {
  version: "1.0",
  truncation: null,
  padding: null,
  added_tokens: added,
  normalizer: null,
  pre_tokenizer: {
    type: "Sequence",
    pretokenizers: [
      { type: "Split", pattern: { Regex: spec.pat_str }, behavior: "Isolated", invert: false },
      { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: false },
    ],
  },
  post_processor: { type: "ByteLevel", add_prefix_space: true, trim_offsets: false, use_regex: true },
  decoder: { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true },
  model: {
    type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null,
    fuse_unk: false, byte_fallback: false, ignore_merges: true, vocab,
    merges: merges.map((m) => [form(m[1]), form(m[2])]),
  },
};
fs.mkdirSync(args.out, { recursive: true });
fs.writeFileSync(path.join(args.out, "tokenizer.json"), JSON.stringify(tokenizerJson));

// The texts: the corpus files, hard cases, the specials, and a sweep of the code points.
const cases = [];
for (const f of args.corpus) cases.push({ name: `corpus ${path.basename(f)}`, text: fs.readFileSync(f, "utf8") });
const hard = {
  "scripts": "Привет, мир! こんにちは世界 你好，世界。 مرحبا بالعالم שלום עולם नमस्ते दुनिया Γειά σου Κόσμε 안녕하세요 ภาษาไทย ქართული Ελληνικά Ōkami ǅemal",
  "combining marks": "e\u0301 n\u0303 a\u0308\u0304 \u0915\u094D\u0937 Z\u0351\u036B\u0343\u036A\u0302",
  "emoji": "👍 👍🏽 👨‍👩‍👧‍👦 🇺🇸🇯🇵 ❤️ 🤖💬 x🙂y 🏳️‍🌈",
  "digits": "0 1 12 123 1234 12345 123456 1234567890 3.14159 1,000,000 2024-11-27 ٣٤٥٦ ४२ ①② ½ x2y33z444 𝟙𝟚𝟛",
  "digits run": "9".repeat(1001),
  "white space": "  leading\ntrailing   \na\t\tb\n\n\n \n \n\r\n\r\nx  \n  y\u00A0z\u3000w\u2003v \u180Eu\u180E\u180Et \u200B\u2028\u2029\u0085\u000B\u000C end ",
  "only spaces": "      ",
  "contractions": "I'm you're He'S WE'LL they'VE it'D don'T 's's'S 'LL'll 'Ll ſ'ſ 'ſ 'ẞ ''s x's",
  "code": "int main(int argc, char** argv) {\n\tfor (int i = 0; i < 10; ++i) {\n\t\tprintf(\"%d\\n\", i);\n\t}\n\treturn 0;\n}\n// comment\n#define X(a) ((a) * 2)\n",
  "punctuation": "!!!??? ...,,,;;; --- ___ *** ''' \"\"\" ((( ))) [[[ ]]] {{{ }}} <<< >>> ||| \\\\\\ /// ~~~ @@@ ### $$$ %%% ^^^ &&&",
  "long word": "a".repeat(10000),
  "long mixed word": "ab".repeat(2500) + "Zy".repeat(2500),
  "long spaces": " ".repeat(10000) + "x",
  "long newlines": "\n".repeat(5000) + "x" + " \n".repeat(2000),
  "long cjk": "漢字".repeat(3000),
  "long punctuation": ".,".repeat(5000),
  "empty": "",
  "one space": " ",
  "one letter": "a",
};
for (const [name, text] of Object.entries(hard)) cases.push({ name, text });
const specials = Object.keys(spec.special_tokens);
cases.push({ name: "specials", text: `${specials[0]}Hello${specials.join(" x ")}\n${specials[specials.length - 1]}${specials[0]} end` });
// Every code point (surrogates left out: not valid UTF-8; and those --skip names) in a few
// contexts that tell the pattern's classes apart: after a letter, after a space, doubled, before a
// digit, before a contraction.
const skip = new Set(args.skip ? JSON.parse(fs.readFileSync(args.skip, "utf8")) : []);
const sweep = (lo, hi) => {
  for (let start = lo; start < hi; start += 4096) {
    let text = "";
    for (let cp = start; cp < Math.min(start + 4096, hi); cp++) {
      if ((cp >= 0xd800 && cp < 0xe000) || skip.has(cp)) continue;
      const c = String.fromCodePoint(cp);
      text += `a${c} ${c}${c}1${c}'s\n`;
    }
    cases.push({ name: `code points U+${start.toString(16).toUpperCase()}`, text });
  }
};
sweep(0, 0x32400);
sweep(0xe0000, 0xe1000);

const enc = tiktoken.get_encoding(args.encoding);
const decoder = new TextDecoder("utf-8", { fatal: true });
for (const c of cases) {
  c.ids = Array.from(enc.encode(c.text, "all"));
  // tiktoken's own round trip, so a wrong reference is caught here and not blamed on the reader
  if (decoder.decode(enc.decode(Uint32Array.from(c.ids))) !== c.text)
    throw new Error(`tiktoken_reference.mjs: tiktoken's own decode(encode(text)) differs for '${c.name}'`);
}
enc.free();
fs.writeFileSync(path.join(args.out, "cases.json"), JSON.stringify(cases));
console.log(`tiktoken ${version} ${args.encoding}: ${ranks.size} ranks, ${merges.length} merges, ${specials.length} specials, ${cases.length} texts -> ${args.out}`);
