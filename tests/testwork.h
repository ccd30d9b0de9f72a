/* tests/testwork.h -- building small workloads by hand in engine tests
 * (tests/test-engine.c, tests/test-fold.c), and comparing results bit for
 * bit. */
#ifndef TESTS_TESTWORK_H
#define TESTS_TESTWORK_H

#include "sim/engine.h"
#include "sim/workload.h"

/* Every figure of two results the same, bit for bit. */
static inline void test_assert_same_result(const SimResult *a,
                                           const SimResult *b)
{
  g_assert_cmpint(a->time_ns, ==, b->time_ns);
  g_assert_cmpuint(a->n_gpus, ==, b->n_gpus);
  g_assert_cmpuint(a->n_iterations, ==, b->n_iterations);
  g_assert_cmpuint(a->ops, ==, b->ops);
  g_assert_cmpuint(a->switches, ==, b->switches);
  g_assert_cmpmem(&a->energy_j, sizeof(double), &b->energy_j, sizeof(double));
  g_assert_cmpmem(&a->waste_j, sizeof(double), &b->waste_j, sizeof(double));
  g_assert_cmpmem(&a->flops, sizeof(double), &b->flops, sizeof(double));
  g_assert_cmpmem(&a->peak_power_w, sizeof(double), &b->peak_power_w,
                  sizeof(double));
  g_assert_cmpmem(a->by_class, sizeof a->by_class, b->by_class,
                  sizeof b->by_class);
  g_assert_cmpmem(a->by_phase, sizeof a->by_phase, b->by_phase,
                  sizeof b->by_phase);
  g_assert_cmpmem(&a->blocked, sizeof a->blocked, &b->blocked,
                  sizeof b->blocked);
  g_assert_cmpmem(&a->idle, sizeof a->idle, &b->idle, sizeof b->idle);
  g_assert_cmpmem(a->per_gpu, sizeof *a->per_gpu * a->n_gpus, b->per_gpu,
                  sizeof *b->per_gpu * b->n_gpus);
  g_assert_cmpmem(a->iterations, sizeof *a->iterations * a->n_iterations,
                  b->iterations, sizeof *b->iterations * b->n_iterations);
}

/* A shape of class k: 1 MFLOP for compute, `bytes` of type `coll` for
 * communication. */
static inline guint32 tw_shape(SimWorkload *w, SimOpClass k, double bytes,
                               SimCollType coll)
{
  SimShape sh = {0};
  sh.klass = k;
  sh.bytes = bytes;
  sh.coll = coll;
  sh.flops = k == SIM_CLASS_COMM ? 0 : 1e6;
  return sim_workload_add_shape(w, &sh);
}

/* Appends an op to builder b; returns its index in the rank. */
static inline guint32 tw_add(SimRankBuilder *b, SimWorkload *w,
                             SimOpKind kind, guint stream, gint64 ref_ns,
                             guint32 shape, guint32 peer, guint32 wait)
{
  SimOp op = {0};
  op.kind = kind;
  op.stream = stream;
  op.ref_ns = ref_ns;
  op.shape = shape;
  op.peer = peer;
  op.wait = wait;
  op.klass = g_array_index(w->shapes, SimShape, shape).klass;
  op.phase = SIM_PHASE_FORWARD;
  op.name = sim_workload_intern(w, sim_kind_name(kind));
  op.layer = 255;
  op.microbatch = G_MAXUINT16;
  return sim_rank_builder_add(b, &op);
}

#endif
