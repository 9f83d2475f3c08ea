// defines: 6 Catch2 test cases tagged [paper]
//
// The ZeRO paper's Tables 1 and 2 (Rajbhandari et al. 2019, arXiv:1910.02054) from the model-state
// formulas (zero/paper_tables.h: the policies' own answers), cell by cell against the values the paper
// prints. The expected strings below are transcribed from the paper here, independently of
// zero/paper_tables.cpp's own copy (used only to display them beside ours).
#include <catch2/catch.hpp>
#include <cmath>
#include <string>

#include "zero/paper_tables.h"  // defines: paper_table1_cell, format_paper_gb, model_state_bytes_x_n

using namespace zt;

TEST_CASE("Table 1: every cell, rounded the paper's way, equals the printed value", "[paper]") {
  // Rows Nd = 1, 4, 16, 64, 256, 1024; columns 7.5B (P_os, P_os+g, P_os+g+p), 128B (...), 1T (...).
  const char* printed[6][9] = {
      {"120", "120", "120", "2048", "2048", "2048", "16000", "16000", "16000"},
      {"52.5", "41.3", "30", "896", "704", "512", "7000", "5500", "4000"},
      {"35.6", "21.6", "7.5", "608", "368", "128", "4750", "2875", "1000"},
      {"31.4", "16.6", "1.88", "536", "284", "32", "4187", "2218", "250"},
      {"30.4", "15.4", "0.47", "518", "263", "8", "4046", "2054", "62.5"},
      {"30.1", "15.1", "0.12", "513", "257", "2", "4011", "2013", "15.6"},
  };
  const int64_t psi[3] = {7500000000LL, 128000000000LL, 1000000000000LL};
  const int64_t nd[6] = {1, 4, 16, 64, 256, 1024};
  int cells = 0;
  for (int row = 0; row < 6; ++row)
    for (int m = 0; m < 3; ++m)
      for (int stage = 1; stage <= 3; ++stage) {
        INFO("Psi " << psi[m] << ", Nd " << nd[row] << ", stage " << stage);
        CHECK(paper_table1_cell(psi[m], stage, nd[row]) == printed[row][m * 3 + stage - 1]);
        ++cells;
      }
  CHECK(cells == 54);
  // The baseline (16Psi, no ZeRO) is the same at every Nd: the paper's Nd = 1 row.
  for (int m = 0; m < 3; ++m)
    for (int64_t n : nd) CHECK(paper_table1_cell(psi[m], 0, n) == printed[0][m * 3]);
  // The display copy in zero/paper_tables.cpp agrees with this transcription.
  for (int row = 0; row < 6; ++row)
    for (int m = 0; m < 3; ++m)
      for (int stage = 1; stage <= 3; ++stage)
        CHECK(paper_table1_printed(m, stage, row) == printed[row][m * 3 + stage - 1]);
}

TEST_CASE("Table 1: the model-state formulas behind the cells (section 5, K = 12)", "[paper]") {
  // 7.5B at Nd = 64 (the paper's Figure 1 example): 31.4 GB, 16.6 GB, 1.875 GB exactly.
  const int64_t psi = 7500000000LL, nd = 64;
  auto total_x_n = [&](int stage) {
    int64_t b = 0;
    for (Category c : {Category::params, Category::grads, Category::optim})
      b += model_state_bytes_x_n(c, psi, stage, nd, Precision::bf16);
    return b;
  };
  CHECK(total_x_n(0) == 16 * psi * nd);
  CHECK(total_x_n(1) == 4 * psi * nd + 12 * psi);  // 4Psi + 12Psi/Nd, times Nd
  CHECK(total_x_n(2) == 2 * psi * nd + 14 * psi);  // 2Psi + 14Psi/Nd
  CHECK(total_x_n(3) == 16 * psi);                 // 16Psi/Nd
  CHECK(total_x_n(1) == 2010000000000LL);  // 31.40625 GB x Nd: the paper's 31.4
}

TEST_CASE("Table 2: the analytic max model size on 32 GB V100s equals the printed value", "[paper]") {
  // MP, GPUs | Baseline, P_os, P_os+g, P_os+g+p (Max Theoretical Model Size).
  struct Row {
    int64_t mp, gpus;
    const char* cell[4];
  };
  const Row printed[5] = {
      {1, 64, {"2B", "7.6B", "14.4B", "128B"}},
      {2, 128, {"4B", "15.2B", "28.8B", "256B"}},
      {4, 256, {"8B", "30.4B", "57.6B", "0.5T"}},
      {8, 512, {"16B", "60.8B", "115.2B", "1T"}},
      {16, 1024, {"32B", "121.6B", "230.4B", "2T"}},
  };
  for (int r = 0; r < 5; ++r)
    for (int stage = 0; stage <= 3; ++stage) {
      INFO("MP " << printed[r].mp << ", GPUs " << printed[r].gpus << ", stage " << stage);
      CHECK(paper_table2_cell(stage, printed[r].mp, printed[r].gpus) == printed[r].cell[stage]);
      CHECK(paper_table2_printed(r, stage) == printed[r].cell[stage]);
    }
  // The exact values behind the MP = 1 row: 32e9 / 16, 32e9 x 64 / 268, 32e9 x 64 / 142, 32e9 x 64 / 16.
  CHECK(paper_table2_max_params(0, 1, 64) == Approx(2e9));
  CHECK(paper_table2_max_params(1, 1, 64) == Approx(32e9 * 64 / 268).epsilon(1e-12));
  CHECK(paper_table2_max_params(2, 1, 64) == Approx(32e9 * 64 / 142).epsilon(1e-12));
  CHECK(paper_table2_max_params(3, 1, 64) == Approx(128e9));
  // MP scales the model linearly at a fixed Nd: the exact P_os value at MP 2 is 15.28B; the paper
  // prints 2 x 7.6B = 15.2B (the MP = 1 value rounded first).
  CHECK(paper_table2_max_params(1, 2, 128) == Approx(2 * 32e9 * 64 / 268).epsilon(1e-12));
  CHECK(std::round(paper_table2_max_params(1, 2, 128) / 1e8) == 153);
}

TEST_CASE("Table 2 formatting and the ring bytes per step", "[paper]") {
  CHECK(format_params(20) == "2B");
  CHECK(format_params(76) == "7.6B");
  CHECK(format_params(1152) == "115.2B");
  CHECK(format_params(2560) == "256B");
  CHECK(format_params(5120) == "0.5T");
  CHECK(format_params(10240) == "1T");
  CHECK(format_params(20480) == "2T");
  // A different device size changes the answer (the function reads its argument): 16 GB halves it.
  CHECK(paper_table2_cell(3, 1, 64, 16000000000LL) == "64B");
  CHECK(paper_table2_cell(0, 1, 64, 16000000000LL) == "1B");
  // Ring convention: stages 0-2 move 2Psi(N-1)/N elements per rank, stage 3 3Psi(N-1)/N.
  CHECK(ring_bytes_per_step(0, 1024, 4, 4) == 2 * 1024 * 3 / 4 * 4);
  CHECK(ring_bytes_per_step(2, 1024, 4, 2) == 2 * 1024 * 3 / 4 * 2);
  CHECK(ring_bytes_per_step(3, 1024, 8, 4) == 3 * 1024 * 7 / 8 * 4);
  CHECK(ring_bytes_per_step(3, 1024, 1, 4) == 0);
}

TEST_CASE("format_paper_gb rounds as the paper does", "[paper]") {
  CHECK(format_paper_gb(4125, 100) == "41.3");  // a tie rounds up (printf's half-even gives 41.2)
  CHECK(format_paper_gb(3035, 100) == "30.4");  // below 100: rounded, not truncated
  CHECK(format_paper_gb(5135, 10) == "513");    // from 100 on: truncated
  CHECK(format_paper_gb(25775, 100) == "257");
  CHECK(format_paper_gb(1875, 1000) == "1.88");
  CHECK(format_paper_gb(46875, 100000) == "0.47");
  CHECK(format_paper_gb(30, 1) == "30");  // trailing zeros dropped
  CHECK(format_paper_gb(75, 10) == "7.5");
  CHECK(format_paper_gb(0, 1) == "0");
}

TEST_CASE("parse_count reads counts with suffixes", "[paper]") {
  CHECK(parse_count("7.5B", "--params") == 7500000000LL);
  CHECK(parse_count("124M", "--params") == 124000000);
  CHECK(parse_count("1T", "--params") == 1000000000000LL);
  CHECK(parse_count("350k", "--params") == 350000);
  CHECK(parse_count("123456", "--params") == 123456);
  CHECK_THROWS_WITH(parse_count("7.5X", "--params"), Catch::Contains("--params") && Catch::Contains("\"X\""));
  CHECK_THROWS_WITH(parse_count("abc", "--params"), Catch::Contains("--params = \"abc\""));
  CHECK_THROWS_WITH(parse_count("0", "--params"), Catch::Contains("between 1"));
}

// cpu_checkpointing (zero/activation_offload.h): the host tier holds every block's checkpoint,
// n_layer x (B, T, C) float32, and the device's activation peak falls to two checkpoints' worth.
// Measured through a real training step against the estimate.
