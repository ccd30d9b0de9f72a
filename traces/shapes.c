/* traces/shapes.c -- FLOPs and DRAM bytes of PyTorch operators from their
 * recorded input shapes.
 *
 * A profile taken with record_shapes=True gives every cpu_op its "Input
 * Dims" (one dim list per input, in the ATen schema's argument order) and
 * "Input type" (the dtype of each tensor input: "float", "c10::BFloat16",
 * "c10::Half", ...; "Scalar", "TensorList" or "" for the others).  The
 * table below maps the common operators to a formula; e is the element size
 * of the input named, N an input's element count:
 *
 *   mm(a[n,k], b[k,m])                 F = 2nkm       B = e(nk + km + nm)
 *   addmm(c, a[n,k], b[k,m])           F = 2nkm       B = e(Nc + nk + km + nm)
 *   bmm(a[b,n,k], b[b,k,m])            F = 2bnkm      B = e b(nk + km + nm)
 *   baddbmm(c[b,n,m], a[b,n,k], ...)   F = 2bnkm      B = e(b(nk + km) + 2bnm)
 *   matmul(a, b)                       as mm/bmm with broadcast batch dims
 *                                      (1-D operands are vectors)
 *   linear(x[..,k], w[m,k], bias)      F = 2(Nx/k)km  B = e(Nx + mk + Nx m/k
 *                                                      + Nbias)
 *   attention forward, q, k, v         F = 2 bhL S (d + dv)
 *                                      B = e(Nq + Nk + Nv + Nq dv/d)
 *   attention backward                 F = 2.5 x forward (five GEMMs of the
 *                                      forward's size against two)
 *                                      B = e(2 Nq + 2 Nk + 2 Nv + 2 Nout)
 *   layer/RMS norm forward             F = c N        B = e 2N + weights
 *   layer norm backward                F = c N        B = e 3N + weights
 *   softmax forward / backward         F = c N        B = e 2N / e 3N
 *   element-wise (add, mul, gelu, ...) F = c Nout     B = sum e_i N_i +
 *                                                      e_0 Nout
 *   cat(TensorList)                    F = 0          B = 2 e sum N_i
 *   copy_(dst, src)                    F = 0          B = e_dst N + e_src N
 *   clone / _to_copy / contiguous      F = 0          B = 2 e N
 *
 * Nout is the broadcast of the tensor inputs' shapes.  The per-element
 * FLOP counts c are estimates (one for arithmetic, four for
 * transcendental activations, 5-10 for the normalisations' mean, variance,
 * scale and shift): these operators are memory-bound, so c changes their
 * roofline position, and hence their clock sensitivity, only through the
 * bytes, not through c.
 *
 * Attention layouts: aten::scaled_dot_product_attention and its
 * _scaled_dot_product_{flash,efficient,cudnn}_attention kernels take
 * q[b,h,L,d], k[b,h,S,d]; aten::_flash_attention_forward/backward take
 * q[b,L,h,d], k[b,S,h,d].  Causal masking is an argument value the shapes
 * do not record, so a causal attention is counted at full size (2x its
 * work; the clock sensitivity depends on the FLOP/byte ratio, which stays
 * on the compute side either way).
 *
 * Failure: an operator whose required inputs are missing, of the wrong
 * rank, non-numeric or of inner dimensions that disagree gives
 * TRACE_SHAPE_BAD (the importer warns and keeps class-only pricing); one
 * with no recorded dims for what it needs (a TensorList without member
 * dims, as PyTorch 1.x records it) gives TRACE_SHAPE_NONE.  Bytes count
 * each input read once and the output written once: caches that hold a
 * small operand across tiles are the common case and make the count a
 * lower bound for GEMMs whose operands spill.
 */
#include "traces/shapes.h"
#include "sim/workload.h"

#include <string.h>

typedef enum {
  W_MM, W_ADDMM, W_BMM, W_BADDBMM, W_MATMUL, W_LINEAR,
  W_ATTN_BHLD, W_ATTN_BLHD, W_ATTN_BHLD_BWD, W_ATTN_BLHD_BWD,
  W_NORM, W_NORM_BWD, W_SOFTMAX, W_SOFTMAX_BWD, W_ELEMENTWISE, W_CAT,
  W_COPY, W_UNARY_COPY
} Formula;

typedef struct {
  const char *name;  /* exact operator name */
  guint8 formula;    /* Formula */
  guint8 c;          /* FLOPs per output element (vector formulas) */
} OpRule;

/* Operators priced from their shapes.  Extend here (and in the essay). */
static const OpRule op_rules[] = {
  {"aten::mm", W_MM, 0},
  {"aten::addmm", W_ADDMM, 0},
  {"aten::bmm", W_BMM, 0},
  {"aten::baddbmm", W_BADDBMM, 0},
  {"aten::matmul", W_MATMUL, 0},
  {"aten::linear", W_LINEAR, 0},
  {"aten::scaled_dot_product_attention", W_ATTN_BHLD, 0},
  {"aten::_scaled_dot_product_flash_attention", W_ATTN_BHLD, 0},
  {"aten::_scaled_dot_product_efficient_attention", W_ATTN_BHLD, 0},
  {"aten::_scaled_dot_product_cudnn_attention", W_ATTN_BHLD, 0},
  {"aten::_scaled_dot_product_flash_attention_backward", W_ATTN_BHLD_BWD, 0},
  {"aten::_scaled_dot_product_efficient_attention_backward", W_ATTN_BHLD_BWD,
   0},
  {"aten::_scaled_dot_product_cudnn_attention_backward", W_ATTN_BHLD_BWD, 0},
  {"aten::_flash_attention_forward", W_ATTN_BLHD, 0},
  {"aten::_flash_attention_backward", W_ATTN_BLHD_BWD, 0},
  {"aten::_efficient_attention_forward", W_ATTN_BLHD, 0},
  {"aten::_efficient_attention_backward", W_ATTN_BLHD_BWD, 0},
  {"aten::layer_norm", W_NORM, 8},
  {"aten::native_layer_norm", W_NORM, 8},
  {"aten::rms_norm", W_NORM, 5},
  {"aten::_fused_rms_norm", W_NORM, 5},
  {"aten::native_layer_norm_backward", W_NORM_BWD, 10},
  {"aten::softmax", W_SOFTMAX, 5},
  {"aten::_softmax", W_SOFTMAX, 5},
  {"aten::log_softmax", W_SOFTMAX, 5},
  {"aten::_log_softmax", W_SOFTMAX, 5},
  {"aten::_softmax_backward_data", W_SOFTMAX_BWD, 4},
  {"aten::_log_softmax_backward_data", W_SOFTMAX_BWD, 4},
  {"aten::add", W_ELEMENTWISE, 1},
  {"aten::add_", W_ELEMENTWISE, 1},
  {"aten::sub", W_ELEMENTWISE, 1},
  {"aten::sub_", W_ELEMENTWISE, 1},
  {"aten::rsub", W_ELEMENTWISE, 1},
  {"aten::mul", W_ELEMENTWISE, 1},
  {"aten::mul_", W_ELEMENTWISE, 1},
  {"aten::div", W_ELEMENTWISE, 1},
  {"aten::div_", W_ELEMENTWISE, 1},
  {"aten::neg", W_ELEMENTWISE, 1},
  {"aten::addcmul_", W_ELEMENTWISE, 2},
  {"aten::addcdiv_", W_ELEMENTWISE, 2},
  {"aten::where", W_ELEMENTWISE, 1},
  {"aten::masked_fill", W_ELEMENTWISE, 1},
  {"aten::masked_fill_", W_ELEMENTWISE, 1},
  {"aten::relu", W_ELEMENTWISE, 1},
  {"aten::relu_", W_ELEMENTWISE, 1},
  {"aten::clamp_min", W_ELEMENTWISE, 1},
  {"aten::clamp_min_", W_ELEMENTWISE, 1},
  {"aten::threshold_backward", W_ELEMENTWISE, 1},
  {"aten::gelu", W_ELEMENTWISE, 4},
  {"aten::gelu_backward", W_ELEMENTWISE, 4},
  {"aten::silu", W_ELEMENTWISE, 4},
  {"aten::silu_", W_ELEMENTWISE, 4},
  {"aten::silu_backward", W_ELEMENTWISE, 4},
  {"aten::sigmoid", W_ELEMENTWISE, 4},
  {"aten::sigmoid_backward", W_ELEMENTWISE, 2},
  {"aten::tanh", W_ELEMENTWISE, 4},
  {"aten::tanh_backward", W_ELEMENTWISE, 2},
  {"aten::exp", W_ELEMENTWISE, 4},
  {"aten::pow", W_ELEMENTWISE, 4},
  {"aten::rsqrt", W_ELEMENTWISE, 4},
  {"aten::sqrt", W_ELEMENTWISE, 4},
  {"aten::cat", W_CAT, 0},
  {"aten::copy_", W_COPY, 0},
  {"aten::clone", W_UNARY_COPY, 0},
  {"aten::_to_copy", W_UNARY_COPY, 0},
  {"aten::contiguous", W_UNARY_COPY, 0},
};

gint trace_shape_operator(const char *name)
{
  if (name == NULL || strncmp(name, "aten::", 6) != 0)
    return -1;
  for (gsize i = 0; i < G_N_ELEMENTS(op_rules); i++)
    if (strcmp(name, op_rules[i].name) == 0)
      return (gint)i;
  return -1;
}

/* ---- helpers ------------------------------------------------------------ */

/* Input i as a tensor of exactly `rank` dims (rank < 0: any rank), or NULL
 * when it is missing, not a tensor, of another rank or damaged. */
static const TraceShapeInput *tensor(const TraceShapeInputs *in, guint i,
                                     gint rank)
{
  if (i >= in->n || i >= TRACE_SHAPE_MAX_INPUTS)
    return NULL;
  const TraceShapeInput *t = &in->in[i];
  if (t->elem == 0 || t->bad || t->list || t->rank > TRACE_SHAPE_MAX_RANK)
    return NULL;
  if (rank >= 0 && t->rank != rank)
    return NULL;
  return t;
}

/* An optional tensor input's bytes: 0 when absent or not a tensor. */
static double opt_bytes(const TraceShapeInputs *in, guint i)
{
  const TraceShapeInput *t = tensor(in, i, -1);
  return t != NULL ? t->numel * t->elem : 0.0;
}

static gint64 last_dim(const TraceShapeInput *t, guint from_end)
{
  return t->dims[t->rank - 1 - from_end];
}

/* ---- GEMMs -------------------------------------------------------------- */

static TraceShapeResult gemm(double batch, double n, double k, double m,
                             double extra_bytes, guint elem,
                             TraceOpWork *out)
{
  out->flops = 2.0 * batch * n * k * m;
  out->bytes = elem * batch * (n * k + k * m + n * m) + extra_bytes;
  out->klass = SIM_CLASS_GEMM;
  out->elem = (guint8)elem;
  return TRACE_SHAPE_OK;
}

static TraceShapeResult w_mm(const TraceShapeInputs *in, guint a0,
                             double extra, TraceOpWork *out)
{
  const TraceShapeInput *a = tensor(in, a0, 2), *b = tensor(in, a0 + 1, 2);
  if (a == NULL || b == NULL || a->dims[1] != b->dims[0])
    return TRACE_SHAPE_BAD;
  return gemm(1, (double)a->dims[0], (double)a->dims[1], (double)b->dims[1],
              extra, a->elem, out);
}

static TraceShapeResult w_bmm(const TraceShapeInputs *in, guint a0,
                              gboolean add, TraceOpWork *out)
{
  const TraceShapeInput *a = tensor(in, a0, 3), *b = tensor(in, a0 + 1, 3);
  if (a == NULL || b == NULL || a->dims[2] != b->dims[1] ||
      a->dims[0] != b->dims[0])
    return TRACE_SHAPE_BAD;
  double bt = (double)a->dims[0], n = (double)a->dims[1],
         k = (double)a->dims[2], m = (double)b->dims[2];
  /* baddbmm reads its self [b, n, m] besides writing the output. */
  return gemm(bt, n, k, m, add ? a->elem * bt * n * m : 0.0, a->elem, out);
}

/* torch.matmul: 1-D operands are vectors; leading dims broadcast. */
static TraceShapeResult w_matmul(const TraceShapeInputs *in,
                                 TraceOpWork *out)
{
  const TraceShapeInput *a = tensor(in, 0, -1), *b = tensor(in, 1, -1);
  if (a == NULL || b == NULL || a->rank == 0 || b->rank == 0)
    return TRACE_SHAPE_BAD;
  double n = a->rank >= 2 ? (double)last_dim(a, 1) : 1.0;
  gint64 ka = last_dim(a, 0);
  gint64 kb = b->rank >= 2 ? last_dim(b, 1) : last_dim(b, 0);
  double m = b->rank >= 2 ? (double)last_dim(b, 0) : 1.0;
  if (ka != kb)
    return TRACE_SHAPE_BAD;
  /* Batch: the broadcast of the dims before the matrix ones. */
  gint ba = MAX((gint)a->rank - 2, 0), bb = MAX((gint)b->rank - 2, 0);
  double batch = 1.0;
  for (gint i = 0; i < MAX(ba, bb); i++) {
    gint64 da = i < ba ? a->dims[ba - 1 - i] : 1;
    gint64 db = i < bb ? b->dims[bb - 1 - i] : 1;
    if (da != db && da != 1 && db != 1)
      return TRACE_SHAPE_BAD;
    batch *= (double)MAX(da, db);
  }
  /* Operands are read once each (a broadcast operand is not re-read). */
  out->flops = 2.0 * batch * n * (double)ka * m;
  out->bytes = a->elem * (a->numel + b->numel + batch * n * m);
  out->klass = SIM_CLASS_GEMM;
  out->elem = a->elem;
  return TRACE_SHAPE_OK;
}

static TraceShapeResult w_linear(const TraceShapeInputs *in,
                                 TraceOpWork *out)
{
  const TraceShapeInput *x = tensor(in, 0, -1), *w = tensor(in, 1, 2);
  if (x == NULL || w == NULL || x->rank == 0 ||
      last_dim(x, 0) != w->dims[1] || w->dims[1] == 0)
    return TRACE_SHAPE_BAD;
  double k = (double)w->dims[1], m = (double)w->dims[0];
  double rows = x->numel / k;
  out->flops = 2.0 * rows * k * m;
  out->bytes = x->elem * (x->numel + m * k + rows * m) + opt_bytes(in, 2);
  out->klass = SIM_CLASS_GEMM;
  out->elem = x->elem;
  return TRACE_SHAPE_OK;
}

/* ---- attention ---------------------------------------------------------- */

/* q, k, v at inputs a0.. in layout [b,h,L,d] (blhd: [b,L,h,d]). */
static TraceShapeResult w_attention(const TraceShapeInputs *in, guint a0,
                                    gboolean blhd, gboolean backward,
                                    TraceOpWork *out)
{
  const TraceShapeInput *q = tensor(in, a0, 4), *k = tensor(in, a0 + 1, 4),
                        *v = tensor(in, a0 + 2, 4);
  if (q == NULL || k == NULL || v == NULL || q->dims[3] != k->dims[3] ||
      q->dims[3] == 0)
    return TRACE_SHAPE_BAD;
  double d = (double)q->dims[3], dv = (double)v->dims[3];
  double s = (double)(blhd ? k->dims[1] : k->dims[2]);
  double rows = q->numel / d; /* b h L */
  double fwd = 2.0 * rows * s * (d + dv);
  double io = q->numel + k->numel + v->numel + rows * dv;
  out->flops = backward ? 2.5 * fwd : fwd;
  out->bytes = q->elem * (backward ? 2.0 * io : io);
  out->klass = SIM_CLASS_ATTENTION;
  out->elem = q->elem;
  return TRACE_SHAPE_OK;
}

/* ---- vector operators --------------------------------------------------- */

static TraceShapeResult vector(double n, double reads, double writes,
                               guint elem, guint c, SimOpClass klass,
                               TraceOpWork *out)
{
  out->flops = (double)c * n;
  out->bytes = elem * (reads + writes);
  out->klass = (guint8)klass;
  out->elem = (guint8)elem;
  return TRACE_SHAPE_OK;
}

/* Element-wise: the output has the broadcast shape of the tensor inputs. */
static TraceShapeResult w_elementwise(const TraceShapeInputs *in, guint c,
                                      TraceOpWork *out)
{
  gint64 bshape[TRACE_SHAPE_MAX_RANK];
  guint brank = 0, n_tensors = 0, elem0 = 0;
  double reads = 0;
  for (guint i = 0; i < MIN(in->n, TRACE_SHAPE_MAX_INPUTS); i++) {
    const TraceShapeInput *t = &in->in[i];
    if (t->elem == 0)
      continue; /* a Scalar */
    if (t->bad || t->list || t->rank > TRACE_SHAPE_MAX_RANK)
      return TRACE_SHAPE_BAD;
    if (n_tensors++ == 0)
      elem0 = t->elem;
    reads += t->numel * t->elem;
    /* Broadcast, aligned on the last dim. */
    for (guint j = 0; j < t->rank; j++) {
      gint64 d = t->dims[t->rank - 1 - j];
      if (j >= brank) {
        bshape[j] = d;
        continue;
      }
      if (bshape[j] == 1)
        bshape[j] = d;
      else if (d != 1 && d != bshape[j])
        return TRACE_SHAPE_BAD;
    }
    brank = MAX(brank, t->rank);
  }
  if (n_tensors == 0)
    return TRACE_SHAPE_NONE;
  double nout = 1;
  for (guint j = 0; j < brank; j++)
    nout *= (double)bshape[j];
  out->flops = (double)c * nout;
  out->bytes = reads + elem0 * nout;
  out->klass = SIM_CLASS_ELEMENTWISE;
  out->elem = (guint8)elem0;
  return TRACE_SHAPE_OK;
}

static TraceShapeResult w_cat(const TraceShapeInputs *in, TraceOpWork *out)
{
  if (in->n == 0)
    return TRACE_SHAPE_BAD;
  const TraceShapeInput *t = &in->in[0];
  if (t->bad)
    return TRACE_SHAPE_BAD;
  if (!t->list || t->list_numel <= 0)
    return TRACE_SHAPE_NONE; /* a TensorList recorded without dims */
  guint e = t->elem > 0 ? t->elem : 4;
  return vector(t->list_numel, t->list_numel, t->list_numel, e, 0,
                SIM_CLASS_MEMCPY, out);
}

TraceShapeResult trace_shape_work(gint op, const TraceShapeInputs *in,
                                  TraceOpWork *out)
{
  g_return_val_if_fail(in != NULL && out != NULL, TRACE_SHAPE_NONE);
  g_return_val_if_fail(op >= 0 && (gsize)op < G_N_ELEMENTS(op_rules),
                       TRACE_SHAPE_NONE);
  if (in->malformed)
    return TRACE_SHAPE_BAD;
  if (in->n == 0)
    return TRACE_SHAPE_NONE; /* "Input Dims" not recorded */
  const OpRule *r = &op_rules[op];
  TraceOpWork w = {0};
  TraceShapeResult res = TRACE_SHAPE_BAD;
  const TraceShapeInput *x;
  switch ((Formula)r->formula) {
  case W_MM:
    res = w_mm(in, 0, 0.0, &w);
    break;
  case W_ADDMM: {
    /* The bias is read (broadcast over the rows). */
    double bias = opt_bytes(in, 0);
    res = w_mm(in, 1, bias, &w);
    break;
  }
  case W_BMM:
    res = w_bmm(in, 0, FALSE, &w);
    break;
  case W_BADDBMM:
    res = w_bmm(in, 1, TRUE, &w);
    break;
  case W_MATMUL:
    res = w_matmul(in, &w);
    break;
  case W_LINEAR:
    res = w_linear(in, &w);
    break;
  case W_ATTN_BHLD:
  case W_ATTN_BLHD:
    res = w_attention(in, 0, r->formula == W_ATTN_BLHD, FALSE, &w);
    break;
  case W_ATTN_BHLD_BWD:
  case W_ATTN_BLHD_BWD:
    /* (grad_out, query, key, value, out, ...) */
    res = w_attention(in, 1, r->formula == W_ATTN_BLHD_BWD, TRUE, &w);
    break;
  case W_NORM:
    if ((x = tensor(in, 0, -1)) != NULL)
      res = vector(x->numel, x->numel, x->numel, x->elem, r->c,
                   SIM_CLASS_NORM, &w);
    if (res == TRACE_SHAPE_OK) /* weight and bias (layer norm: 2, 3) */
      w.bytes += opt_bytes(in, 2) + opt_bytes(in, 3);
    break;
  case W_NORM_BWD:
    /* (grad_out, input, normalized_shape, mean, rstd, weight, ...) */
    if ((x = tensor(in, 1, -1)) != NULL && tensor(in, 0, -1) != NULL)
      res = vector(x->numel, 2 * x->numel, x->numel, x->elem, r->c,
                   SIM_CLASS_NORM, &w);
    if (res == TRACE_SHAPE_OK)
      w.bytes += 2 * opt_bytes(in, 5);
    break;
  case W_SOFTMAX:
    if ((x = tensor(in, 0, -1)) != NULL)
      res = vector(x->numel, x->numel, x->numel, x->elem, r->c,
                   SIM_CLASS_SOFTMAX, &w);
    break;
  case W_SOFTMAX_BWD:
    /* (grad_output, output, dim, input_dtype) */
    if ((x = tensor(in, 0, -1)) != NULL && tensor(in, 1, -1) != NULL)
      res = vector(x->numel, 2 * x->numel, x->numel, x->elem, r->c,
                   SIM_CLASS_SOFTMAX, &w);
    break;
  case W_ELEMENTWISE:
    res = w_elementwise(in, r->c, &w);
    break;
  case W_CAT:
    res = w_cat(in, &w);
    break;
  case W_COPY: {
    /* copy_(self, src): src read (its own dtype), self written. */
    const TraceShapeInput *dst = tensor(in, 0, -1), *src = tensor(in, 1, -1);
    if (dst != NULL && src != NULL) {
      w.bytes = dst->numel * dst->elem + src->numel * src->elem;
      w.klass = SIM_CLASS_MEMCPY;
      w.elem = dst->elem;
      res = TRACE_SHAPE_OK;
    }
    break;
  }
  case W_UNARY_COPY:
    if ((x = tensor(in, 0, -1)) != NULL)
      res = vector(x->numel, x->numel, x->numel, x->elem, 0,
                   SIM_CLASS_MEMCPY, &w);
    break;
  }
  if (res == TRACE_SHAPE_OK)
    *out = w;
  return res;
}
