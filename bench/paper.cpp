// defines: main (bench_paper); helpers: fmt, mib, commas, yes, read_jsonl, table1, table2, md_tables and 9
//          more
//
// bench_paper — the ZeRO paper reproduction report (bench/paper.sh runs it last):
//
//   a) Tables 1 and 2 of Rajbhandari et al. 2019 (arXiv:1910.02054) from our estimator
//      (zero/paper_tables.h) beside the values the paper prints, cell by cell;
//   b) the measured small-scale counterpart: bench_zero runs (model states per rank and bytes
//      moved per step, stages 0-3 x N ranks) checked against the formulas, and bench_capacity
//      searches (the largest model per stage / offload tier under one device cap);
//   c) the data files bench/paper.sh plots with gnuplot.
//
//   bench_paper --tables                                    # print Tables 1 and 2, nothing else
//   bench_paper --zero-jsonl Z --capacity-jsonl C --out-json J --md M --plot-dir D [--meta k=v ...]
//   bench_paper --from J --out-json J --md M --plot-dir D  # re-report from a previous J (no runs)
//
// Nothing here runs a model: every measured number comes from the JSON lines of bench_zero and
// bench_capacity; every formula from zero/ (model_state_bytes_x_n, paper_table*_cell,
// ring_bytes_per_step; the padded layout from the model built without bytes).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "core/check.h"           // defines: ZT_THROW
#include "models/init.h"          // defines: make_model
#include "models/model_config.h"  // defines: model_config, ModelOptions
#include "zero/paper_tables.h"    // defines: model_state_bytes_x_n, paper_table1_cell, paper_table2_cell, ...

using namespace zt;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

template <class... A>
std::string fmt(const char* f, A... a) {
  const int n = std::snprintf(nullptr, 0, f, a...);
  std::string s(static_cast<size_t>(n < 0 ? 0 : n), '\0');
  std::snprintf(s.data(), s.size() + 1, f, a...);
  return s;
}
std::string mib(double b) { return fmt("%.2f", b / (1 << 20)); }
std::string commas(int64_t v) {
  const std::string d = std::to_string(v < 0 ? -v : v);
  std::string s = v < 0 ? "-" : "";
  for (size_t i = 0; i < d.size(); ++i) {
    if (i > 0 && (d.size() - i) % 3 == 0) s += ',';
    s += d[i];
  }
  return s;
}
const char* yes(bool b) { return b ? "yes" : "**NO**"; }

std::vector<json> read_jsonl(const std::string& path) {
  std::ifstream f(path);
  if (!f) ZT_THROW("bench_paper: cannot read '", path, "'");
  std::vector<json> out;
  for (std::string line; std::getline(f, line);)
    if (!line.empty()) out.push_back(json::parse(line));
  return out;
}

const char* kModelName[3] = {"7.5B", "128B", "1T"};

// ---- a) the paper's tables --------------------------------------------------------------------

json table1() {
  json cells = json::array();
  for (int m = 0; m < 3; ++m)
    for (int row = 0; row < 6; ++row)
      for (int stage = 0; stage <= 3; ++stage) {
        const int64_t psi = kPaperTable1Psi[m], nd = kPaperTable1Nd[row];
        int64_t bx = 0;
        for (Category c : {Category::params, Category::grads, Category::optim})
          bx += model_state_bytes_x_n(c, psi, stage, nd, Precision::bf16);
        const std::string ours = paper_table1_cell(psi, stage, nd), paper = paper_table1_printed(m, stage, row);
        cells.push_back({{"model", kModelName[m]}, {"psi", psi}, {"nd", nd}, {"stage", stage},
                         {"exact_gb", static_cast<double>(bx) / static_cast<double>(nd) / 1e9}, {"ours", ours},
                         {"paper", paper}, {"equal", ours == paper}, {"paper_has_column", stage > 0}});
      }
  return cells;
}

json table2() {
  json rows = json::array();
  for (size_t r = 0; r < kPaperTable2Mp.size(); ++r) {
    const int64_t mp = kPaperTable2Mp[r], gpus = kPaperTable2Gpus[r];
    json row = {{"mp", mp}, {"gpus", gpus}, {"nd", gpus / mp}, {"cells", json::array()},
                {"measured_paper", {paper_table2_printed(static_cast<int>(r), 4), paper_table2_printed(static_cast<int>(r), 5)}}};
    for (int stage = 0; stage <= 3; ++stage) {
      const double exact = paper_table2_max_params(stage, mp, gpus);
      const std::string ours = paper_table2_cell(stage, mp, gpus), paper = paper_table2_printed(static_cast<int>(r), stage);
      // The exact value rounded directly to 0.1B (not the paper's MP x rounded MP = 1 value).
      const std::string direct = format_params(static_cast<int64_t>(exact / 1e8 + 0.5));
      row["cells"].push_back({{"stage", stage}, {"exact_params", exact}, {"ours", ours}, {"paper", paper},
                              {"equal", ours == paper}, {"exact_rounded", direct}, {"exact_rounded_equal", direct == paper}});
    }
    rows.push_back(row);
  }
  return rows;
}

void md_tables(std::vector<std::string>& md, const json& t1, const json& t2) {
  int n1 = 0, ok1 = 0;
  for (const json& c : t1)
    if (c["paper_has_column"]) ++n1, ok1 += c["equal"].get<bool>();
  md.push_back("## a) The paper's Table 1 from our estimator");
  md.push_back("");
  md.push_back(
      "Per-device memory of the model states in GB (1e9 bytes), mixed-precision Adam (K = 12): Baseline 16Psi, "
      "P_os 4Psi + 12Psi/Nd, P_os+g 2Psi + 14Psi/Nd, P_os+g+p 16Psi/Nd (zero/paper_tables.h `model_state_bytes_x_n`, "
      "bf16). 'exact' = the formula; 'ours' = `paper_table1_cell`, the exact value rounded the paper's way "
      "(from 100 GB the integer part, from 10 one decimal, below 10 two decimals, half up; trailing zeros dropped: "
      "`format_paper_gb`); 'paper' = the printed cell, transcribed from arXiv:1910.02054 Table 1. The paper's "
      "table has no Baseline column (its Nd = 1 row is the baseline); ours is shown for reference.");
  md.push_back("");
  md.push_back(fmt("**%d of %d printed cells equal** (the baseline column: not printed by the paper, equal to its Nd = 1 "
                   "row at every Nd).", ok1, n1));
  for (int m = 0; m < 3; ++m) {
    md.push_back("");
    md.push_back(fmt("### Psi = %s", kModelName[m]));
    md.push_back("");
    md.push_back("| Nd | Baseline ours | P_os exact | ours | paper | equal | P_os+g exact | ours | paper | equal | "
                 "P_os+g+p exact | ours | paper | equal |");
    md.push_back("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for (int row = 0; row < 6; ++row) {
      std::string line = fmt("| %lld |", static_cast<long long>(kPaperTable1Nd[row]));
      for (int stage = 0; stage <= 3; ++stage) {
        const json& c = t1[static_cast<size_t>((m * 6 + row) * 4 + stage)];
        if (stage == 0) {
          line += " " + c["ours"].get<std::string>() + " |";
          continue;
        }
        line += fmt(" %.6g | %s | %s | %s |", c["exact_gb"].get<double>(), c["ours"].get<std::string>().c_str(),
                    c["paper"].get<std::string>().c_str(), c["equal"].get<bool>() ? "yes" : "**NO**");
      }
      md.push_back(line);
    }
  }
  int n2 = 0, ok2 = 0, direct2 = 0;
  for (const json& r : t2)
    for (const json& c : r["cells"]) ++n2, ok2 += c["equal"].get<bool>(), direct2 += c["exact_rounded_equal"].get<bool>();
  md.push_back("");
  md.push_back("## a) The paper's Table 2 (analytic columns) from our estimator");
  md.push_back("");
  md.push_back("Max theoretical model size on 32 GB V100s (model states only, K = 12): Psi_max = MP x 32e9 x Nd / "
               "(model-state bytes of one parameter x Nd), Nd = GPUs / MP = 64 in every row (`paper_table2_max_params`). "
               "The paper prints MP x (the MP = 1 value rounded to 0.1B), and from 500B on in T to one decimal: the exact "
               "P_os value at MP = 2 is 15.28B, printed 15.2B = 2 x 7.6B. 'ours' applies that rule "
               "(`paper_table2_cell`); 'exact, rounded' rounds the exact value directly, to show where the rule matters. "
               "The measured columns are the paper's V100 measurements, quoted only.");
  md.push_back("");
  md.push_back(fmt("**%d of %d analytic cells equal** with the paper's rule (%d of %d if the exact value were rounded "
                   "directly).", ok2, n2, direct2, n2));
  md.push_back("");
  md.push_back("| MP | GPUs | Baseline exact | ours | paper | equal | P_os exact | ours | paper | equal | P_os+g exact | ours | "
               "paper | equal | P_os+g+p exact | ours | paper | equal | paper measured: Baseline / ZeRO-DP (P_os) |");
  md.push_back("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
  for (const json& r : t2) {
    std::string line = fmt("| %lld | %lld |", r["mp"].get<long long>(), r["gpus"].get<long long>());
    for (const json& c : r["cells"])
      line += fmt(" %.2fB (%s) | %s | %s | %s |", c["exact_params"].get<double>() / 1e9, c["exact_rounded"].get<std::string>().c_str(),
                  c["ours"].get<std::string>().c_str(), c["paper"].get<std::string>().c_str(), yes(c["equal"].get<bool>()));
    line += " " + r["measured_paper"][0].get<std::string>() + " / " + r["measured_paper"][1].get<std::string>() + " |";
    md.push_back(line);
  }
  md.push_back("");
  md.push_back("Shape of Table 2: at a fixed Nd = 64 the size grows linearly with MP down each column; across a row "
               "Baseline : P_os : P_os+g : P_os+g+p = 1 : 3.8 : 7.2 : 64 (= 16 / (4 + 12/64), 16 / (2 + 14/64), Nd). The "
               "paper's measured P_os sizes (6.2B ... 100B) sit ~20% under the theoretical 7.6B ... 121.6B (activations, "
               "buffers, fragmentation), as our capacity runs below sit under the model-state-only ratios.");
}

// ---- b) measured: model states and bytes moved ------------------------------------------------

Precision precision_of(const json& run) {
  const std::string p = run.value("precision", "fp32");
  return p == "bf16" ? Precision::bf16 : p == "fp16" ? Precision::f16 : Precision::f32;
}

int64_t state_bytes(int64_t psi, int stage, int64_t n, Precision p) {  // per rank, rounded up
  int64_t b = 0;
  for (Category c : {Category::params, Category::grads, Category::optim})
    b += (model_state_bytes_x_n(c, psi, stage, n, p) + n - 1) / n;
  return b;
}

// The embedding unit's padded size (wte + wpe of a GPT-2 model) for N ranks: stage 3 gathers it
// once more than the 3Psi formula counts (the tied head reads wte: bench/results/zero.md).
int64_t embed_padded(const std::string& model, int64_t n, std::map<std::pair<std::string, int64_t>, int64_t>& cache) {
  auto key = std::make_pair(model, n);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  const ModelConfig cfg = model_config(model);
  ModelOptions opt{DType::f32, n, kShardAlignment};
  opt.materialize = false;  // laid out and padded for n ranks, no bytes
  auto layout = make_model(cfg, opt);
  const int64_t e = cfg.family == "gpt2" && cfg.tie_embeddings ? layout->units().front()->params().padded_numel() : 0;
  return cache[key] = e;
}

json check_runs(const std::vector<json>& runs) {
  std::map<std::pair<std::string, int64_t>, int64_t> cache;
  json out = json::array();
  for (const json& r : runs) {
    const int stage = r["stage"], n = r["world_size"];
    const int64_t psi = r["psi"], P = r["psi_padded"], pad = P - psi;
    const Precision prec = precision_of(r);
    const int64_t elem = prec == Precision::f32 ? 4 : 2;
    // Model states at rest: every rank, against the formula on the padded Psi (exact) and on Psi.
    const int64_t f_pad = state_bytes(P, stage, n, prec), f_psi = state_bytes(psi, stage, n, prec);
    const int64_t pad_share = f_pad - f_psi;  // the formula applied to the padding elements
    bool all_equal = true;
    for (const json& k : r["ranks"]) all_equal = all_equal && k["model_state_rest_bytes"].get<int64_t>() == f_pad;
    const json& k0 = r["ranks"][0];
    const int64_t rest = k0["model_state_rest_bytes"];
    // Bytes moved per step (rank 0): 2Psi / 3Psi passes (ring), plus the scalars (the loss; the
    // global gradient norm in stages 1-3: float64 all-reduces, 2 x 8 (N-1)/N bytes each), plus at
    // stage 3 the tied embedding's extra gather.
    const int64_t f_comm = ring_bytes_per_step(stage, P, n, elem);
    const int64_t scalars = (stage == 0 ? 1 : 2) * 16 * (n - 1) / n;
    const int64_t extra = stage == 3 ? embed_padded(r["model"], n, cache) * elem * (n - 1) / n : 0;
    const int64_t moved = k0["bytes_per_step_total"];
    out.push_back({{"model", r["model"]}, {"precision", r.value("precision", "fp32")}, {"world_size", n}, {"stage", stage},
                   {"psi", psi}, {"psi_padded", P}, {"padding", pad}, {"rest_bytes", rest}, {"formula_padded_bytes", f_pad},
                   {"formula_psi_bytes", f_psi}, {"padding_share_bytes", pad_share}, {"all_ranks_equal_formula", all_equal},
                   {"on_formula", all_equal && rest - f_psi == pad_share}, {"moved_bytes", moved},
                   {"comm_formula_bytes", f_comm}, {"scalar_bytes", scalars}, {"embed_regather_bytes", extra},
                   {"comm_residual", moved - f_comm - scalars - extra},
                   {"rest_by_category", k0["rest_bytes"]}, {"peak_total_bytes", k0["peak_total_bytes"]},
                   {"step_ms_median", r["step_ms_median"]}});
  }
  return out;
}

void md_measured(std::vector<std::string>& md, const json& checks, const std::vector<json>& runs) {
  std::vector<std::string> models;
  for (const json& c : checks)
    if (std::find(models.begin(), models.end(), c["model"].get<std::string>()) == models.end()) models.push_back(c["model"]);
  int n = 0, on = 0, comm_ok = 0;
  for (const json& c : checks) ++n, on += c["on_formula"].get<bool>(), comm_ok += c["comm_residual"].get<int64_t>() == 0;
  const json& r0 = runs.front();
  md.push_back("## b) Measured on this machine: model states per rank against the formula");
  md.push_back("");
  md.push_back(fmt("Each point: one `bench_zero` run (`mpirun -np N`, stage S, %s, global batch %lld x T = %lld, %lld warmup "
                   "+ %lld timed steps); 'at rest' = params + grads + optim bytes the CPU allocator holds after a step, "
                   "on every rank. Formula (zero/engine.h, fp32, K = 8: the parameters are the master copy): stage 0 16Psi, "
                   "1 8Psi + 8Psi/N, 2 4Psi + 12Psi/N, 3 16Psi/N. **Padding**: every unit's flat buffer is padded to a "
                   "multiple of N x 16 elements (ParamSet::finalize, kShardAlignment), so the engine's Psi is the padded "
                   "count; 'padding share' = the formula applied to the padding elements, the only allowed gap between "
                   "'at rest' and the formula on the unpadded Psi.",
                   r0.value("precision", "fp32").c_str(), r0["global_batch"].get<long long>(), r0["seq"].get<long long>(),
                   r0["warmup"].get<long long>(), r0["steps"].get<long long>()));
  md.push_back("");
  md.push_back(fmt("**%d of %d measured points sit on the formula** (every rank's at-rest bytes = the formula on the padded "
                   "Psi, and at rest - formula(Psi) = the padding share exactly).", on, n));
  for (const std::string& m : models) {
    md.push_back("");
    md.push_back("### " + m);
    md.push_back("");
    md.push_back("| N | stage | Psi | padded Psi | at rest (MiB) | formula, padded Psi (MiB) | all ranks equal | "
                 "at rest - formula(Psi) (bytes) | padding share (bytes) | on the formula |");
    md.push_back("|---|---|---|---|---|---|---|---|---|---|");
    for (const json& c : checks) {
      if (c["model"] != m) continue;
      const int64_t rest = c["rest_bytes"], fpsi = c["formula_psi_bytes"];
      md.push_back(fmt("| %d | %d | %s | %s | %s | %s | %s | %s | %s | %s |", c["world_size"].get<int>(), c["stage"].get<int>(),
                       commas(c["psi"]).c_str(), commas(c["psi_padded"]).c_str(), mib(static_cast<double>(rest)).c_str(),
                       mib(c["formula_padded_bytes"].get<double>()).c_str(), yes(c["all_ranks_equal_formula"]),
                       commas(rest - fpsi).c_str(), commas(c["padding_share_bytes"]).c_str(), yes(c["on_formula"])));
    }
  }
  md.push_back("");
  md.push_back("## b) Measured: bytes moved per step per rank (ring convention)");
  md.push_back("");
  md.push_back("Formula: 2Psi (N-1)/N x 4 bytes for stages 0-2 (all-reduce = reduce-scatter + all-gather), 3Psi (N-1)/N x 4 "
               "bytes for stage 3 (gather in forward, gather in backward, reduce-scatter), Psi padded "
               "(`ring_bytes_per_step`). Known additions: the float64 scalars (the loss; the global gradient norm at stages "
               "1-3: 16 (N-1)/N bytes each) and, at stage 3, one more gather of GPT-2's tied embedding unit (the head "
               "reads wte: the unit is gathered for the embedding's forward, the head's forward and the whole backward). "
               "'residual' = measured - all of these: 0 means the point is on the formula.");
  md.push_back("");
  md.push_back(fmt("**%d of %d points have residual 0.**", comm_ok, n));
  md.push_back("");
  md.push_back("| model | N | stage | measured (bytes) | formula 2Psi / 3Psi | scalars | embedding re-gather | residual | "
               "measured / (4 Psi) |");
  md.push_back("|---|---|---|---|---|---|---|---|---|");
  for (const json& c : checks)
    md.push_back(fmt("| %s | %d | %d | %s | %s | %s | %s | %s | %.4f |", c["model"].get<std::string>().c_str(),
                     c["world_size"].get<int>(), c["stage"].get<int>(), commas(c["moved_bytes"]).c_str(),
                     commas(c["comm_formula_bytes"]).c_str(), commas(c["scalar_bytes"]).c_str(),
                     commas(c["embed_regather_bytes"]).c_str(), commas(c["comm_residual"]).c_str(),
                     c["moved_bytes"].get<double>() / (4.0 * c["psi_padded"].get<double>())));
}

// ---- b) measured: capacity under a cap --------------------------------------------------------

double device_bytes_per_param(const std::string& tier, int n) {  // fp32 model states on the device at rest
  if (tier == "stage0") return 16;
  if (tier == "stage1") return 8 + 8.0 / n;
  if (tier == "stage2") return 4 + 12.0 / n;
  if (tier == "stage3") return 16.0 / n;
  return 0;  // offload: the shards live in the host tier / the swap file
}

std::string failure_category(const json& best) {
  if (!best.contains("first_failure")) return "none up to the max depth";
  const std::string e = best["first_failure"].value("error", best["first_failure"].value("outcome", "?"));
  const std::string key = "for category '";
  const size_t at = e.find(key);
  if (at != std::string::npos) return e.substr(at + key.size(), e.find('\'', at + key.size()) - at - key.size());
  if (e.find("at rest after setup") != std::string::npos) return "model states at rest after setup";
  if (e == "oom") return "out of memory (no message kept: the job was aborted before the failing rank wrote it)";
  return e.substr(0, 80);
}

json capacity_rows(const std::vector<json>& cap) {
  json rows = json::array();
  for (const json& b : cap) {
    if (b.value("kind", "") != "best" || !b.contains("fit")) continue;
    const json& f = b["fit"];
    const std::string tier = b["tier"];
    const int n = b["world_size"];
    rows.push_back({{"tier", tier}, {"world_size", n}, {"layers", b["layers"]}, {"psi", f["psi"]},
                    {"cap_bytes", b["cap_bytes"]}, {"cap_from", b["cap_from"]}, {"step_ms_median", f["step_ms_median"]},
                    {"device_peak_bytes", f["train"]["device"]["peak_total"]}, {"device_peak", f["train"]["device"]["peak"]},
                    {"host_peak_bytes", f["train"]["host"]["peak_total"]}, {"nvme_bytes", f["train"]["nvme"]["current_total"]},
                    {"formula_device_bytes_per_param", device_bytes_per_param(tier, n)},
                    {"first_failure_layers", b.value("first_failure_layers", 0)}, {"limited_by", failure_category(b)}});
  }
  return rows;
}

void md_capacity(std::vector<std::string>& md, const json& rows) {
  if (rows.empty()) return;
  const json* s0 = nullptr;
  for (const json& r : rows)
    if (r["tier"] == "stage0" && !s0) s0 = &r;
  md.push_back("");
  md.push_back("## b) Measured: the largest model that trains under one device cap, per stage and offload tier");
  md.push_back("");
  md.push_back(fmt("`bench_capacity` (bench/capacity.cpp: doubling then bisection over n_layer of a GPT-2 family, n_embd 128, "
                   "4 heads, T = 64, B = 4 per rank, fp32 AdamW, activation checkpointing on; each trial its own process; "
                   "the cap = %s MiB on the device allocator from the end of the engine's setup, as `zt-train "
                   "--memory-limit-mib`; the host tier and the swap file uncapped). 'formula bytes/param' = the model "
                   "states the device holds at rest; 'ideal ratio' = 16 / that, the ratio to stage 0 if the model states "
                   "were all the memory (activations and buffers are the rest, so measured ratios sit below).",
                   mib(rows[0]["cap_bytes"].get<double>()).c_str()));
  md.push_back("");
  md.push_back("| tier | N | largest n_layer | Psi | ratio to stage 0 | formula bytes/param on the device | ideal ratio | "
               "ms/step | device peak (MiB) | host (MiB) | swap file (MiB) | next size stopped by |");
  md.push_back("|---|---|---|---|---|---|---|---|---|---|---|---|");
  for (const json& r : rows) {
    const double bpp = r["formula_device_bytes_per_param"];
    const double ratio = s0 ? r["psi"].get<double>() / (*s0)["psi"].get<double>() : 0;
    md.push_back(fmt("| %s | %d | %lld | %s | %.2fx | %s | %s | %.0f | %s | %s | %s | %s |", r["tier"].get<std::string>().c_str(),
                     r["world_size"].get<int>(), r["layers"].get<long long>(), commas(r["psi"]).c_str(), ratio,
                     bpp > 0 ? fmt("%.2f", bpp).c_str() : "0 (offloaded)", bpp > 0 ? fmt("%.2fx", 16 / bpp).c_str() : "unbounded",
                     r["step_ms_median"].get<double>(), mib(r["device_peak_bytes"].get<double>()).c_str(),
                     mib(r["host_peak_bytes"].get<double>()).c_str(), mib(r["nvme_bytes"].get<double>()).c_str(),
                     (r["limited_by"].get<std::string>() + fmt(" (L = %lld)", r["first_failure_layers"].get<long long>())).c_str()));
  }
}

// The shapes of the paper's Table 2 and of ZeRO-Infinity's "largest model on one node" chart,
// against the capacity rows measured here.
void md_shape(std::vector<std::string>& md, const json& rows) {
  if (rows.empty()) return;
  auto find = [&](const std::string& tier, int n) -> const json* {
    for (const json& r : rows)
      if (r["tier"] == tier && (n == 0 || r["world_size"].get<int>() == n)) return &r;
    return nullptr;
  };
  md.push_back("");
  md.push_back("## Shapes against the papers");
  md.push_back("");
  int n = 0;
  for (const json& r : rows)
    if (r["tier"] == "stage1") n = r["world_size"];
  const json* s0 = find("stage0", n);
  if (n > 0 && s0) {
    std::string ideal = "1", meas = "1";
    for (const char* t : {"stage1", "stage2", "stage3"}) {
      const json* r = find(t, n);
      if (!r) continue;
      ideal += fmt(" : %.2f", 16 / (*r)["formula_device_bytes_per_param"].get<double>());
      meas += fmt(" : %.2f", (*r)["psi"].get<double>() / (*s0)["psi"].get<double>());
    }
    md.push_back(fmt("- **ZeRO Table 2** (analytic, K = 12, Nd = 64): Baseline : P_os : P_os+g : P_os+g+p = 1 : 3.82 : 7.21 : 64 "
                     "(model states only, each stage a larger model). Here, N = %d ranks, fp32 (K = 8): the model-state-only "
                     "ratios are %s; measured largest models %s. The same order: each stage trains a larger model than the "
                     "one before; the measured ratios are compressed because the cap also holds what ZeRO-DP does not "
                     "partition (activations: one (B, T, C) checkpoint per block and one block's recomputed internals; "
                     "stage 3's gathered units and in-flight gradients), as the paper's measured P_os sizes sit under its "
                     "theoretical ones.", n, ideal.c_str(), meas.c_str()));
  }
  const json *g = find("stage0", 1), *c = find("stage3+cpu", 0), *v = find("stage3+nvme", 0);
  if (g && c && v) {
    md.push_back(fmt("- **ZeRO-Infinity's 'largest model on one node'** (Rajbhandari et al. 2021, arXiv:2104.07857; the SC21 "
                     "talk's chart 'Model Size on a Single DGX-2 Node': GPU only, CPU + GPU, NVMe + CPU + GPU, the last "
                     "reaching 1T parameters): the size grows with each memory tier added. Here "
                     "(one rank): device only (stage 0) %s -> stage 3 + cpu offload %s (%.1fx) -> stage 3 + nvme offload %s "
                     "(%.1fx). The same first jump; the nvme tier adds little over cpu here because the host tier (%s MiB "
                     "at the cpu tier's largest model) is far from this machine's RAM, so what bounds both tiers is the "
                     "device cap filled by the checkpointed activations (no `cpu_checkpointing`). ZeRO-Infinity's NVMe "
                     "step comes from a node whose CPU memory is the next limit.",
                     commas((*g)["psi"]).c_str(), commas((*c)["psi"]).c_str(), (*c)["psi"].get<double>() / (*g)["psi"].get<double>(),
                     commas((*v)["psi"]).c_str(), (*v)["psi"].get<double>() / (*g)["psi"].get<double>(),
                     mib((*c)["host_peak_bytes"].get<double>()).c_str()));
  }
  md.push_back("- Table 1 and Table 2 are mixed precision (2-byte parameters and gradients, K = 12); the measured runs are "
               "fp32 (4-byte parameters and gradients, K = 8: Adam's m and v, the parameters being the master), which is "
               "the same 16 bytes per parameter at stage 0 but 8Psi + 8Psi/N (not 4Psi + 12Psi/N) at stage 1 and "
               "4Psi + 12Psi/N (not 2Psi + 14Psi/N) at stage 2. bench/results/zero.md measures the bf16 formulas too.");
}

// ---- c) plot data -----------------------------------------------------------------------------

void write_plot_data(const std::string& dir, const json& checks, const json& cap) {
  fs::create_directories(dir);
  std::map<std::string, std::map<int, std::array<double, 4>>> rest;  // model -> N -> stage -> MiB
  std::map<std::string, int64_t> psi;
  std::map<std::string, std::map<int, std::array<double, 4>>> moved;  // model -> N -> stage -> bytes / 4Psi
  for (const json& c : checks) {
    const std::string m = c["model"];
    rest[m][c["world_size"].get<int>()][c["stage"].get<int>()] = c["rest_bytes"].get<double>() / (1 << 20);
    moved[m][c["world_size"].get<int>()][c["stage"].get<int>()] = c["moved_bytes"].get<double>() / (4.0 * c["psi_padded"].get<double>());
    psi[m] = c["psi"];
  }
  std::ofstream models(dir + "/models.txt");
  for (auto& [m, byN] : rest) {
    models << m << " " << psi[m] << "\n";
    std::ofstream f(dir + "/mem_" + m + ".dat"), g(dir + "/comm_" + m + ".dat"), h(dir + "/memf_" + m + ".dat");
    f << "# N  at-rest MiB: stage0 stage1 stage2 stage3 (rank 0)\n";
    g << "# N  bytes moved / (4 Psi_padded): stage0 stage1 stage2 stage3\n";
    for (auto& [n, v] : byN) {
      f << n << " " << v[0] << " " << v[1] << " " << v[2] << " " << v[3] << "\n";
      const auto& w = moved[m][n];
      g << n << " " << w[0] << " " << w[1] << " " << w[2] << " " << w[3] << "\n";
    }
    h << "# N  formula MiB on the unpadded Psi: stage0 stage1 stage2 stage3\n";
    for (double n = 1; n <= byN.rbegin()->first + 1e-9; n += 0.05) {
      const double p = static_cast<double>(psi[m]) / (1 << 20);
      h << n << " " << 16 * p << " " << (8 + 8 / n) * p << " " << (4 + 12 / n) * p << " " << 16 / n * p << "\n";
    }
  }
  std::ofstream c(dir + "/capacity.dat");
  c << "# index  label  Psi (millions)  ideal Psi from stage 0 x 16/bpp (millions; 0: none)\n";
  int i = 0;
  double s0 = 0;
  for (const json& r : cap)
    if (r["tier"] == "stage0" && s0 == 0) s0 = r["psi"].get<double>();
  for (const json& r : cap) {
    const double bpp = r["formula_device_bytes_per_param"];
    c << i++ << " \"" << r["tier"].get<std::string>() << " (N=" << r["world_size"].get<int>() << ")\" "
      << r["psi"].get<double>() / 1e6 << " " << (bpp > 0 ? s0 * 16 / bpp / 1e6 : 0) << "\n";
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_paper: the ZeRO paper's Tables 1-2 from the estimator, and the measured counterpart's report"};
  bool tables_only = false;
  std::string zero_jsonl, capacity_jsonl, from, out_json, md_path, plot_dir;
  std::vector<std::string> meta_kv;
  app.add_flag("--tables", tables_only, "print Tables 1 and 2 (ours vs the paper) and exit");
  app.add_option("--zero-jsonl", zero_jsonl, "bench_zero's JSON lines (one per run)");
  app.add_option("--capacity-jsonl", capacity_jsonl, "bench_capacity's JSON lines (trials and searches)");
  app.add_option("--from", from, "a previous --out-json: re-report its runs");
  app.add_option("--out-json", out_json, "write the tables, the raw runs and the checks here");
  app.add_option("--md", md_path, "write the markdown report here");
  app.add_option("--plot-dir", plot_dir, "write gnuplot data files here");
  app.add_option("--meta", meta_kv, "key=value lines for the report header (date, machine, command, elapsed_s, ...)");
  CLI11_PARSE(app, argc, argv);
  try {
    const json t1 = table1(), t2 = table2();
    if (tables_only) {
      std::printf("%s\n", paper_table1().c_str());
      std::printf("Table 2 (analytic), ours / paper:\n  MP  GPUs   Baseline        P_os            P_os+g          P_os+g+p\n");
      for (const json& r : t2) {
        std::printf("%4lld %5lld", r["mp"].get<long long>(), r["gpus"].get<long long>());
        for (const json& c : r["cells"])
          std::printf("   %-6s/ %-6s", c["ours"].get<std::string>().c_str(), c["paper"].get<std::string>().c_str());
        std::printf("\n");
      }
      return 0;
    }
    json meta = json::object();
    std::vector<json> runs, cap;
    if (!from.empty()) {
      std::ifstream f(from);
      if (!f) ZT_THROW("bench_paper: cannot read --from '", from, "'");
      const json prev = json::parse(f);
      meta = prev.at("meta");
      runs = prev.at("zero_runs").get<std::vector<json>>();
      cap = prev.at("capacity_runs").get<std::vector<json>>();
    } else {
      if (zero_jsonl.empty()) ZT_THROW("bench_paper: give --zero-jsonl (and --capacity-jsonl) or --from");
      runs = read_jsonl(zero_jsonl);
      if (!capacity_jsonl.empty()) cap = read_jsonl(capacity_jsonl);
    }
    for (const std::string& kv : meta_kv) {
      const size_t eq = kv.find('=');
      if (eq == std::string::npos) ZT_THROW("bench_paper: --meta '", kv, "': expected key=value");
      meta[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    if (runs.empty()) ZT_THROW("bench_paper: no bench_zero runs to report");
    const json checks = check_runs(runs), caprows = capacity_rows(cap);

    std::vector<std::string> md = {"# The ZeRO paper reproduced: Tables 1-2 from the estimator, and the measured small-scale counterpart", ""};
    for (const char* k : {"date", "machine", "command", "elapsed_s"})
      if (meta.contains(k)) md.push_back(fmt("- %s: %s", k, meta[k].get<std::string>().c_str()));
    md.push_back("- sources: Rajbhandari, Rasley, Ruwase, He, *ZeRO: Memory Optimizations Toward Training Trillion Parameter "
                 "Models*, arXiv:1910.02054, Tables 1 and 2 (printed values transcribed from the paper's text); "
                 "raw data: zero_paper.json (the tables, every bench_zero and bench_capacity record, the checks).");
    md.push_back("");
    md_tables(md, t1, t2);
    md.push_back("");
    md_measured(md, checks, runs);
    md_capacity(md, caprows);
    md_shape(md, caprows);
    md.push_back("");
    md.push_back("## c) Plots");
    md.push_back("");
    std::set<std::string> models;
    for (const json& c : checks) models.insert(c["model"].get<std::string>());
    for (const std::string& m : models)
      md.push_back(fmt("![model states per rank against N, %s](zero_paper_memory_%s.png)", m.c_str(), m.c_str()));
    md.push_back("![bytes moved per step per rank, by stage](zero_paper_comm.png)");
    if (!caprows.empty()) md.push_back("![largest trainable model per tier](zero_paper_capacity.png)");
    md.push_back("");
    if (!md_path.empty()) {
      std::ofstream f(md_path);
      for (const std::string& l : md) f << l << "\n";
    }
    if (!plot_dir.empty()) write_plot_data(plot_dir, checks, caprows);
    if (!out_json.empty()) {
      const json out = {{"meta", meta}, {"table1", t1}, {"table2", t2}, {"measured_checks", checks},
                        {"capacity", caprows}, {"zero_runs", runs}, {"capacity_runs", cap}};
      std::ofstream(out_json) << out.dump(1) << "\n";
    }
    for (const std::string& l : md) std::printf("%s\n", l.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_paper: %s\n", e.what());
    return 1;
  }
  return 0;
}
