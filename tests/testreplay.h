/* tests/testreplay.h -- "these two workloads replay alike", GPU by GPU:
 * for tests that change how a workload is stored but must not change what
 * it does (shared programs against materialised copies, native files
 * against the workload saved; tests/test-native.c, tests/test-import.c). */
#ifndef TESTS_TESTREPLAY_H
#define TESTS_TESTREPLAY_H

#include "run/session.h"
#include "models/cluster.h"
#include "models/gpu.h"
#include "models/net.h"
#include "sim/workload.h"

/* Replays a and b (same rank count) for two iterations on a cluster of
 * one `gpu` per rank (dgx-a100 network, 8 GPUs per node, 5% performance
 * and power variability, so every GPU is priced on its own) at maximum
 * clocks, and asserts equal times and energies on every GPU and in
 * total. */
static inline void test_assert_same_replay(const SimWorkload *a,
                                           const SimWorkload *b,
                                           const char *gpu_name)
{
  GError *error = NULL;
  g_assert_cmpuint(a->n_ranks, ==, b->n_ranks);
  g_autoptr(JsSession) s = js_session_new(1);
  const GpuSpec *gpu = gpu_catalogue_lookup(s->catalogue, gpu_name, &error);
  g_assert_no_error(error);
  g_autoptr(NetSpec) net = net_preset("dgx-a100", &error);
  g_assert_no_error(error);
  g_autoptr(Cluster) c = cluster_new(gpu, net, a->n_ranks, 8, &error);
  g_assert_no_error(error);
  c->perf_spread = 0.05;
  c->power_spread = 0.05;
  DvfsPolicy pol = {.kind = DVFS_MAX};
  JsRunOptions opt = {.iterations = 2, .seed = 7, .switch_latency_ms = -1};
  g_autoptr(SimResult) x = js_simulate(s, c, a, &pol, &opt, &error);
  g_assert_no_error(error);
  g_autoptr(SimResult) y = js_simulate(s, c, b, &pol, &opt, &error);
  g_assert_no_error(error);
  g_assert_cmpint(x->time_ns, ==, y->time_ns);
  g_assert_cmpuint(x->n_gpus, ==, y->n_gpus);
  for (guint i = 0; i < x->n_gpus; i++) {
    const SimGpuResult *p = &x->per_gpu[i], *q = &y->per_gpu[i];
    g_assert_cmpfloat(p->energy_j, ==, q->energy_j);
    g_assert_cmpfloat(p->kernel_ns, ==, q->kernel_ns);
    g_assert_cmpfloat(p->comm_ns, ==, q->comm_ns);
    g_assert_cmpfloat(p->blocked_ns, ==, q->blocked_ns);
    g_assert_cmpfloat(p->idle_ns, ==, q->idle_ns);
  }
  g_assert_cmpfloat(x->energy_j, ==, y->energy_j);
}

#endif
