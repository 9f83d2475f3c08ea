// defines: InitRule — how one parameter of a bundled model is initialized (the recipe GPT2 and
//          Llama each give by name; models/init.h draws it).
#pragma once
#include <cstdint>

namespace zt {

struct InitRule {
  enum Kind { normal, constant } kind = normal;
  double value = 0;   // normal: the standard deviation (mean 0); constant: the value (0 or 1)
  int64_t rows = -1;  // normal: only the first `rows` rows are drawn, the rest are zero (the
                      // padded vocabulary rows, which no token reads); -1: every row
};

}  // namespace zt
