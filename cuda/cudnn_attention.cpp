// defines: CudnnAttention (runtime_version, version_string, constructor, destructor, handle and 4 more),
//          CudnnAttnShape (str) (cuda/cudnn_attention.h); file-local: cudnn_message, Desc, make_desc,
//          set_attr, finalize, set_graph_handle and 11 more
//
// CudnnAttention: see cudnn_attention.h for the graphs, the statistics, determinism and limits.
#include "cuda/cudnn_attention.h"

#include <cudnn.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/check.h"
#include "cuda/check.h"
#include "cuda/device.h"  // DeviceGuard

namespace zt {

namespace {

// "CUDNN_STATUS_NOT_SUPPORTED (code 3000): <cuDNN's last error message>"
std::string cudnn_message(cudnnStatus_t st) {
  char last[512] = {0};
  cudnnGetLastErrorString(last, sizeof(last));
  const char* name = cudnnGetErrorString(st);
  return detail::concat(name ? name : "unknown cudnnStatus_t", " (code ", static_cast<int>(st), ")",
                        last[0] ? ": " : "", last);
}

#define ZT_CUDNN_CHECK(call, what)                                                                    \
  do {                                                                                                \
    const cudnnStatus_t zt_dnn_st_ = (call);                                                          \
    if (zt_dnn_st_ != CUDNN_STATUS_SUCCESS)                                                           \
      ZT_THROW(what, ": ", #call, " failed: ", cudnn_message(zt_dnn_st_), " at ", __FILE__, ":", __LINE__); \
  } while (0)

// One backend descriptor (RAII). Descriptors are host objects; creating or destroying one queues
// no device work.
struct Desc {
  cudnnBackendDescriptor_t d = nullptr;
  explicit Desc(cudnnBackendDescriptorType_t type) {
    ZT_CUDNN_CHECK(cudnnBackendCreateDescriptor(type, &d), "CudnnAttention");
  }
  ~Desc() {
    if (d) (void)cudnnBackendDestroyDescriptor(d);
  }
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;
};
using DescPtr = std::shared_ptr<Desc>;
DescPtr make_desc(cudnnBackendDescriptorType_t type) { return std::make_shared<Desc>(type); }

void set_attr(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type,
              int64_t count, const void* values, const char* attr_text) {
  const cudnnStatus_t st = cudnnBackendSetAttribute(d, name, type, count, values);
  if (st != CUDNN_STATUS_SUCCESS) ZT_THROW("cudnnBackendSetAttribute(", attr_text, ") failed: ", cudnn_message(st));
}
#define SET_ATTR(desc, name, type, count, values) set_attr((desc), (name), (type), (count), (values), #name)

void finalize(cudnnBackendDescriptor_t d, const char* what) {
  const cudnnStatus_t st = cudnnBackendFinalize(d);
  if (st != CUDNN_STATUS_SUCCESS) ZT_THROW("cudnnBackendFinalize(", what, ") failed: ", cudnn_message(st));
}

// The handle attributes of the operation graph and of the execution plan are marked deprecated in
// cuDNN 9.x headers (in favour of a DEVICEPROP descriptor, cuDNN >= 9.8) but remain the way a
// plan is tied to a handle for cudnnBackendExecute; set them here, the warning silenced once.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
void set_graph_handle(cudnnBackendDescriptor_t graph, cudnnHandle_t h) {
  SET_ATTR(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
}
void set_plan_handle(cudnnBackendDescriptor_t plan, cudnnHandle_t h) {
  SET_ATTR(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
}
#pragma GCC diagnostic pop

// Fixed tensor UIDs (the variant pack's keys). Virtual tensors get UIDs from kFirstVirtual up.
enum Uid : int64_t {
  kQ = 1, kK = 2, kV = 3, kO = 4, kStats = 5, kScale = 6, kLowest = 7, kOne = 8,
  kDO = 9, kDQ = 10, kDK = 11, kDV = 12, kSoftmaxSum = 13,
  kFirstVirtual = 100,
};

using Dims = std::vector<int64_t>;

}  // namespace

// A finalized execution plan and everything it was built from (kept alive with it).
struct CudnnAttention::Plan {
  std::vector<DescPtr> keep;  // tensors, op descriptors, operations, graph, engine config
  DescPtr plan;
  int64_t workspace = 0;      // CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, bytes
  int64_t engine_index = -1;  // CUDNN_ATTR_ENGINE_GLOBAL_INDEX of the chosen engine
};

struct CudnnAttention::Entry {
  bool ok = false;
  std::string why;  // when !ok
  std::unique_ptr<Plan> fwd, bwd;
};

namespace {

// Builds one operation graph on the backend API and finalizes it into a Plan.
class GraphBuilder {
 public:
  explicit GraphBuilder(cudnnHandle_t h) : h_(h) {}

  DescPtr tensor(int64_t uid, cudnnDataType_t t, const Dims& dims, const Dims& strides, bool is_virtual,
                 bool by_value = false) {
    ZT_CHECK(dims.size() == strides.size(), "GraphBuilder::tensor: dims and strides differ in rank");
    DescPtr d = make_desc(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    const int64_t n = static_cast<int64_t>(dims.size()), align = 16;
    SET_ATTR(d->d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &t);
    SET_ATTR(d->d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, n, dims.data());
    SET_ATTR(d->d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, n, strides.data());
    SET_ATTR(d->d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
    SET_ATTR(d->d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
    const bool v = is_virtual, bv = by_value;
    SET_ATTR(d->d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &v);
    if (by_value) SET_ATTR(d->d, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &bv);
    finalize(d->d, "tensor");
    keep_.push_back(d);
    return d;
  }
  DescPtr virt(cudnnDataType_t t, const Dims& dims, const Dims& strides) {
    return tensor(next_virtual_++, t, dims, strides, true);
  }
  DescPtr scalar(int64_t uid) { return tensor(uid, CUDNN_DATA_FLOAT, {1, 1, 1, 1}, {1, 1, 1, 1}, false, true); }

  // y = mode(x [, b] [, t]); `prec` is the math precision; axis for GEN_INDEX.
  void pointwise(cudnnPointwiseMode_t mode, cudnnDataType_t prec, const DescPtr& x, const DescPtr& b,
                 const DescPtr& y, const DescPtr& t = nullptr, int64_t axis = -1) {
    DescPtr pw = make_desc(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    SET_ATTR(pw->d, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
    SET_ATTR(pw->d, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec);
    if (axis >= 0) SET_ATTR(pw->d, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis);
    finalize(pw->d, "pointwise descriptor");
    DescPtr op = make_desc(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    SET_ATTR(op->d, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw->d);
    SET_ATTR(op->d, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x->d);
    if (b) SET_ATTR(op->d, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b->d);
    if (t) SET_ATTR(op->d, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t->d);
    SET_ATTR(op->d, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y->d);
    finalize(op->d, "pointwise operation");
    keep_.push_back(pw);
    add_op(op);
  }
  // c = a @ b over the last two dims, batched (and head-broadcast) over the first two; float32 math.
  void matmul(const DescPtr& a, const DescPtr& b, const DescPtr& c) {
    DescPtr mm = make_desc(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
    const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    SET_ATTR(mm->d, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp);
    finalize(mm->d, "matmul descriptor");
    DescPtr op = make_desc(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
    SET_ATTR(op->d, CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &a->d);
    SET_ATTR(op->d, CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b->d);
    SET_ATTR(op->d, CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c->d);
    SET_ATTR(op->d, CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &mm->d);
    finalize(op->d, "matmul operation");
    keep_.push_back(mm);
    add_op(op);
  }
  // y = reduce(x) over the dims where y has size 1 (or, GQA, over the groups of heads); float32.
  void reduction(cudnnReduceTensorOp_t red, const DescPtr& x, const DescPtr& y) {
    DescPtr rd = make_desc(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
    const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    SET_ATTR(rd->d, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &red);
    SET_ATTR(rd->d, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp);
    // CUDNN_ATTR_REDUCTION_IS_DETERMINISTIC stays at its default, as in cudnn-frontend's SDPA
    // graphs: the fused-attention engines are matched on the frontend's graph, and determinism is
    // asked of the engine instead (configs with the NONDETERMINISTIC note are skipped, below).
    finalize(rd->d, "reduction descriptor");
    DescPtr op = make_desc(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
    SET_ATTR(op->d, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x->d);
    SET_ATTR(op->d, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y->d);
    SET_ATTR(op->d, CUDNN_ATTR_OPERATION_REDUCTION_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &rd->d);
    finalize(op->d, "reduction operation");
    keep_.push_back(rd);
    add_op(op);
  }
  // y = x seen with other dims / strides (a transpose of the last two dims here).
  void reshape(const DescPtr& x, const DescPtr& y) {
    DescPtr op = make_desc(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
    SET_ATTR(op->d, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x->d);
    SET_ATTR(op->d, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y->d);
    finalize(op->d, "reshape operation");
    add_op(op);
  }

  // The operation graph, the heuristics' engine configs (mode A, then FALLBACK), and the first one
  // that is deterministic and finalizes into an execution plan. Throws zt::Error naming every
  // failure when none does.
  std::unique_ptr<CudnnAttention::Plan> build(const std::string& what) {
    auto out = std::make_unique<CudnnAttention::Plan>();
    DescPtr graph = make_desc(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    set_graph_handle(graph->d, h_);
    std::vector<cudnnBackendDescriptor_t> ops;
    for (const auto& o : ops_) ops.push_back(o->d);
    SET_ATTR(graph->d, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, static_cast<int64_t>(ops.size()),
             ops.data());
    finalize(graph->d, "operation graph");
    keep_.push_back(graph);

    std::string tried;
    for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
      DescPtr heur = make_desc(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
      SET_ATTR(heur->d, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph->d);
      SET_ATTR(heur->d, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
      const cudnnStatus_t hst = cudnnBackendFinalize(heur->d);
      const char* mode_name = mode == CUDNN_HEUR_MODE_A ? "HEUR_MODE_A" : "HEUR_MODE_FALLBACK";
      if (hst != CUDNN_STATUS_SUCCESS) {
        tried += detail::concat("; ", mode_name, ": heuristics failed: ", cudnn_message(hst));
        continue;
      }
      int64_t count = 0;
      ZT_CUDNN_CHECK(cudnnBackendGetAttribute(heur->d, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0,
                                              &count, nullptr),
                     what);
      if (count <= 0) {
        tried += detail::concat("; ", mode_name, ": no engine config");
        continue;
      }
      std::vector<DescPtr> cfgs;
      std::vector<cudnnBackendDescriptor_t> raw;
      for (int64_t i = 0; i < count; ++i) {
        cfgs.push_back(make_desc(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
        raw.push_back(cfgs.back()->d);
      }
      int64_t got = 0;
      ZT_CUDNN_CHECK(cudnnBackendGetAttribute(heur->d, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                              count, &got, raw.data()),
                     what);
      for (int64_t i = 0; i < got; ++i) {
        DescPtr engine = make_desc(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
        int64_t n = 0;
        ZT_CUDNN_CHECK(cudnnBackendGetAttribute(raw[size_t(i)], CUDNN_ATTR_ENGINECFG_ENGINE,
                                                CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &engine->d),
                       what);
        int64_t index = -1;
        (void)cudnnBackendGetAttribute(engine->d, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, &index);
        cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
        int64_t nnotes = 0;
        ZT_CUDNN_CHECK(cudnnBackendGetAttribute(engine->d, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                                CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &nnotes, notes),
                       what);
        bool nondeterministic = false;
        for (int64_t j = 0; j < nnotes && j < CUDNN_NUMERICAL_NOTE_TYPE_COUNT; ++j)
          nondeterministic |= notes[j] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC;
        if (nondeterministic) {
          tried += detail::concat("; engine ", index, ": skipped (NONDETERMINISTIC numerical note)");
          continue;
        }
        DescPtr plan = make_desc(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
        set_plan_handle(plan->d, h_);
        SET_ATTR(plan->d, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw[size_t(i)]);
        const cudnnStatus_t pst = cudnnBackendFinalize(plan->d);
        if (pst != CUDNN_STATUS_SUCCESS) {
          tried += detail::concat("; engine ", index, ": ", cudnn_message(pst));
          continue;
        }
        ZT_CUDNN_CHECK(cudnnBackendGetAttribute(plan->d, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1,
                                                &n, &out->workspace),
                       what);
        ZT_CHECK(out->workspace >= 0, what, ": negative workspace size ", out->workspace);
        out->engine_index = index;
        out->plan = plan;
        out->keep = std::move(keep_);
        out->keep.push_back(heur);
        out->keep.push_back(cfgs[size_t(i)]);
        out->keep.push_back(engine);
        return out;
      }
    }
    ZT_THROW(what, ": no cuDNN engine config finalized into a deterministic execution plan (cuDNN ",
             CudnnAttention::version_string(), tried, ")");
  }

 private:
  void add_op(const DescPtr& op) {
    ops_.push_back(op);
    keep_.push_back(op);
  }
  cudnnHandle_t h_;
  int64_t next_virtual_ = kFirstVirtual;
  std::vector<DescPtr> ops_;
  std::vector<DescPtr> keep_;
};

cudnnDataType_t io_type(DType t) {
  ZT_CHECK(t == DType::bf16, "CudnnAttention: dtype ", dtype_name(t), " (only bfloat16 is built)");
  return CUDNN_DATA_BFLOAT16;
}

// Our (B, T, H, D) memory, R elements from one token to the next (H D when contiguous), as
// cuDNN's [B, H, T, D], and the same memory with the last two dims swapped ([B, H, D, T]: K^T, V^T).
Dims bhtd_strides(int64_t T, int64_t R, int64_t D) { return {T * R, D, R, 1}; }
Dims bhdt_strides(int64_t T, int64_t R, int64_t D) { return {T * R, D, 1, R}; }

// The causal mask on scores x [B, Hq, T, T]: keep x where row >= column, else lowest (by value).
DescPtr causal_select(GraphBuilder& g, const DescPtr& x, const DescPtr& lowest, const Dims& dims, const Dims& strides) {
  DescPtr row = g.virt(CUDNN_DATA_INT32, dims, strides), col = g.virt(CUDNN_DATA_INT32, dims, strides);
  g.pointwise(CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, x, nullptr, row, nullptr, /*axis=*/2);
  g.pointwise(CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, x, nullptr, col, nullptr, /*axis=*/3);
  DescPtr keep = g.virt(CUDNN_DATA_BOOLEAN, dims, strides);
  g.pointwise(CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, row, col, keep);
  DescPtr y = g.virt(CUDNN_DATA_FLOAT, dims, strides);
  g.pointwise(CUDNN_POINTWISE_BINARY_SELECT, CUDNN_DATA_FLOAT, x, lowest, y, keep);  // y = keep ? x : lowest
  return y;
}

std::unique_ptr<CudnnAttention::Plan> build_forward(cudnnHandle_t h, const CudnnAttnShape& s) {
  const int64_t B = s.B, T = s.T, Hq = s.Hq, Hkv = s.Hkv, D = s.D;
  const cudnnDataType_t io = io_type(s.dtype), f32 = CUDNN_DATA_FLOAT;
  GraphBuilder g(h);
  const DescPtr q = g.tensor(kQ, io, {B, Hq, T, D}, bhtd_strides(T, s.row(Hq), D), false);
  const DescPtr kt = g.tensor(kK, io, {B, Hkv, D, T}, bhdt_strides(T, s.row(Hkv), D), false);
  const DescPtr v = g.tensor(kV, io, {B, Hkv, T, D}, bhtd_strides(T, s.row(Hkv), D), false);
  const DescPtr o = g.tensor(kO, io, {B, Hq, T, D}, bhtd_strides(T, Hq * D, D), false);
  const DescPtr stats = g.tensor(kStats, f32, {B, Hq, T, 1}, {Hq * T, T, 1, 1}, false);
  const DescPtr scale = g.scalar(kScale), lowest = g.scalar(kLowest);
  const Dims sd{B, Hq, T, T}, ss{Hq * T * T, T * T, T, 1};  // scores
  const Dims rd{B, Hq, T, 1}, rs{Hq * T, T, 1, 1};          // per-row statistics

  DescPtr S = g.virt(f32, sd, ss);
  g.matmul(q, kt, S);
  DescPtr S1 = g.virt(f32, sd, ss);
  g.pointwise(CUDNN_POINTWISE_MUL, f32, S, scale, S1);
  DescPtr S2 = causal_select(g, S1, lowest, sd, ss);
  DescPtr M = g.virt(f32, rd, rs);
  g.reduction(CUDNN_REDUCE_TENSOR_MAX, S2, M);
  DescPtr S3 = g.virt(f32, sd, ss);
  g.pointwise(CUDNN_POINTWISE_SUB, f32, S2, M, S3);
  DescPtr E = g.virt(f32, sd, ss);
  g.pointwise(CUDNN_POINTWISE_EXP, f32, S3, nullptr, E);
  DescPtr L = g.virt(f32, rd, rs);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, E, L);
  DescPtr logL = g.virt(f32, rd, rs);
  g.pointwise(CUDNN_POINTWISE_LOG, f32, L, nullptr, logL);
  g.pointwise(CUDNN_POINTWISE_ADD, f32, M, logL, stats);  // lse = max + log(sum exp(s - max))
  DescPtr P = g.virt(io, sd, ss);                          // the second matmul's A: the I/O type
  g.pointwise(CUDNN_POINTWISE_DIV, f32, E, L, P);
  g.matmul(P, v, o);
  return g.build("CudnnAttention forward (" + s.str() + ")");
}

std::unique_ptr<CudnnAttention::Plan> build_backward(cudnnHandle_t h, const CudnnAttnShape& s) {
  const int64_t B = s.B, T = s.T, Hq = s.Hq, Hkv = s.Hkv, D = s.D;
  const cudnnDataType_t io = io_type(s.dtype), f32 = CUDNN_DATA_FLOAT;
  GraphBuilder g(h);
  const DescPtr q = g.tensor(kQ, io, {B, Hq, T, D}, bhtd_strides(T, s.row(Hq), D), false);
  const DescPtr kt = g.tensor(kK, io, {B, Hkv, D, T}, bhdt_strides(T, s.row(Hkv), D), false);
  const DescPtr vt = g.tensor(kV, io, {B, Hkv, D, T}, bhdt_strides(T, s.row(Hkv), D), false);
  const DescPtr o = g.tensor(kO, io, {B, Hq, T, D}, bhtd_strides(T, Hq * D, D), false);
  const DescPtr dO = g.tensor(kDO, io, {B, Hq, T, D}, bhtd_strides(T, Hq * D, D), false);
  const DescPtr stats = g.tensor(kStats, f32, {B, Hq, T, 1}, {Hq * T, T, 1, 1}, false);
  const DescPtr dQ = g.tensor(kDQ, io, {B, Hq, T, D}, bhtd_strides(T, s.row(Hq), D), false);
  const DescPtr dK = g.tensor(kDK, io, {B, Hkv, T, D}, bhtd_strides(T, s.row(Hkv), D), false);
  const DescPtr dV = g.tensor(kDV, io, {B, Hkv, T, D}, bhtd_strides(T, s.row(Hkv), D), false);
  const DescPtr softmax_sum = g.tensor(kSoftmaxSum, f32, {B, Hq, T, 1}, {Hq * T, T, 1, 1}, false);
  const DescPtr scale = g.scalar(kScale), lowest = g.scalar(kLowest), one = g.scalar(kOne);
  const Dims sd{B, Hq, T, T}, ss{Hq * T * T, T * T, T, 1};
  const Dims st{Hq * T * T, T * T, 1, T};  // the same memory transposed: [B, Hq, Tkv, Tq]
  const Dims rd{B, Hq, T, 1}, rs{Hq * T, T, 1, 1};
  const bool gqa = Hq != Hkv;

  // softmax_sum_t = sum_d dO_td O_td (FlashAttention-2's D_i), times the frontend's "one" scale
  DescPtr dOO = g.virt(f32, {B, Hq, T, D}, bhtd_strides(T, Hq * D, D));
  g.pointwise(CUDNN_POINTWISE_MUL, f32, dO, o, dOO);
  DescPtr rowsum = g.virt(f32, rd, rs);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, dOO, rowsum);
  g.pointwise(CUDNN_POINTWISE_MUL, f32, rowsum, one, softmax_sum);

  // P = exp(mask(scale Q K^T - Stats))
  DescPtr S = g.virt(f32, sd, ss);
  g.matmul(q, kt, S);
  DescPtr S1 = g.virt(f32, sd, ss);
  g.pointwise(CUDNN_POINTWISE_MUL, f32, S, scale, S1);
  DescPtr S2 = g.virt(f32, sd, ss);
  g.pointwise(CUDNN_POINTWISE_SUB, f32, S1, stats, S2);
  DescPtr S3 = causal_select(g, S2, lowest, sd, ss);
  DescPtr P = g.virt(f32, sd, ss);
  g.pointwise(CUDNN_POINTWISE_EXP, f32, S3, nullptr, P);

  // dV = P^T dO (per query head, then summed over each group of heads under GQA)
  DescPtr PT = g.virt(io, sd, st);
  g.reshape(P, PT);
  const Dims full_d{B, Hq, T, D}, full_s{Hq * T * D, T * D, D, 1};
  if (!gqa) {
    g.matmul(PT, dO, dV);
  } else {
    DescPtr dV_full = g.virt(io, full_d, full_s);
    g.matmul(PT, dO, dV_full);
    g.reduction(CUDNN_REDUCE_TENSOR_ADD, dV_full, dV);
  }

  // dS = P (dO V^T - softmax_sum) scale
  DescPtr dP = g.virt(f32, sd, ss);
  g.matmul(dO, vt, dP);
  DescPtr dP1 = g.virt(f32, sd, ss);
  g.pointwise(CUDNN_POINTWISE_SUB, f32, dP, softmax_sum, dP1);
  DescPtr dS0 = g.virt(f32, sd, ss);
  g.pointwise(CUDNN_POINTWISE_MUL, f32, dP1, P, dS0);
  DescPtr dS = g.virt(f32, sd, ss);
  g.pointwise(CUDNN_POINTWISE_MUL, f32, dS0, scale, dS);

  // dK = dS^T Q
  DescPtr dST = g.virt(io, sd, st);
  g.reshape(dS, dST);
  if (!gqa) {
    g.matmul(dST, q, dK);
  } else {
    DescPtr dK_full = g.virt(io, full_d, full_s);
    g.matmul(dST, q, dK_full);
    g.reduction(CUDNN_REDUCE_TENSOR_ADD, dK_full, dK);
  }

  // dQ = dS K, written directly (the deterministic form; see the header)
  DescPtr k = g.virt(io, {B, Hkv, T, D}, bhtd_strides(T, s.row(Hkv), D));
  g.reshape(kt, k);
  g.matmul(dS, k, dQ);
  return g.build("CudnnAttention backward (" + s.str() + ")");
}

// A workspace buffer from the caching allocator, returned when the guard ends: stream-ordered,
// so its next user on the same stream runs after the launch that used it.
struct Workspace {
  CudaAllocator& alloc;
  size_t bytes;
  void* p = nullptr;
  Workspace(CudaAllocator& a, size_t n, cudaStream_t s) : alloc(a), bytes(n) {
    if (n > 0) p = a.allocate(n, Category::workspace, s);
  }
  ~Workspace() {
    if (p) alloc.deallocate(p, bytes, Category::workspace);
  }
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
};

void execute(cudnnHandle_t h, const CudnnAttention::Plan& plan, const std::vector<int64_t>& uids,
             const std::vector<void*>& ptrs, void* workspace, const std::string& what) {
  DescPtr vp = make_desc(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  SET_ATTR(vp->d, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, static_cast<int64_t>(uids.size()), uids.data());
  SET_ATTR(vp->d, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, static_cast<int64_t>(ptrs.size()),
           ptrs.data());
  SET_ATTR(vp->d, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace);
  finalize(vp->d, "variant pack");
  ZT_CUDNN_CHECK(cudnnBackendExecute(h, plan.plan->d, vp->d), what);
}

}  // namespace

std::string CudnnAttnShape::str() const {
  return detail::concat(dtype_name(dtype), " B ", B, " T ", T, " Hq ", Hq, " Hkv ", Hkv, " D ", D,
                        qkv_row ? detail::concat(" packed row ", qkv_row) : std::string());
}

int64_t CudnnAttention::runtime_version() { return static_cast<int64_t>(cudnnGetVersion()); }

std::string CudnnAttention::version_string() {
  const int64_t v = runtime_version();  // major * 10000 + minor * 100 + patch (cuDNN 9)
  return detail::concat(v / 10000, ".", (v / 100) % 100, ".", v % 100);
}

CudnnAttention::CudnnAttention(CudaAllocator& alloc) : alloc_(alloc) {}

CudnnAttention::~CudnnAttention() {
  entries_.clear();  // plans before the handle they were built with
  if (handle_) (void)cudnnDestroy(static_cast<cudnnHandle_t>(handle_));
}

void* CudnnAttention::handle() {
  if (!handle_) {
    DeviceGuard guard(alloc_.device().index);
    cudnnHandle_t h = nullptr;
    ZT_CUDNN_CHECK(cudnnCreate(&h), detail::concat("CudnnAttention on ", alloc_.device().str()));
    handle_ = h;
  }
  return handle_;
}

CudnnAttention::Entry& CudnnAttention::entry_for(const CudnnAttnShape& s) {
  auto it = entries_.find(s);
  if (it != entries_.end()) return *it->second;
  auto e = std::make_unique<Entry>();
  std::string why;
  if (s.dtype != DType::bf16)
    why = detail::concat("dtype ", dtype_name(s.dtype),
                         ": cuDNN's fused flash attention takes bfloat16 (and float16) only, not float32");
  else if (s.D % 8 != 0 || s.D < 8 || s.D > 128)
    why = detail::concat("head dimension D = ", s.D, ": cuDNN's flash attention needs D % 8 == 0 and D <= 128");
  else if (s.Hkv < 1 || s.Hq % s.Hkv != 0)
    why = detail::concat("Hq = ", s.Hq, " is not a multiple of Hkv = ", s.Hkv);
  else if (s.B < 1 || s.T < 1)
    why = detail::concat("empty problem (B = ", s.B, ", T = ", s.T, ")");
  else if (runtime_version() < 90000)
    why = detail::concat("cuDNN ", version_string(), " at run time; these graphs need cuDNN 9");
  if (why.empty()) {
    // The device and the handle are not the shape's business: their errors propagate, uncached.
    DeviceGuard guard(alloc_.device().index);
    const cudnnHandle_t h = static_cast<cudnnHandle_t>(handle());
    try {
      e->fwd = build_forward(h, s);
      e->bwd = build_backward(h, s);
      e->ok = true;
    } catch (const std::exception& ex) {
      // An allocation failure says nothing about the shape: rethrown, not cached as unsupported.
      if (std::string(ex.what()).find("ALLOC_FAILED") != std::string::npos) throw;
      e->fwd.reset();
      e->bwd.reset();
      why = ex.what();
    }
  }
  e->why = why;
  return *entries_.emplace(s, std::move(e)).first->second;
}

bool CudnnAttention::supported(const CudnnAttnShape& s, std::string* why) {
  const Entry& e = entry_for(s);
  if (!e.ok && why) *why = e.why;
  return e.ok;
}

void CudnnAttention::forward(const CudnnAttnShape& s, void* out, float* stats, const void* q, const void* k,
                             const void* v, cudaStream_t stream) {
  const Entry& e = entry_for(s);
  const std::string what = "CudnnAttention::forward (" + s.str() + ")";
  if (!e.ok) ZT_THROW(what, ": not supported by cuDNN: ", e.why);
  for (const void* p : {static_cast<const void*>(out), static_cast<const void*>(stats), q, k, v})
    ZT_CHECK(p && aligned16(p), what, ": every pointer must be non-null and 16-byte aligned, got ", p);
  DeviceGuard guard(alloc_.device().index);
  const cudnnHandle_t h = static_cast<cudnnHandle_t>(handle());
  ZT_CUDNN_CHECK(cudnnSetStream(h, stream), what);
  // by-value scalars: read on the host by cudnnBackendExecute
  float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.D)));
  float lowest = std::numeric_limits<float>::lowest();
  Workspace ws(alloc_, static_cast<size_t>(e.fwd->workspace), stream);
  const std::vector<int64_t> uids{kQ, kK, kV, kO, kStats, kScale, kLowest};
  const std::vector<void*> ptrs{const_cast<void*>(q), const_cast<void*>(k), const_cast<void*>(v), out, stats,
                                &scale, &lowest};
  execute(h, *e.fwd, uids, ptrs, ws.p, what);
}

void CudnnAttention::backward(const CudnnAttnShape& s, void* dq, void* dk, void* dv, const void* dout, const void* q,
                              const void* k, const void* v, const void* out, const float* stats, cudaStream_t stream) {
  const Entry& e = entry_for(s);
  const std::string what = "CudnnAttention::backward (" + s.str() + ")";
  if (!e.ok) ZT_THROW(what, ": not supported by cuDNN: ", e.why);
  for (const void* p : {static_cast<const void*>(dq), static_cast<const void*>(dk), static_cast<const void*>(dv), dout,
                        q, k, v, out, static_cast<const void*>(stats)})
    ZT_CHECK(p && aligned16(p), what, ": every pointer must be non-null and 16-byte aligned, got ", p);
  DeviceGuard guard(alloc_.device().index);
  const cudnnHandle_t h = static_cast<cudnnHandle_t>(handle());
  ZT_CUDNN_CHECK(cudnnSetStream(h, stream), what);
  float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.D)));
  float lowest = std::numeric_limits<float>::lowest();
  float one = 1.0f;
  // one buffer: the plan's workspace, then softmax_sum (B, Hq, T) float32 at a 256-byte boundary
  const size_t plan_bytes = (static_cast<size_t>(e.bwd->workspace) + 255) / 256 * 256;
  const size_t sum_bytes = static_cast<size_t>(s.B * s.Hq * s.T) * sizeof(float);
  Workspace ws(alloc_, plan_bytes + sum_bytes, stream);
  void* plan_ws = e.bwd->workspace > 0 ? ws.p : nullptr;
  void* softmax_sum = static_cast<char*>(ws.p) + plan_bytes;
  const std::vector<int64_t> uids{kQ, kK, kV, kO, kDO, kStats, kDQ, kDK, kDV, kSoftmaxSum, kScale, kLowest, kOne};
  const std::vector<void*> ptrs{const_cast<void*>(q),    const_cast<void*>(k),     const_cast<void*>(v),
                                const_cast<void*>(out),  const_cast<void*>(dout),  const_cast<float*>(stats),
                                dq,                      dk,                       dv,
                                softmax_sum,             &scale,                   &lowest,
                                &one};
  execute(h, *e.bwd, uids, ptrs, plan_ws, what);
}

}  // namespace zt
