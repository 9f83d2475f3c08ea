// defines: checked_mul, checked_add, checked_bytes — int64 size arithmetic that throws instead of
//          wrapping.
//
// Every size that comes from outside (a file header, a config, a command line) is multiplied and
// added through these before it is compared with the file's real size or handed to an allocator:
// a product that wraps 64 bits must be an error naming what was computed, never a small number
// that passes a check, nor (signed overflow) undefined behaviour. `what` names the quantity for
// the message ("tensor 'wte' numel", "checkpoint header: parameter bytes").
#pragma once
#include <cstdint>

#include "core/check.h"

namespace zt {

inline int64_t checked_mul(int64_t a, int64_t b, const char* what) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) ZT_THROW(what, ": ", a, " x ", b, " overflows a 64-bit size");
  return r;
}

inline int64_t checked_add(int64_t a, int64_t b, const char* what) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) ZT_THROW(what, ": ", a, " + ", b, " overflows a 64-bit size");
  return r;
}

// n elements of `elem_bytes` each, n >= 0: the byte count, checked.
inline int64_t checked_bytes(int64_t n, int64_t elem_bytes, const char* what) {
  if (n < 0) ZT_THROW(what, ": negative element count ", n);
  return checked_mul(n, elem_bytes, what);
}

}  // namespace zt
