// defines: model_state_bytes_x_n, format_paper_gb, paper_table1_cell, paper_table1, parse_count, kPaperTable1Psi, kPaperTable1Nd, paper_table1_printed, kPaperTable2Mp, kPaperTable2Gpus,
//          paper_table2_max_params, paper_table2_cell, paper_table2_printed, format_params,
//          ring_bytes_per_step — the ZeRO paper's Tables 1 and 2 computed from the model-state
//          formulas (the policies' own answers, zero/footprint.h), beside the values the paper prints.
//
// Rajbhandari, Rasley, Ruwase, He 2019, "ZeRO: Memory Optimizations Toward Training Trillion
// Parameter Models", arXiv:1910.02054.
//
// Table 1: per-device memory of the model states in GB (1e9 bytes), mixed-precision Adam
// (K = 12), Psi = 7.5B / 128B / 1T, DP degree Nd = 1, 4, 16, 64, 256, 1024, columns P_os
// (4Psi + 12Psi/Nd), P_os+g (2Psi + 14Psi/Nd), P_os+g+p (16Psi/Nd). The baseline (16Psi) is not
// a column of the paper's table: it equals the Nd = 1 row. Computed by paper_table1_cell,
// rounded the paper's way (format_paper_gb).
//
// Table 2 (left half, "Max Theoretical Model Size"): the largest Psi whose model states fit a
// 32 GB V100 with model parallelism MP and GPUs = MP x Nd (Nd = 64 in every row):
//   Psi_max = MP x 32e9 x Nd / bytes_x_Nd(1 parameter)   (Baseline: 16 bytes; P_os: 4 + 12/Nd; ...)
// The paper prints MP x (the MP = 1 value rounded to 0.1B): 7.6B, 15.2B, 30.4B, 60.8B, 121.6B —
// the exact 15.28B would print 15.3B — and from 500B on in T to one decimal (512B -> 0.5T,
// 1024B -> 1T). paper_table2_cell reproduces that rule; paper_table2_max_params gives the exact
// value. (The right half, "Measured Model Size", is measured on V100s: paper_table2_printed
// holds it for display, nothing here computes it.)
#pragma once
#include <array>
#include <cstdint>
#include <string>

#include "core/memory.h"         // defines: Category
#include "zero/engine_config.h"  // defines: Precision

namespace zt {

inline constexpr std::array<int64_t, 3> kPaperTable1Psi = {7500000000LL, 128000000000LL, 1000000000000LL};
inline constexpr std::array<int64_t, 6> kPaperTable1Nd = {1, 4, 16, 64, 256, 1024};

// The paper's printed Table 1 cell (transcribed, for display beside ours): model 0-2 (7.5B,
// 128B, 1T), stage 1-3 (P_os, P_os+g, P_os+g+p), row 0-5 (Nd 1 ... 1024). Stage 0 (the baseline,
// no column of its own in the paper) returns the Nd = 1 cell of the model.
std::string paper_table1_printed(int model, int stage, int row);

inline constexpr std::array<int64_t, 5> kPaperTable2Mp = {1, 2, 4, 8, 16};
inline constexpr std::array<int64_t, 5> kPaperTable2Gpus = {64, 128, 256, 512, 1024};

// The largest Psi whose mixed-precision model states (K = 12) fit device_bytes per device, at
// stage 0 (the baseline: 16 bytes per parameter, whatever Nd) to 3, with mp-way model
// parallelism and gpus / mp data-parallel ranks. Exact (a real number of parameters).
double paper_table2_max_params(int stage, int64_t mp, int64_t gpus, int64_t device_bytes = 32000000000LL);

// The cell as the paper prints it: mp x (the mp = 1 value at the same Nd, rounded half up to
// 0.1B), written by format_params.
std::string paper_table2_cell(int stage, int64_t mp, int64_t gpus, int64_t device_bytes = 32000000000LL);

// tenths: a count in units of 1e8 parameters. Below 500B: "7.6B", "128B" (one decimal, a
// trailing .0 dropped); from 500B on: in T to one decimal, rounded half up ("0.5T", "1T", "2T").
std::string format_params(int64_t tenths);

// The paper's printed Table 2 (transcribed, for display): row 0-4 (MP 1 ... 16), column 0-5:
// Baseline, P_os, P_os+g, P_os+g+p (theoretical), Baseline, ZeRO-DP (P_os) (measured).
std::string paper_table2_printed(int row, int col);

// Bytes one rank sends per step by the ring convention (dist/process_group.h): a reduce-scatter
// or an all-gather of P elements moves P (N-1)/N elements, an all-reduce 2P (N-1)/N. Stages 0-2:
// 2 passes over Psi (the paper's 2Psi, section 7.2); stage 3: 3 passes (3Psi, section 7.2.2).
// elem: bytes per element. Exact when N divides psi (padded flat buffers: it does).
int64_t ring_bytes_per_step(int stage, int64_t psi, int64_t world_size, int64_t elem);

// Model states per rank (Rajbhandari et al. 2019, arXiv:1910.02054, section 5, Figure 1), Psi
// parameters on N ranks:
//
//                 params          grads            optim                 total
//   fp32 (K = 8, no master copy: the parameters are the master; m and v are 8 bytes)
//     stage 0     4Psi            4Psi             8Psi                  16Psi
//     stage 1     4Psi            4Psi             8Psi/N                8Psi + 8Psi/N
//     stage 2     4Psi            4Psi/N           8Psi/N                4Psi + 12Psi/N
//     stage 3     4Psi/N          4Psi/N           8Psi/N                16Psi/N
//   bf16 / fp16 (the paper's mixed precision: K = 12, fp32 master + m + v)
//     stage 0     2Psi            2Psi             12Psi                 16Psi
//     stage 1     2Psi            2Psi             12Psi/N               4Psi + 12Psi/N
//     stage 2     2Psi            2Psi/N           12Psi/N               2Psi + 14Psi/N
//     stage 3     2Psi/N          2Psi/N           12Psi/N               16Psi/N
//
// The table is not written out in code: it is the policies' own answers (zero/footprint.h's
// model_state) for one unit of Psi elements, and tests/test_paper_tables.cpp checks them against
// the paper's printed Table 1. A model's run has the same per unit, on the padded flat sizes.
// The model-state bytes of `c` (params, grads or optim) times N, exactly (an integer even where
// Psi/N is not): the policies' own answer for one unit of psi
// elements (zero/footprint.h), the paper's Figure 1 (table above).
int64_t model_state_bytes_x_n(Category c, int64_t psi, int stage, int64_t world_size, Precision p);

// num / den gigabytes (1e9 bytes) printed the way the ZeRO paper's Table 1 prints them:
// below 10 two decimals, below 100 one decimal, both rounded half up; from 100 on the integer
// part (truncated); trailing zeros dropped. (Derived from the 54 printed cells: docs/estimator.md.)
std::string format_paper_gb(int64_t num, int64_t den);
// One cell of Table 1: Psi parameters, mixed precision (K = 12), stage 1-3 (P_os, P_os+g,
// P_os+g+p), DP degree nd.
std::string paper_table1_cell(int64_t psi, int stage, int64_t nd);
// The whole of Table 1 as text (zt-estimate --paper).
std::string paper_table1();

// "7.5B", "124M", "350k", "1T", "1e9", "123456" -> a count (k/K 1e3, M 1e6, B/G 1e9, T 1e12).
// Throws zt::Error naming `what` for anything else, zero or negative.
int64_t parse_count(const std::string& s, const char* what);

}  // namespace zt
