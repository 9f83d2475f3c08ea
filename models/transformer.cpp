// defines: check_token_batch (models/transformer.h)
#include "models/transformer.h"

namespace zt {

void check_token_batch(const Tensor& idx, int64_t vocab_size, int64_t max_seq_len, const char* what) {
  if (!idx.defined()) ZT_THROW(what, ": token ids are undefined");
  if (idx.dtype() != DType::i32) ZT_THROW(what, ": token ids must be int32, got ", dtype_name(idx.dtype()));
  if (idx.dim() != 2) ZT_THROW(what, ": token ids must have shape (B, T), got ", shape_str(idx.shape()));
  if (idx.size(1) < 1 || idx.size(1) > max_seq_len)
    ZT_THROW(what, ": sequence length T = ", idx.size(1), " must be in [1, max_seq_len = ", max_seq_len, "]");
  const Tensor c = idx.to(Device::cpu(), Category::workspace);  // ids may be on a device
  const int32_t* p = c.data<int32_t>();
  for (int64_t i = 0; i < c.numel(); ++i)
    if (p[i] < 0 || p[i] >= vocab_size)
      ZT_THROW(what, ": token id ", p[i], " at flat index ", i, " is outside the vocabulary [0, ", vocab_size, ")");
}

}  // namespace zt
