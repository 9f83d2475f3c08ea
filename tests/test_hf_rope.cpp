// defines: 2 Catch2 test cases tagged [hf], [rope]; helpers: random_mat, matmul_t, rotate_half_rope,
//          interleaved_rope
//
// formats: the RoPE convention of imported Llama weights, checked numerically.
//  1. An attention block of a Llama loaded from an HF file computes what transformers'
//     LlamaAttention computes (written out below in float64: rotate_half, repeat_kv, causal
//     softmax), so HF's q_proj / k_proj need no permutation on import.
//  2. Meta's original layout (interleaved pairs (2j, 2j+1)) gives the same q.k scores as HF's
//     rotate_half on rows permuted by convert_llama_weights_to_hf.py's permute(), and different
//     ones without it: the permutation a Meta checkpoint would need, and proof the check can fail.
#include <catch2/catch.hpp>
#include <cmath>

#include "formats/hf_weights.h"
#include "models/init.h"
#include "tests/hf_test_util.h"
#include "tests/temp_dir.h"

using namespace zt;
using namespace zt::test;

namespace {

using Mat = std::vector<double>;  // row-major

Mat random_mat(int64_t n, Rng& rng, double std = 0.3) {
  Tensor t = Tensor::empty({n}, DType::f64);
  rng.fill_normal(t, 0.0, std);
  return t.to_vector();
}

// y (T, out) = x (T, in) w^T, w (out, in)
Mat matmul_t(const Mat& x, const Mat& w, int64_t T, int64_t in, int64_t out) {
  Mat y(static_cast<size_t>(T * out), 0.0);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t o = 0; o < out; ++o)
      for (int64_t i = 0; i < in; ++i) y[t * out + o] += x[t * in + i] * w[o * in + i];
  return y;
}

// transformers' apply_rotary_pos_emb on x (T, H, D): x*cos + rotate_half(x)*sin with
// emb = cat(freqs, freqs), freqs[t][j] = t / theta^(2j/D); rotate_half(x) = cat(-x2, x1).
void rotate_half_rope(Mat& x, int64_t T, int64_t H, int64_t D, double theta) {
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h) {
      double* r = &x[(t * H + h) * D];
      Mat o(static_cast<size_t>(D));
      for (int64_t d = 0; d < D; ++d) {
        const double a = t / std::pow(theta, 2.0 * (d % (D / 2)) / D);
        const double rh = d < D / 2 ? -r[d + D / 2] : r[d - D / 2];
        o[d] = r[d] * std::cos(a) + rh * std::sin(a);
      }
      std::copy(o.begin(), o.end(), r);
    }
}

// Meta's llama/model.py apply_rotary_emb: pairs (2j, 2j+1) as complex numbers times e^{i t w_j}.
void interleaved_rope(Mat& x, int64_t T, int64_t H, int64_t D, double theta) {
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t j = 0; j < D / 2; ++j) {
        double* p = &x[(t * H + h) * D + 2 * j];
        const double a = t / std::pow(theta, 2.0 * j / D), re = p[0], im = p[1];
        p[0] = re * std::cos(a) - im * std::sin(a);
        p[1] = re * std::sin(a) + im * std::cos(a);
      }
}

}  // namespace

TEST_CASE("HF weights: an imported Llama attention block computes transformers' LlamaAttention", "[hf][rope]") {
  TempDir tmp("hf_rope");
  ModelConfig c = small_hf_llama(false);  // 4 query heads, 2 kv heads, D = 4, theta 500
  c.padded_vocab_size = c.vocab_size;
  const int64_t C = c.n_embd, H = c.n_head, Hkv = c.n_kv_head, D = c.head_dim(), T = 7;
  // HF tensors of layer 0 drawn here; the other tensors come from a source model.
  Llama src(c);
  Rng rng(21);
  init_model(src, rng);
  std::vector<RawTensor> ts = hf_llama_raw(src, "F32");
  Mat wq = random_mat(C * C, rng), wk = random_mat(Hkv * D * C, rng), wv = random_mat(Hkv * D * C, rng),
      wo = random_mat(C * C, rng);
  for (RawTensor& t : ts) {
    if (t.name == "model.layers.0.self_attn.q_proj.weight") t.bytes = encode(wq, "F32");
    if (t.name == "model.layers.0.self_attn.k_proj.weight") t.bytes = encode(wk, "F32");
    if (t.name == "model.layers.0.self_attn.v_proj.weight") t.bytes = encode(wv, "F32");
    if (t.name == "model.layers.0.self_attn.o_proj.weight") t.bytes = encode(wo, "F32");
  }
  for (Mat* w : {&wq, &wk, &wv, &wo}) *w = decode(encode(*w, "F32"), "F32");  // the float32 values
  write_raw_safetensors(tmp.file("model.safetensors"), ts);
  write_text(tmp.file("config.json"), llama_config_json(c));
  Llama m(read_hf_config(tmp.dir.string()));
  load_hf_weights(tmp.dir.string(), m);

  const Mat x = decode(encode(random_mat(T * C, rng, 1.0), "F32"), "F32");  // (T, C)
  Tensor xt = Tensor::from_vector(x, {1, T, C});
  NoGradGuard ng;
  const std::vector<double> ours = m.block(0).self_attn.forward(Var(xt)).value().to_vector();

  // transformers' LlamaAttention.forward, float64.
  Mat q = matmul_t(x, wq, T, C, C), k = matmul_t(x, wk, T, C, Hkv * D), v = matmul_t(x, wv, T, C, Hkv * D);
  rotate_half_rope(q, T, H, D, c.rope_theta);
  rotate_half_rope(k, T, Hkv, D, c.rope_theta);
  Mat y(static_cast<size_t>(T * C), 0.0);
  for (int64_t h = 0; h < H; ++h) {
    const int64_t g = h / (H / Hkv);  // repeat_kv
    for (int64_t i = 0; i < T; ++i) {
      std::vector<double> s(static_cast<size_t>(i + 1));
      double mx = -1e300, sum = 0;
      for (int64_t j = 0; j <= i; ++j) {
        double dot = 0;
        for (int64_t d = 0; d < D; ++d) dot += q[(i * H + h) * D + d] * k[(j * Hkv + g) * D + d];
        s[j] = dot / std::sqrt(static_cast<double>(D));
        mx = std::max(mx, s[j]);
      }
      for (double& e : s) sum += (e = std::exp(e - mx));
      for (int64_t j = 0; j <= i; ++j)
        for (int64_t d = 0; d < D; ++d) y[i * C + h * D + d] += s[j] / sum * v[(j * Hkv + g) * D + d];
    }
  }
  const Mat want = matmul_t(y, wo, T, C, C);
  REQUIRE(ours.size() == want.size());
  double worst = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    worst = std::max(worst, std::abs(ours[i] - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  INFO("max |ours - transformers| = " << worst << " of max |y| = " << scale);
  CHECK(scale > 0.1);
  CHECK(worst <= 1e-5 * std::max(1.0, scale));
}

TEST_CASE("RoPE: Meta's interleaved layout equals rotate_half on HF-permuted q/k rows", "[hf][rope]") {
  const int64_t C = 24, H = 3, D = 8, T = 6;
  const double theta = 10000.0;
  Rng rng(5);
  const Mat x = random_mat(T * C, rng, 1.0), wq = random_mat(C * C, rng), wk = random_mat(C * C, rng);
  // convert_llama_weights_to_hf.py: permute(w) = w.view(H, D/2, 2, C).transpose(1, 2).reshape(C, C):
  // HF row (h, a, j) = Meta row (h, j, a).
  auto permute = [&](const Mat& w) {
    Mat o(w.size());
    for (int64_t h = 0; h < H; ++h)
      for (int64_t a = 0; a < 2; ++a)
        for (int64_t j = 0; j < D / 2; ++j)
          for (int64_t i = 0; i < C; ++i) o[(h * D + a * D / 2 + j) * C + i] = w[(h * D + 2 * j + a) * C + i];
    return o;
  };
  auto scores = [&](const Mat& q, const Mat& k) {  // (H, T, T) dot products
    Mat s;
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < T; ++i)
        for (int64_t j = 0; j < T; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < D; ++d) dot += q[(i * H + h) * D + d] * k[(j * H + h) * D + d];
          s.push_back(dot);
        }
    return s;
  };
  Mat qm = matmul_t(x, wq, T, C, C), km = matmul_t(x, wk, T, C, C);
  interleaved_rope(qm, T, H, D, theta);
  interleaved_rope(km, T, H, D, theta);
  const Mat meta = scores(qm, km);

  // HF side through ZeroTensor's rope() op (the one the Llama uses), float64.
  auto zt_rope = [&](const Mat& w) {
    Tensor t = Tensor::from_vector(matmul_t(x, w, T, C, C), {1, T, H, D}, DType::f64);
    NoGradGuard ng;
    return rope(Var(t), theta).value().to_vector();
  };
  const Mat hf = scores(zt_rope(permute(wq)), zt_rope(permute(wk)));
  const Mat unpermuted = scores(zt_rope(wq), zt_rope(wk));
  double worst = 0, off = 0;
  for (size_t i = 0; i < meta.size(); ++i) {
    worst = std::max(worst, std::abs(hf[i] - meta[i]));
    off = std::max(off, std::abs(unpermuted[i] - meta[i]));
  }
  CHECK(worst <= 1e-10);
  CHECK(off > 1e-2);  // without the permutation the function differs
}
