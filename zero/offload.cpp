// defines: OffloadedAdamW (zero/offload.h): its sub-groups, buffers, swap-file IO and step.
#include "zero/offload.h"

#include <algorithm>

#include "core/backend.h"    // backend(cpu): the device optimizer's adamw_step, on the host
#include "zero/aio.h"        // defines: SwapFile, kAioAlignment
#include "zero/precision.h"  // defines: PrecisionPolicy::float32_gradient

namespace zt {

namespace {

int64_t round_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

Tensor range1(const Tensor& t, int64_t lo, int64_t n) { return t.flat_view(lo, {n}); }

}  // namespace

OffloadedAdamW::OffloadedAdamW(std::vector<OffloadedShard> units, const AdamWHyper& h, const OffloadConfig& where,
                               int64_t sub_group_size, DType grad_dtype, Allocator& host, SwapFile* swap)
    : units_(std::move(units)), h_(h), grad_dtype_(grad_dtype), host_(host), swap_(swap) {
  h_.validate();
  ZT_CHECK(sub_group_size >= 1, "sub_group_size = ", sub_group_size);
  ZT_CHECK(where.nvme() == (swap != nullptr), "offload_optimizer.device \"", offload_device_name(where.device),
           "\" with", swap ? "" : "out", " a swap file");
  int64_t max_bytes = 0;
  for (int i = 0; i < num_units(); ++i) {
    const OffloadedShard& u = units_[i];
    FlatShard fs;
    fs.name = u.name;
    fs.lo = u.lo;
    fs.hi = u.lo + u.n;
    fs.layout = u.layout;
    segments_.push_back(decay_segments(fs));
    grads_.push_back(Tensor::zeros({u.n}, grad_dtype_, Category::grads, host_));
    for (int64_t a = 0; a < u.n; a += sub_group_size) {
      Piece p;
      p.unit = i;
      p.a = a;
      p.len = std::min(sub_group_size, u.n - a);
      if (swap_) {
        p.bytes = round_up(3 * 4 * p.len, kAioAlignment);
        p.offset = swap_->reserve(p.bytes, Category::optim);
        max_bytes = std::max(max_bytes, p.bytes);
      }
      pieces_.push_back(p);
    }
    if (!swap_) {
      state_.push_back({Tensor::empty({u.n}, DType::f32, Category::optim, host_),
                        Tensor::zeros({u.n}, DType::f32, Category::optim, host_),
                        Tensor::zeros({u.n}, DType::f32, Category::optim, host_)});
    }
  }
  if (swap_) {
    // buffer_count sub-group buffers: one being updated, the next being read, the rest being
    // written back (config: nvme needs buffer_count >= 2).
    ZT_CHECK(where.buffer_count >= 2, "offload_optimizer.buffer_count = ", where.buffer_count, " with nvme");
    for (int64_t b = 0; b < where.buffer_count && b < num_sub_groups(); ++b)
      buffers_.push_back(Tensor::empty({max_bytes / 4}, DType::f32, Category::optim, host_));
    reads_.resize(buffers_.size());
    writes_.resize(buffers_.size());
  }
}

OffloadedAdamW::~OffloadedAdamW() {
  // IO in flight reads or writes our buffers: let it end before they go (errors are moot now).
  for (auto* list : {&reads_, &writes_})
    for (WorkPtr& w : *list) {
      if (!w) continue;
      try {
        w->wait();
      } catch (...) {
      }
    }
}

std::array<Tensor, 3> OffloadedAdamW::views(const Piece& p, int b) const {
  if (!swap_) {
    const auto& st = state_[p.unit];
    return {range1(st[0], p.a, p.len), range1(st[1], p.a, p.len), range1(st[2], p.a, p.len)};
  }
  const Tensor& buf = buffers_[b];
  return {range1(buf, 0, p.len), range1(buf, p.len, p.len), range1(buf, 2 * p.len, p.len)};
}

WorkPtr OffloadedAdamW::read(const Piece& p, int b) {
  if (writes_[b]) {  // the buffer's previous sub-group must be on disk before it is overwritten
    WorkPtr w = std::move(writes_[b]);
    w->wait();
  }
  return swap_->read_async(p.offset, buffers_[b].raw(), p.bytes);
}

WorkPtr OffloadedAdamW::write(const Piece& p, int b) { return swap_->write_async(p.offset, buffers_[b].raw(), p.bytes); }

void OffloadedAdamW::wait_all() {
  for (auto* list : {&reads_, &writes_})
    for (WorkPtr& w : *list) {
      if (!w) continue;
      WorkPtr x = std::move(w);
      x->wait();
    }
}

// Writes unit i's state from host or device tensors (undefined: zeros) to the swap file,
// sub-group by sub-group through buffer 0.
void OffloadedAdamW::put_unit(int i, const std::array<Tensor, 3>& src) {
  for (const Piece& p : pieces_) {
    if (p.unit != i) continue;
    if (writes_[0]) {
      WorkPtr w = std::move(writes_[0]);
      w->wait();
    }
    buffers_[0].zero_();  // zeros where src is undefined, and the region's padding
    std::array<Tensor, 3> v = views(p, 0);
    for (int j = 0; j < 3; ++j)
      if (src[j].defined()) v[j].copy_(range1(src[j], p.a, p.len));
    writes_[0] = write(p, 0);
  }
  wait_all();
}

void OffloadedAdamW::init(int i, const Tensor& master0) {
  ZT_CHECK(i >= 0 && i < num_units(), "init(", i, ")");
  check_shape(master0, {units_[i].n}, "offload init master");
  if (swap_) return put_unit(i, {master0, Tensor(), Tensor()});
  state_[i][0].copy_(master0);
}

// One sub-group's update: the float32 gradient (made as the device path makes it), then the
// fused AdamW over the sub-group's part of each decay segment.
void OffloadedAdamW::update(const Piece& p, const std::array<Tensor, 3>& mmv, double factor) {
  const Tensor g = PrecisionPolicy::float32_gradient(range1(grads_[p.unit], p.a, p.len), factor, host_);
  Backend& cpu = backend(host_.device());  // the host tier's: the cpu, or the meta device in a dry run
  for (const DecaySegment& seg : segments_[p.unit]) {
    const int64_t b = std::max(seg.begin, p.a), e = std::min(seg.end, p.a + p.len);
    if (b < e) adamw_apply(cpu, mmv[0], g, mmv[1], mmv[2], b - p.a, e - b, h_, step_, seg.decay);
  }
}

void OffloadedAdamW::step(double lr, double factor, const Publish& publish) {
  h_.lr = lr;
  h_.validate();
  ++step_;
  const size_t K = pieces_.size();
  const size_t B = std::max<size_t>(1, buffers_.size());
  if (swap_ && K > 0) reads_[0] = read(pieces_[0], 0);
  for (size_t k = 0; k < K; ++k) {
    const Piece& p = pieces_[k];
    const int b = static_cast<int>(k % B);
    if (swap_) {
      // Read-ahead: the next sub-group comes in while this one updates.
      if (k + 1 < K) reads_[(k + 1) % B] = read(pieces_[k + 1], static_cast<int>((k + 1) % B));
      WorkPtr r = std::move(reads_[b]);
      r->wait();
    }
    const std::array<Tensor, 3> mmv = views(p, b);
    update(p, mmv, factor);
    const bool last = k + 1 == K || pieces_[k + 1].unit != p.unit;
    publish(p.unit, p.a, mmv[0], last);
    if (swap_) writes_[b] = write(p, b);
  }
  if (swap_) wait_all();
}

void OffloadedAdamW::publish_all(const Publish& publish) {
  const size_t K = pieces_.size();
  for (size_t k = 0; k < K; ++k) {
    const Piece& p = pieces_[k];
    const bool last = k + 1 == K || pieces_[k + 1].unit != p.unit;
    if (!swap_) {
      publish(p.unit, p.a, views(p, 0)[0], last);
      continue;
    }
    WorkPtr r = read(p, 0);
    r->wait();
    publish(p.unit, p.a, views(p, 0)[0], last);
  }
}

std::vector<std::pair<std::string, Tensor>> OffloadedAdamW::state(int i) {
  ZT_CHECK(i >= 0 && i < num_units(), "state(", i, ")");
  static const char* kNames[3] = {"param", "exp_avg", "exp_avg_sq"};
  std::vector<std::pair<std::string, Tensor>> out;
  if (!swap_) {
    for (int j = 0; j < 3; ++j) out.push_back({kNames[j], state_[i][j]});
    return out;
  }
  const int64_t n = units_[i].n;
  for (int j = 0; j < 3; ++j) out.push_back({kNames[j], Tensor::empty({n}, DType::f32, Category::optim, host_)});
  for (const Piece& p : pieces_) {
    if (p.unit != i) continue;
    WorkPtr r = read(p, 0);
    r->wait();
    const std::array<Tensor, 3> v = views(p, 0);
    for (int j = 0; j < 3; ++j) range1(out[j].second, p.a, p.len).copy_(v[j]);
  }
  return out;
}

void OffloadedAdamW::store(int i, const std::vector<std::pair<std::string, Tensor>>& loaded) {
  if (!swap_) return;  // the host tier's state() gave views: the load wrote in place
  ZT_CHECK(loaded.size() == 3, "store: ", loaded.size(), " tensors for unit '", units_.at(i).name, "'");
  put_unit(i, {loaded[0].second, loaded[1].second, loaded[2].second});
}

}  // namespace zt
