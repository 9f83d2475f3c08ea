// defines: the ZeRO paper's Table 1 and Table 2 as printed, and the formulas behind them (zero/paper_tables.h).
#include "zero/paper_tables.h"

#include "core/check.h"
#include "core/memory.h"
#include "zero/estimator.h"

namespace zt {

namespace {

// Model-state bytes of one parameter times nd, mixed precision (K = 12): the estimator's formula.
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

}  // namespace zt
