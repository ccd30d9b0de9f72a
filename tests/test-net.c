/* tests/test-net.c -- the alpha-beta collective model: closed forms, presets,
 * invariants (monotone in bytes and ranks, 1 rank free, RS + AG == AR),
 * hierarchy, sharing and the nccl-tests bus bandwidth. */
#include "models/net.h"

#include <math.h>
#include <string.h>

#include "tests/testutil.h"

static NetSpec *preset(const char *name)
{
  GError *error = NULL;
  NetSpec *s = net_preset(name, &error);
  g_assert_no_error(error);
  g_assert_nonnull(s);
  return s;
}

/* A balanced group: n ranks, k per node. */
static NetGroupShape group(guint n, guint k)
{
  NetGroupShape g = { n, (n + k - 1) / k, MIN(n, k) };
  return g;
}

static void test_presets(void)
{
  const char *const *names = net_preset_names();
  guint count = 0;
  for (; names[count] != NULL; count++) {
    g_autoptr(NetSpec) s = preset(names[count]);
    g_assert_cmpstr(s->name, ==, names[count]);
    GError *error = NULL;
    g_assert_true(net_spec_validate(s, &error));
    g_assert_no_error(error);
  }
  g_assert_cmpuint(count, ==, 3);

  g_autoptr(NetSpec) a100 = preset("dgx-a100");
  g_assert_cmpfloat(a100->intra_bw_gbps, ==, 300.0);
  g_assert_cmpfloat(a100->nic_bw_gbps, ==, 25.0);
  g_assert_cmpuint(a100->nics_per_node, ==, 8);
  g_assert_cmpfloat(a100->base_lat_us, ==, 8.4);
  g_assert_cmpfloat(a100->intra_lat_us, ==, 3.4);
  g_assert_cmpfloat(a100->inter_lat_us, ==, 14.0);
  g_assert_true(a100->nvlink);

  g_autoptr(NetSpec) h100 = preset("dgx-h100");
  g_assert_cmpfloat(h100->intra_bw_gbps, ==, 450.0);
  g_assert_cmpfloat(h100->nic_bw_gbps, ==, 50.0);
  g_assert_true(h100->nvlink);

  g_autoptr(NetSpec) pcie = preset("pcie");
  g_assert_false(pcie->nvlink);
  g_assert_cmpfloat(pcie->intra_bw_gbps, <, a100->intra_bw_gbps);
}

static void test_unknown_preset(void)
{
  GError *error = NULL;
  NetSpec *s = net_preset("infiniband-9000", &error);
  g_assert_null(s);
  g_assert_error(error, NET_ERROR, NET_ERROR_UNKNOWN);
  g_assert_nonnull(strstr(error->message, "infiniband-9000"));
  for (const char *const *n = net_preset_names(); *n != NULL; n++)
    g_assert_nonnull(strstr(error->message, *n));
  g_clear_error(&error);

  s = net_preset(NULL, &error);
  g_assert_null(s);
  g_assert_error(error, NET_ERROR, NET_ERROR_UNKNOWN);
  g_clear_error(&error);
}

static void test_copy_and_validate(void)
{
  g_autoptr(NetSpec) s = preset("dgx-h100");
  g_autoptr(NetSpec) c = net_spec_copy(s);
  g_assert_true(c != s);
  g_assert_true(c->name != s->name);
  g_assert_cmpstr(c->name, ==, s->name);
  g_assert_cmpfloat(c->nic_bw_gbps, ==, s->nic_bw_gbps);
  g_assert_null(net_spec_copy(NULL));
  net_spec_free(NULL);

  GError *error = NULL;
  c->intra_bw_gbps = 0.0;
  g_assert_false(net_spec_validate(c, &error));
  g_assert_error(error, NET_ERROR, NET_ERROR_INVALID);
  g_assert_nonnull(strstr(error->message, "intra_bw_gbps"));
  g_clear_error(&error);

  c->intra_bw_gbps = 450.0;
  c->inter_lat_us = NAN;
  g_assert_false(net_spec_validate(c, &error));
  g_assert_error(error, NET_ERROR, NET_ERROR_INVALID);
  g_assert_nonnull(strstr(error->message, "inter_lat_us"));
  g_clear_error(&error);

  c->inter_lat_us = 14.0;
  c->nics_per_node = 0;
  g_assert_false(net_spec_validate(c, &error));
  g_assert_error(error, NET_ERROR, NET_ERROR_INVALID);
  g_assert_nonnull(strstr(error->message, "nics_per_node"));
  g_clear_error(&error);
}

/* The model's ring all-reduce is the closed form, bit for bit. */
static void test_ring_closed_form(void)
{
  g_autoptr(NetSpec) s = preset("dgx-a100");
  static const double sizes[] = { 0.0, 1.0, 4096.0, 1e6, 3.3e8, 1e9 };
  for (guint i = 0; i < G_N_ELEMENTS(sizes); i++) {
    for (guint n = 2; n <= 8; n++) {
      NetGroupShape g = group(n, 8);
      double t = net_collective_time_s(s, SIM_COLL_ALL_REDUCE, sizes[i], &g,
                                       NET_ALGO_RING, 1);
      double cf = net_ring_allreduce_s(sizes[i], n, s->intra_bw_gbps * 1e9,
                                       s->intra_lat_us * 1e-6,
                                       s->base_lat_us * 1e-6);
      g_assert_cmpfloat(t, ==, cf);
    }
    /* One rank per node: a flat ring over the NICs. */
    NetGroupShape g = group(16, 1);
    double t = net_collective_time_s(s, SIM_COLL_ALL_REDUCE, sizes[i], &g,
                                     NET_ALGO_RING, 1);
    double cf = net_ring_allreduce_s(sizes[i], 16, s->nic_bw_gbps * 1e9,
                                     s->inter_lat_us * 1e-6,
                                     s->base_lat_us * 1e-6);
    g_assert_cmpfloat(t, ==, cf);
  }

  /* The closed form itself, against the formula written out. */
  double n = 8, B = 1e9, bw = 300e9, lat = 3.4e-6, base = 8.4e-6;
  double expect = base + 2 * (n - 1) * lat + 2 * (n - 1) / n * B / bw;
  g_assert_true(test_close(net_ring_allreduce_s(B, 8, bw, lat, base), expect,
                           1e-15));
  g_assert_cmpfloat(net_ring_allreduce_s(B, 1, bw, lat, base), ==, 0.0);
  g_assert_cmpfloat(net_ring_allreduce_s(B, 0, bw, lat, base), ==, 0.0);
}

static void test_one_rank_free(void)
{
  g_autoptr(NetSpec) s = preset("dgx-a100");
  NetGroupShape g = { 1, 1, 1 };
  for (int t = 0; t < SIM_COLL_COUNT; t++)
    for (int a = NET_ALGO_AUTO; a <= NET_ALGO_TREE; a++)
      g_assert_cmpfloat(net_collective_time_s(s, (SimCollType)t, 1e9, &g,
                                              (NetAlgo)a, 1),
                        ==, 0.0);
}

/* Monotone in bytes, for every type, algorithm and placement. */
static void test_monotone_bytes(gconstpointer data)
{
  const char *name = data;
  g_autoptr(NetSpec) s = preset(name);
  static const guint shapes[][2] = {
    { 2, 8 }, { 8, 8 }, { 16, 1 }, { 64, 8 }, { 32, 4 }, { 1024, 8 },
  };
  for (guint i = 0; i < G_N_ELEMENTS(shapes); i++) {
    NetGroupShape g = group(shapes[i][0], shapes[i][1]);
    for (int t = 0; t < SIM_COLL_COUNT; t++) {
      for (int a = NET_ALGO_AUTO; a <= NET_ALGO_TREE; a++) {
        double prev = 0.0;
        for (double b = 0.0; b <= 1e10; b = b > 0 ? b * 3.7 : 1.0) {
          double tm = net_collective_time_s(s, (SimCollType)t, b, &g,
                                            (NetAlgo)a, 1);
          g_assert_true(isfinite(tm));
          g_assert_cmpfloat(tm, >, 0.0);
          g_assert_cmpfloat(tm, >=, prev);
          prev = tm;
        }
      }
    }
  }
}

/* Monotone in ranks, within a node, across nodes one rank per node, and
 * across nodes eight ranks per node. */
static void test_monotone_ranks(gconstpointer data)
{
  const char *name = data;
  g_autoptr(NetSpec) s = preset(name);
  static const double sizes[] = { 0.0, 1e3, 1e6, 1e8, 4e9 };
  static const guint per_node[] = { 8, 1 };
  for (guint si = 0; si < G_N_ELEMENTS(sizes); si++) {
    for (int t = 0; t < SIM_COLL_COUNT; t++) {
      for (int a = NET_ALGO_AUTO; a <= NET_ALGO_TREE; a++) {
        for (guint p = 0; p < G_N_ELEMENTS(per_node); p++) {
          double prev = 0.0;
          for (guint n = 1; n <= 2048; n++) {
            guint k = per_node[p];
            /* Balanced groups only: within a node, or whole nodes. */
            if (n > k && n % k != 0)
              continue;
            NetGroupShape g = group(n, k);
            double tm = net_collective_time_s(s, (SimCollType)t, sizes[si],
                                              &g, (NetAlgo)a, 1);
            g_assert_cmpfloat(tm, >=, prev);
            prev = tm;
          }
        }
      }
    }
  }
}

/* 64 ranks, 8 per node: the hierarchical all-reduce beats a flat ring that
 * puts every step on the network. */
static void test_hierarchical_beats_flat(void)
{
  g_autoptr(NetSpec) s = preset("dgx-a100");
  NetGroupShape g = group(64, 8);
  g_assert_cmpuint(g.n_nodes, ==, 8);
  static const double sizes[] = { 1e6, 1e8, 1e9 };
  for (guint i = 0; i < G_N_ELEMENTS(sizes); i++) {
    double flat = net_ring_allreduce_s(sizes[i], 64, s->nic_bw_gbps * 1e9,
                                       s->inter_lat_us * 1e-6,
                                       s->base_lat_us * 1e-6);
    for (int a = NET_ALGO_AUTO; a <= NET_ALGO_TREE; a++) {
      double hier = net_collective_time_s(s, SIM_COLL_ALL_REDUCE, sizes[i],
                                          &g, (NetAlgo)a, 1);
      g_assert_cmpfloat(hier, <, flat);
    }
  }

  /* Worked example (ring): base + 2[7 lat_i + 7/8 B/bw_i]
   * + 2[7 lat_n + 7/8 (B/8)/bw_nic]. */
  double B = 1e9;
  double expect = 8.4e-6 + 2 * (7 * 3.4e-6 + 7.0 / 8 * B / 300e9) +
                  2 * (7 * 14e-6 + 7.0 / 8 * (B / 8) / 25e9);
  double got = net_collective_time_s(s, SIM_COLL_ALL_REDUCE, B, &g,
                                     NET_ALGO_RING, 1);
  g_assert_true(test_close(got, expect, 1e-12));

  /* A group that spans nodes is slower than the same count in one node. */
  NetGroupShape one = group(8, 8), two = group(8, 4);
  g_assert_cmpfloat(
    net_collective_time_s(s, SIM_COLL_ALL_REDUCE, B, &one, NET_ALGO_AUTO, 1),
    <, net_collective_time_s(s, SIM_COLL_ALL_REDUCE, B, &two, NET_ALGO_AUTO,
                             1));
}

/* Fewer NICs than local ranks: each rank gets nics/k of a NIC. */
static void test_nic_share(void)
{
  g_autoptr(NetSpec) s = preset("dgx-a100");
  g_autoptr(NetSpec) half = net_spec_copy(s);
  half->nics_per_node = 4;
  NetGroupShape g = group(64, 8);
  double B = 1e9;
  double t8 = net_collective_time_s(s, SIM_COLL_ALL_REDUCE, B, &g,
                                    NET_ALGO_RING, 1);
  double t4 = net_collective_time_s(half, SIM_COLL_ALL_REDUCE, B, &g,
                                    NET_ALGO_RING, 1);
  /* The inter-node bandwidth term doubles, nothing else changes. */
  double inter8 = 2 * 7.0 / 8 * (B / 8) / 25e9;
  g_assert_true(test_close(t4 - t8, inter8, 1e-9));

  /* One rank per node still gets a whole NIC with 4 NICs. */
  NetGroupShape flat = group(8, 1);
  g_assert_cmpfloat(
    net_collective_time_s(s, SIM_COLL_ALL_REDUCE, B, &flat, NET_ALGO_RING, 1),
    ==, net_collective_time_s(half, SIM_COLL_ALL_REDUCE, B, &flat,
                              NET_ALGO_RING, 1));
}

/* Bandwidth term of a collective: T(B) - T(0). */
static double bw_term(const NetSpec *s, SimCollType t, double B,
                      const NetGroupShape *g, NetAlgo a, guint conc)
{
  return net_collective_time_s(s, t, B, g, a, conc) -
         net_collective_time_s(s, t, 0.0, g, a, conc);
}

static void test_rs_plus_ag(void)
{
  g_autoptr(NetSpec) s = preset("dgx-h100");
  static const guint shapes[][2] = { { 8, 8 }, { 4, 8 }, { 16, 1 },
                                     { 64, 8 }, { 128, 4 } };
  double B = 2.5e8;
  for (guint i = 0; i < G_N_ELEMENTS(shapes); i++) {
    NetGroupShape g = group(shapes[i][0], shapes[i][1]);
    double rs = bw_term(s, SIM_COLL_REDUCE_SCATTER, B, &g, NET_ALGO_RING, 1);
    double ag = bw_term(s, SIM_COLL_ALL_GATHER, B, &g, NET_ALGO_RING, 1);
    double ar = bw_term(s, SIM_COLL_ALL_REDUCE, B, &g, NET_ALGO_RING, 1);
    g_assert_true(test_close(rs + ag, ar, 1e-9));
    /* Latency: RS + AG pays one more base latency than AR. */
    double rs0 = net_collective_time_s(s, SIM_COLL_REDUCE_SCATTER, 0, &g,
                                       NET_ALGO_RING, 1);
    double ag0 = net_collective_time_s(s, SIM_COLL_ALL_GATHER, 0, &g,
                                       NET_ALGO_RING, 1);
    double ar0 = net_collective_time_s(s, SIM_COLL_ALL_REDUCE, 0, &g,
                                       NET_ALGO_RING, 1);
    g_assert_true(test_close(rs0 + ag0 - ar0, s->base_lat_us * 1e-6, 1e-9));
  }
}

static void test_concurrent_doubles_bandwidth(void)
{
  g_autoptr(NetSpec) s = preset("dgx-a100");
  static const guint shapes[][2] = { { 8, 8 }, { 16, 1 }, { 64, 8 } };
  double B = 1e8;
  for (guint i = 0; i < G_N_ELEMENTS(shapes); i++) {
    NetGroupShape g = group(shapes[i][0], shapes[i][1]);
    for (int t = 0; t < SIM_COLL_COUNT; t++) {
      for (int a = NET_ALGO_RING; a <= NET_ALGO_TREE; a++) {
        double one = bw_term(s, (SimCollType)t, B, &g, (NetAlgo)a, 1);
        double two = bw_term(s, (SimCollType)t, B, &g, (NetAlgo)a, 2);
        g_assert_cmpfloat(one, >, 0.0);
        g_assert_true(test_close(two, 2.0 * one, 1e-9));
        /* Latency unchanged. */
        g_assert_cmpfloat(
          net_collective_time_s(s, (SimCollType)t, 0, &g, (NetAlgo)a, 2), ==,
          net_collective_time_s(s, (SimCollType)t, 0, &g, (NetAlgo)a, 1));
      }
    }
    /* concurrent == 0 is treated as 1. */
    g_assert_cmpfloat(
      net_collective_time_s(s, SIM_COLL_ALL_REDUCE, B, &g, NET_ALGO_AUTO, 0),
      ==,
      net_collective_time_s(s, SIM_COLL_ALL_REDUCE, B, &g, NET_ALGO_AUTO, 1));
  }
}

/* AUTO is the faster of ring and tree: tree for small messages at scale,
 * ring for large messages in a node. */
static void test_auto(void)
{
  g_autoptr(NetSpec) s = preset("dgx-a100");
  static const guint shapes[][2] = { { 8, 8 }, { 256, 1 }, { 1024, 8 } };
  static const double sizes[] = { 0, 1e3, 1e6, 1e8, 1e10 };
  for (guint i = 0; i < G_N_ELEMENTS(shapes); i++) {
    NetGroupShape g = group(shapes[i][0], shapes[i][1]);
    for (guint j = 0; j < G_N_ELEMENTS(sizes); j++) {
      double ring = net_collective_time_s(s, SIM_COLL_ALL_REDUCE, sizes[j],
                                          &g, NET_ALGO_RING, 1);
      double tree = net_collective_time_s(s, SIM_COLL_ALL_REDUCE, sizes[j],
                                          &g, NET_ALGO_TREE, 1);
      double au = net_collective_time_s(s, SIM_COLL_ALL_REDUCE, sizes[j], &g,
                                        NET_ALGO_AUTO, 1);
      g_assert_cmpfloat(au, ==, MIN(ring, tree));
    }
  }
  NetGroupShape wide = group(256, 1), node = group(8, 8);
  g_assert_cmpfloat(
    net_collective_time_s(s, SIM_COLL_ALL_REDUCE, 1e4, &wide, NET_ALGO_TREE, 1),
    <, net_collective_time_s(s, SIM_COLL_ALL_REDUCE, 1e4, &wide, NET_ALGO_RING,
                             1));
  g_assert_cmpfloat(
    net_collective_time_s(s, SIM_COLL_ALL_REDUCE, 1e9, &node, NET_ALGO_RING, 1),
    <, net_collective_time_s(s, SIM_COLL_ALL_REDUCE, 1e9, &node, NET_ALGO_TREE,
                             1));
}

static void test_p2p(void)
{
  for (const char *const *n = net_preset_names(); *n != NULL; n++) {
    g_autoptr(NetSpec) s = preset(*n);
    static const double sizes[] = { 0, 1e3, 2.5e7, 1e9 };
    double prev_same = 0, prev_cross = 0;
    for (guint i = 0; i < G_N_ELEMENTS(sizes); i++) {
      double same = net_p2p_time_s(s, sizes[i], TRUE);
      double cross = net_p2p_time_s(s, sizes[i], FALSE);
      g_assert_cmpfloat(same, >, 0.0);
      g_assert_cmpfloat(same, <=, cross);
      if (s->nvlink)
        g_assert_cmpfloat(same, <, cross);
      g_assert_cmpfloat(same, >=, prev_same);
      g_assert_cmpfloat(cross, >=, prev_cross);
      prev_same = same;
      prev_cross = cross;
    }
    /* p2p latency + link latency + bytes / link bandwidth. */
    double expect = (s->p2p_lat_us + s->inter_lat_us) * 1e-6 +
                    1e9 / (s->nic_bw_gbps * 1e9);
    g_assert_true(test_close(net_p2p_time_s(s, 1e9, FALSE), expect, 1e-12));
  }
}

/* nccl-tests convention: algbw = B / T, busbw = algbw * 2(n-1)/n.  A 1 GB
 * all-reduce over 8 NVLink3 GPUs shows a bus bandwidth within 2% of the
 * 300 GB/s per-direction NVLink figure (the latency terms eat the rest). */
static void test_busbw_nvlink(void)
{
  g_autoptr(NetSpec) s = preset("dgx-a100");
  NetGroupShape g = group(8, 8);
  double B = 1e9;
  double t = net_collective_time_s(s, SIM_COLL_ALL_REDUCE, B, &g,
                                   NET_ALGO_AUTO, 1);
  double algbw = B / t;
  double busbw = algbw * 2.0 * 7.0 / 8.0;
  g_assert_cmpfloat(busbw, <, 300e9);
  g_assert_cmpfloat(busbw, >, 0.98 * 300e9);
  g_test_message("1 GB all-reduce, 8 x NVLink3: %.3f ms, busbw %.1f GB/s",
                 t * 1e3, busbw / 1e9);

  g_autoptr(NetSpec) h = preset("dgx-h100");
  t = net_collective_time_s(h, SIM_COLL_ALL_REDUCE, B, &g, NET_ALGO_AUTO, 1);
  busbw = B / t * 2.0 * 7.0 / 8.0;
  g_assert_cmpfloat(busbw, >, 0.97 * 450e9);
}

/* Other collectives against their formulas (single node, dgx-a100). */
static void test_formulas(void)
{
  g_autoptr(NetSpec) s = preset("dgx-a100");
  NetGroupShape g = group(8, 8);
  double B = 1e8, bw = 300e9, lat = 3.4e-6, base = 8.4e-6;
  g_assert_true(test_close(
    net_collective_time_s(s, SIM_COLL_REDUCE_SCATTER, B, &g, NET_ALGO_AUTO, 1),
    base + 7 * lat + 7.0 / 8 * B / bw, 1e-12));
  g_assert_true(test_close(
    net_collective_time_s(s, SIM_COLL_BROADCAST, B, &g, NET_ALGO_AUTO, 1),
    base + 7 * lat + B / bw, 1e-12));
  g_assert_true(test_close(
    net_collective_time_s(s, SIM_COLL_ALL_TO_ALL, B, &g, NET_ALGO_AUTO, 1),
    base + 7 * lat + 7.0 / 8 * B / bw, 1e-12));
  g_assert_true(test_close(
    net_collective_time_s(s, SIM_COLL_ALL_REDUCE, B, &g, NET_ALGO_TREE, 1),
    base + 2 * 3 * lat + 2 * B / bw, 1e-12));
  /* All-to-all across nodes runs at the NIC share. */
  NetGroupShape x = group(16, 8);
  g_assert_true(test_close(
    net_collective_time_s(s, SIM_COLL_ALL_TO_ALL, B, &x, NET_ALGO_AUTO, 1),
    base + 15 * 14e-6 + 15.0 / 16 * B / 25e9, 1e-12));
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/net/presets", test_presets);
  g_test_add_func("/net/unknown-preset", test_unknown_preset);
  g_test_add_func("/net/copy-validate", test_copy_and_validate);
  g_test_add_func("/net/ring-closed-form", test_ring_closed_form);
  g_test_add_func("/net/one-rank-free", test_one_rank_free);
  for (const char *const *n = net_preset_names(); *n != NULL; n++) {
    g_autofree char *p1 = g_strdup_printf("/net/monotone-bytes/%s", *n);
    g_autofree char *p2 = g_strdup_printf("/net/monotone-ranks/%s", *n);
    g_test_add_data_func(p1, *n, test_monotone_bytes);
    g_test_add_data_func(p2, *n, test_monotone_ranks);
  }
  g_test_add_func("/net/hierarchical", test_hierarchical_beats_flat);
  g_test_add_func("/net/nic-share", test_nic_share);
  g_test_add_func("/net/rs-plus-ag", test_rs_plus_ag);
  g_test_add_func("/net/concurrent", test_concurrent_doubles_bandwidth);
  g_test_add_func("/net/auto", test_auto);
  g_test_add_func("/net/p2p", test_p2p);
  g_test_add_func("/net/busbw-nvlink", test_busbw_nvlink);
  g_test_add_func("/net/formulas", test_formulas);
  return g_test_run();
}
