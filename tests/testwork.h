/* tests/testwork.h -- building small workloads by hand in engine tests
 * (tests/test-engine.c, tests/test-fold.c). */
#ifndef TESTS_TESTWORK_H
#define TESTS_TESTWORK_H

#include "sim/engine.h"
#include "sim/workload.h"

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
