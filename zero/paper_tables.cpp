// defines: model_state_bytes_x_n, format_paper_gb, paper_table1_cell, paper_table1, parse_count, the ZeRO
//          paper's Table 1 and Table 2 as printed, and the formulas behind them (zero/paper_tables.h).
#include "zero/paper_tables.h"

#include <cmath>
#include <cstdio>
#include <sstream>

#include "core/check.h"
#include "core/memory.h"
#include "zero/footprint.h"  // defines: Footprint, model_state
#include "zero/stage.h"      // defines: stage_keeps

namespace zt {

namespace {

// Model-state bytes of one parameter times nd, mixed precision (K = 12): the policies' answer.
int64_t bytes_x_nd_per_param(int stage, int64_t nd) {
  int64_t b = 0;
  for (Category c : {Category::params, Category::grads, Category::optim})
    b += model_state_bytes_x_n(c, 1, stage, nd, Precision::bf16);
  return b;
}

std::string tenths_text(int64_t tenths) {
  const std::string s = std::to_string(tenths / 10);
  return tenths % 10 ? s + "." + std::to_string(tenths % 10) : s;
}

}  // namespace

std::string paper_table1_printed(int model, int stage, int row) {
  ZT_CHECK(model >= 0 && model < 3 && stage >= 0 && stage <= 3 && row >= 0 && row < 6,
           "paper_table1_printed: model ", model, ", stage ", stage, ", row ", row);
  // arXiv:1910.02054 Table 1, rows Nd = 1, 4, 16, 64, 256, 1024; per model P_os, P_os+g, P_os+g+p.
  static const char* const t[6][9] = {
      {"120", "120", "120", "2048", "2048", "2048", "16000", "16000", "16000"},
      {"52.5", "41.3", "30", "896", "704", "512", "7000", "5500", "4000"},
      {"35.6", "21.6", "7.5", "608", "368", "128", "4750", "2875", "1000"},
      {"31.4", "16.6", "1.88", "536", "284", "32", "4187", "2218", "250"},
      {"30.4", "15.4", "0.47", "518", "263", "8", "4046", "2054", "62.5"},
      {"30.1", "15.1", "0.12", "513", "257", "2", "4011", "2013", "15.6"},
  };
  if (stage == 0) return t[0][model * 3];
  return t[row][model * 3 + stage - 1];
}

double paper_table2_max_params(int stage, int64_t mp, int64_t gpus, int64_t device_bytes) {
  ZT_CHECK(stage >= 0 && stage <= 3 && mp >= 1 && gpus >= mp && gpus % mp == 0 && device_bytes > 0,
           "paper_table2_max_params: stage ", stage, ", mp ", mp, ", gpus ", gpus);
  const int64_t nd = gpus / mp;
  return static_cast<double>(mp) * static_cast<double>(device_bytes) * static_cast<double>(nd) /
         static_cast<double>(bytes_x_nd_per_param(stage, nd));
}

std::string paper_table2_cell(int stage, int64_t mp, int64_t gpus, int64_t device_bytes) {
  ZT_CHECK(stage >= 0 && stage <= 3 && mp >= 1 && gpus >= mp && gpus % mp == 0 && device_bytes > 0,
           "paper_table2_cell: stage ", stage, ", mp ", mp, ", gpus ", gpus);
  const int64_t nd = gpus / mp;
  // The mp = 1 value in tenths of a billion, rounded half up (exact integers: no float ties).
  const int64_t num = device_bytes * nd, den = bytes_x_nd_per_param(stage, nd) * 100000000LL;
  const int64_t tenths = (2 * num + den) / (2 * den);
  return format_params(mp * tenths);
}

std::string format_params(int64_t tenths) {
  ZT_CHECK(tenths >= 0, "format_params: ", tenths);
  if (tenths >= 5000) return tenths_text((tenths + 500) / 1000) + "T";  // tenths of a trillion
  return tenths_text(tenths) + "B";
}

std::string paper_table2_printed(int row, int col) {
  ZT_CHECK(row >= 0 && row < 5 && col >= 0 && col < 6, "paper_table2_printed: row ", row, ", col ", col);
  // arXiv:1910.02054 Table 2: MP, GPUs | Max Theoretical Model Size: Baseline, P_os, P_os+g,
  // P_os+g+p | Measured Model Size: Baseline, ZeRO-DP (P_os).
  static const char* const t[5][6] = {
      {"2B", "7.6B", "14.4B", "128B", "1.3B", "6.2B"},
      {"4B", "15.2B", "28.8B", "256B", "2.5B", "12.5B"},
      {"8B", "30.4B", "57.6B", "0.5T", "5B", "25B"},
      {"16B", "60.8B", "115.2B", "1T", "10B", "50B"},
      {"32B", "121.6B", "230.4B", "2T", "20B", "100B"},
  };
  return t[row][col];
}

int64_t ring_bytes_per_step(int stage, int64_t psi, int64_t world_size, int64_t elem) {
  ZT_CHECK(stage >= 0 && stage <= 3 && psi >= 0 && world_size >= 1 && elem > 0,
           "ring_bytes_per_step: stage ", stage, ", psi ", psi, ", N ", world_size);
  const int64_t passes = stage == 3 ? 3 : 2;
  return passes * (psi / world_size) * (world_size - 1) * elem + passes * (psi % world_size) * (world_size - 1) * elem / world_size;
}

int64_t model_state_bytes_x_n(Category c, int64_t psi, int stage, int64_t N, Precision p) {
  return model_state(psi, N, stage_keeps(stage), p, ZeroOptimization{}, OptimizerConfig{})
      .at_x_n(MemoryTier::device, c);
}

std::string format_paper_gb(int64_t num, int64_t den) {
  ZT_CHECK(num >= 0 && den > 0, "format_paper_gb: ", num, " / ", den);
  if (num >= 100 * den) return std::to_string(num / den);  // the paper truncates: 513.5 -> 513
  const int d = num >= 10 * den ? 1 : 2;
  const int64_t scale = d == 1 ? 10 : 100;
  const int64_t q = (2 * num * scale + den) / (2 * den);  // round half up at d decimals
  std::string s = std::to_string(q / scale);
  std::string frac = std::to_string(q % scale);
  frac.insert(0, static_cast<size_t>(d) - frac.size(), '0');
  while (!frac.empty() && frac.back() == '0') frac.pop_back();
  return frac.empty() ? s : s + "." + frac;
}

std::string paper_table1_cell(int64_t psi, int stage, int64_t nd) {
  ZT_CHECK(stage >= 0 && stage <= 3 && nd >= 1, "paper_table1_cell: stage ", stage, ", nd ", nd);
  int64_t bytes_x_n = 0;  // mixed precision, K = 12: exact, in bytes times nd
  for (Category c : {Category::params, Category::grads, Category::optim})
    bytes_x_n += model_state_bytes_x_n(c, psi, stage, nd, Precision::bf16);
  return format_paper_gb(bytes_x_n, nd * 1000000000LL);
}

std::string paper_table1() {
  const int64_t psis[3] = {7500000000LL, 128000000000LL, 1000000000000LL};
  const char* names[3] = {"7.5B", "128B", "1T"};
  const int64_t nds[6] = {1, 4, 16, 64, 256, 1024};
  std::ostringstream o;
  o << "Table 1 of Rajbhandari et al. 2019 (ZeRO, arXiv:1910.02054): per-device memory of model states\n"
       "in GB (1e9 bytes), mixed-precision Adam (K = 12), as a function of the DP degree, from the formulas\n"
       "  P_os 4Psi + 12Psi/Nd    P_os+g 2Psi + 14Psi/Nd    P_os+g+p 16Psi/Nd\n"
       "printed with the paper's rounding (below 10: 2 decimals, below 100: 1 decimal, else the integer part).\n"
       "Baseline DP (no ZeRO) needs 16Psi at every Nd: 120, 2048 and 16000 GB.\n\n";
  char buf[64];
  o << "      ";
  for (const char* n : names) {
    std::snprintf(buf, sizeof buf, "| %-27s", (std::string(n) + " Model (GB)").c_str());
    o << buf;
  }
  o << "\n  DP  ";
  for (int m = 0; m < 3; ++m) o << "| P_os     P_os+g   P_os+g+p ";
  o << "\n";
  for (int64_t nd : nds) {
    std::snprintf(buf, sizeof buf, "%4lld  ", static_cast<long long>(nd));
    o << buf;
    for (int m = 0; m < 3; ++m) {
      o << "| ";
      for (int stage = 1; stage <= 3; ++stage) {
        std::snprintf(buf, sizeof buf, "%-9s", paper_table1_cell(psis[m], stage, nd).c_str());
        o << buf;
      }
    }
    o << "\n";
  }
  return o.str();
}

int64_t parse_count(const std::string& s, const char* what) {
  size_t end = 0;
  double v = 0;
  try {
    v = std::stod(s, &end);
  } catch (const std::exception&) {
    ZT_THROW(what, " = \"", s, "\": expected a count such as 124000000, 124M, 7.5B or 1T");
  }
  std::string suffix = s.substr(end);
  double mul = 1;
  if (suffix == "k" || suffix == "K") mul = 1e3;
  else if (suffix == "M" || suffix == "m") mul = 1e6;
  else if (suffix == "B" || suffix == "b" || suffix == "G" || suffix == "g") mul = 1e9;
  else if (suffix == "T" || suffix == "t") mul = 1e12;
  else if (!suffix.empty()) ZT_THROW(what, " = \"", s, "\": unknown suffix \"", suffix, "\" (expected k, M, B or T)");
  const double n = std::round(v * mul);
  if (!(n >= 1) || n > 9e15) ZT_THROW(what, " = \"", s, "\": expected a count between 1 and 9e15");
  return static_cast<int64_t>(n);
}

}  // namespace zt
