/* tests/test-native.c -- native trace files: round trips are exact, every
 * kind of damaged or foreign file gives a clear error naming the file and
 * the dataset, failed writes leave nothing behind, trace_info counts right,
 * and js.trace works from Lua. */
#include "lua/bind.h"
#include "models/gpu.h"
#include "traces/gpt.h"
#include "traces/import.h"
#include "traces/info.h"
#include "traces/native.h"
#include "testreplay.h"
#include "testutil.h"

#include <errno.h>
#include <hdf5.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <zlib.h>

/* ---- workloads ------------------------------------------------------------- */

static SimWorkload *gen_gpt(const char *model, guint tp, guint pp, guint dp,
                            guint mb, guint seq)
{
  GError *error = NULL;
  GptConfig cfg;
  gpt_config_init(&cfg);
  g_assert_true(gpt_config_set_model(&cfg, model, &error));
  cfg.tp = tp;
  cfg.pp = pp;
  cfg.dp = dp;
  cfg.microbatches = mb;
  cfg.seq_len = seq;
  g_autoptr(GpuCatalogue) cat = gpu_catalogue_new();
  const GpuSpec *gpu = gpu_catalogue_lookup(cat, "A100-SXM4-80GB", &error);
  g_assert_no_error(error);
  SimWorkload *w = gpt_generate(&cfg, gpu, &error);
  g_assert_no_error(error);
  g_assert_nonnull(w);
  return w;
}

static SimOp mkop(SimOpKind kind, SimOpClass klass, guint8 stream,
                  guint32 shape, guint32 name, gint64 ref_ns, guint32 peer)
{
  SimOp op;
  memset(&op, 0, sizeof op);
  op.kind = kind;
  op.klass = klass;
  op.stream = stream;
  op.shape = shape;
  op.name = name;
  op.ref_ns = ref_ns;
  op.peer = peer;
  op.wait = SIM_NO_WAIT;
  op.microbatch = G_MAXUINT16;
  op.layer = 255;
  op.phase = SIM_PHASE_OTHER;
  return op;
}

/* Three ranks with what the generator never makes: JSON-hostile and
 * non-ASCII names, markers, a cross-stream wait, send/recv, a rank without
 * ops, no layout, no schedule or reference GPU. */
static SimWorkload *edge_workload(void)
{
  SimWorkload *w = sim_workload_new(3);
  guint32 n_gemm = sim_workload_intern(w, "void gemm<float, \"q\\\">(x)");
  guint32 n_ar = sim_workload_intern(w, "ncclAllReduce \xce\xb1\xce\xb2");
  guint32 n_p2p = sim_workload_intern(w, "ncclSendRecv");
  guint32 n_mark = sim_workload_intern(w, "ProfilerStep#3");
  SimShape k = { 2e9, 4e6, n_gemm, SIM_CLASS_GEMM, 0, 1, 0 };
  SimShape c = { 0, 65536, n_ar, SIM_CLASS_COMM, SIM_COLL_ALL_REDUCE, 0, 0 };
  SimShape p = { 0, 1024, n_p2p, SIM_CLASS_COMM, SIM_COLL_SEND_RECV, 0, 0 };
  guint32 sk = sim_workload_add_shape(w, &k);
  guint32 sc = sim_workload_add_shape(w, &c);
  guint32 sp = sim_workload_add_shape(w, &p);
  guint32 members[2] = { 0, 1 };
  guint32 g = sim_workload_add_group(w, members, 2);

  g_autoptr(SimRankBuilder) b = sim_rank_builder_new();
  SimOp op = mkop(SIM_OP_KERNEL, SIM_CLASS_GEMM, 0, sk, n_gemm, 1000, 0);
  op.microbatch = 2;
  op.layer = 7;
  op.phase = SIM_PHASE_FORWARD;
  guint32 h0 = sim_rank_builder_add(b, &op);
  op = mkop(SIM_OP_COLLECTIVE, SIM_CLASS_COMM, 0, sc, n_ar, 0, g);
  sim_rank_builder_add(b, &op);
  op = mkop(SIM_OP_SEND, SIM_CLASS_COMM, 0, sp, n_p2p, 0, 1);
  sim_rank_builder_add(b, &op);
  op = mkop(SIM_OP_KERNEL, SIM_CLASS_GEMM, 2, sk, n_gemm, 500, 0);
  op.wait = h0;
  sim_rank_builder_add(b, &op);
  op = mkop(SIM_OP_MARKER, SIM_CLASS_OTHER, 2, sk, n_mark, 0, 0);
  sim_rank_builder_add(b, &op);
  sim_rank_builder_finish(b, w, 0);

  op = mkop(SIM_OP_KERNEL, SIM_CLASS_GEMM, 0, sk, n_gemm, 3000, 0);
  sim_rank_builder_add(b, &op);
  op = mkop(SIM_OP_COLLECTIVE, SIM_CLASS_COMM, 0, sc, n_ar, 0, g);
  sim_rank_builder_add(b, &op);
  op = mkop(SIM_OP_RECV, SIM_CLASS_COMM, 0, sp, n_p2p, 0, 0);
  sim_rank_builder_add(b, &op);
  sim_rank_builder_finish(b, w, 1);
  w->ranks[1].stage = 1;
  /* rank 2: never given ops (stream_off NULL) */

  g_hash_table_insert(w->provenance, g_strdup("source"),
                      g_strdup("rank0.json.gz"));
  g_hash_table_insert(w->provenance, g_strdup("note \xc3\xbc/x"),
                      g_strdup("\xe2\x9c\x93 with \"quotes\""));
  GError *error = NULL;
  g_assert_true(sim_workload_validate(w, &error));
  g_assert_no_error(error);
  return w;
}

static void assert_same_workload(const SimWorkload *a, const SimWorkload *b)
{
  g_assert_cmpuint(a->n_ranks, ==, b->n_ranks);
  for (guint r = 0; r < a->n_ranks; r++) {
    const SimRank *x = &a->ranks[r], *y = &b->ranks[r];
    g_assert_cmpuint(x->n_ops, ==, y->n_ops);
    g_assert_cmpuint(x->n_streams, ==, y->n_streams);
    g_assert_cmpuint(x->stage, ==, y->stage);
    for (guint32 i = 0; i < x->n_ops; i++) {
      /* As the ranks see them: peers resolved (a shared program's). */
      SimOp p = x->ops[i], q = y->ops[i];
      p.peer = sim_op_peer(x, &p);
      q.peer = sim_op_peer(y, &q);
      p.patch = q.patch = 0;
      g_assert_cmpmem(&p, sizeof p, &q, sizeof q);
    }
    g_assert_true((x->stream_off == NULL) == (y->stream_off == NULL));
    if (x->stream_off != NULL)
      g_assert_cmpmem(x->stream_off, sizeof(guint32) * (x->n_streams + 1),
                      y->stream_off, sizeof(guint32) * (y->n_streams + 1));
  }
  g_assert_cmpmem(a->shapes->data, sizeof(SimShape) * a->shapes->len,
                  b->shapes->data, sizeof(SimShape) * b->shapes->len);
  g_assert_cmpuint(a->names->len, ==, b->names->len);
  for (guint i = 0; i < a->names->len; i++)
    g_assert_cmpstr(sim_workload_name(a, i), ==, sim_workload_name(b, i));
  g_assert_cmpmem(a->group_off->data, sizeof(guint32) * a->group_off->len,
                  b->group_off->data, sizeof(guint32) * b->group_off->len);
  g_assert_cmpmem(a->group_ranks->data,
                  sizeof(guint32) * a->group_ranks->len, b->group_ranks->data,
                  sizeof(guint32) * b->group_ranks->len);
  g_assert_cmpuint(a->tp, ==, b->tp);
  g_assert_cmpuint(a->pp, ==, b->pp);
  g_assert_cmpuint(a->dp, ==, b->dp);
  g_assert_cmpuint(a->microbatches, ==, b->microbatches);
  g_assert_cmpfloat(a->tokens_per_iteration, ==, b->tokens_per_iteration);
  g_assert_cmpstr(a->schedule, ==, b->schedule);
  g_assert_cmpstr(a->ref_gpu, ==, b->ref_gpu);
  g_assert_cmpuint(g_hash_table_size(a->provenance), ==,
                   g_hash_table_size(b->provenance));
  GHashTableIter it;
  gpointer k, v;
  g_hash_table_iter_init(&it, a->provenance);
  while (g_hash_table_iter_next(&it, &k, &v))
    g_assert_cmpstr(v, ==, g_hash_table_lookup(b->provenance, k));
}

/* b shares programs as a does: the same ranks run one (with the same
 * peer deltas), ranks that share one in a share one in b, and as many
 * ops are stored. */
static void assert_same_sharing(const SimWorkload *a, const SimWorkload *b)
{
  g_assert_cmpuint(a->n_ranks, ==, b->n_ranks);
  g_assert_cmpuint(sim_workload_n_programs(a), ==,
                   sim_workload_n_programs(b));
  g_assert_cmpuint(sim_workload_n_stored_ops(a), ==,
                   sim_workload_n_stored_ops(b));
  for (guint r = 0; r < a->n_ranks; r++) {
    const SimRank *x = &a->ranks[r], *y = &b->ranks[r];
    g_assert_cmpint(x->program == SIM_NO_PROGRAM, ==,
                    y->program == SIM_NO_PROGRAM);
    if (x->program == SIM_NO_PROGRAM)
      continue;
    g_assert_cmpmem(x->peer_delta, sizeof x->peer_delta, y->peer_delta,
                    sizeof y->peer_delta);
    for (guint q = 0; q < r; q++)
      g_assert_cmpint(a->ranks[q].program == x->program, ==,
                      b->ranks[q].program == y->program);
  }
}

/* The root attribute format_version of a saved trace. */
static guint32 file_version(const char *path)
{
  hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  g_assert_cmpint(f, >=, 0);
  hid_t a = H5Aopen(f, "format_version", H5P_DEFAULT);
  guint32 v = 0;
  g_assert_cmpint(H5Aread(a, H5T_NATIVE_UINT32, &v), >=, 0);
  H5Aclose(a);
  H5Fclose(f);
  return v;
}

static guint64 file_size(const char *path)
{
  GStatBuf st;
  g_assert_cmpint(g_stat(path, &st), ==, 0);
  return (guint64)st.st_size;
}

/* Number of entries in dir (temporary files left behind show up here). */
static guint dir_entries(const char *dir)
{
  GDir *d = g_dir_open(dir, 0, NULL);
  g_assert_nonnull(d);
  guint n = 0;
  while (g_dir_read_name(d) != NULL)
    n++;
  g_dir_close(d);
  return n;
}

/* ---- round trips ------------------------------------------------------------ */

static void test_roundtrip_gpt(void)
{
  g_autofree char *dir = test_tmpdir();
  g_autofree char *path = g_build_filename(dir, "gpt.h5", NULL);
  g_autoptr(SimWorkload) w = gen_gpt("gpt3-125m", 2, 2, 2, 4, 512);
  GError *error = NULL;
  g_assert_true(trace_native_save(w, path, &error));
  g_assert_no_error(error);
  g_assert_cmpuint(dir_entries(dir), ==, 1); /* no temporary file left */
  g_assert_true(trace_native_probe(path));
  g_autoptr(SimWorkload) l = trace_native_load(path, &error);
  g_assert_no_error(error);
  g_assert_nonnull(l);
  assert_same_workload(w, l);
  test_rmdir(dir);
}

static void test_roundtrip_edge(void)
{
  g_autofree char *dir = test_tmpdir();
  g_autofree char *path = g_build_filename(dir, "edge.h5", NULL);
  g_autoptr(SimWorkload) w = edge_workload();
  GError *error = NULL;
  g_assert_true(trace_native_save(w, path, &error));
  g_assert_no_error(error);
  g_autoptr(SimWorkload) l = trace_native_load(path, &error);
  g_assert_no_error(error);
  assert_same_workload(w, l);
  g_assert_null(l->ranks[2].ops);
  g_assert_null(l->schedule);
  test_rmdir(dir);
}

/* A generated workload's shared programs are stored once (format
 * version 3) and load shared again: the same resolved ops, the same ranks
 * on the same programs with the same peer deltas, as many ops stored, the
 * same replay GPU by GPU.  Its materialised copy (every rank owning its
 * ops) is still written as version 1, in a file several times larger, and
 * loads to the same ops. */
static void test_roundtrip_shared(void)
{
  g_autofree char *dir = test_tmpdir();
  g_autofree char *shared = g_build_filename(dir, "shared.h5", NULL);
  g_autofree char *flat = g_build_filename(dir, "flat.h5", NULL);
  g_autoptr(SimWorkload) w = gen_gpt("gpt3-125m", 2, 2, 2, 4, 512);
  g_assert_cmpuint(sim_workload_n_programs(w), ==, 2);
  GError *error = NULL;
  g_assert_true(trace_native_save(w, shared, &error));
  g_assert_no_error(error);
  g_assert_cmpuint(file_version(shared), ==, TRACE_NATIVE_VERSION_SHARED);
  g_autoptr(SimWorkload) l = trace_native_load(shared, &error);
  g_assert_no_error(error);
  assert_same_workload(w, l);
  assert_same_sharing(w, l);
  test_assert_same_replay(w, l, "A100-SXM4-80GB");

  g_autoptr(SimWorkload) m = gen_gpt("gpt3-125m", 2, 2, 2, 4, 512);
  g_assert_true(sim_workload_materialise(m, &error));
  g_assert_cmpuint(sim_workload_n_programs(m), ==, m->n_ranks);
  g_assert_true(trace_native_save(m, flat, &error));
  g_assert_no_error(error);
  g_assert_cmpuint(file_version(flat), ==, 1);
  g_autoptr(SimWorkload) lm = trace_native_load(flat, &error);
  g_assert_no_error(error);
  assert_same_workload(w, lm);
  assert_same_sharing(m, lm);
  /* 8 ranks on 2 programs: the ops take a quarter of the space. */
  g_test_message("shared file %" G_GUINT64_FORMAT " bytes, materialised %"
                 G_GUINT64_FORMAT, file_size(shared), file_size(flat));
  g_assert_cmpuint(file_size(shared) * 2, <, file_size(flat));
  test_rmdir(dir);
}

/* Files of the versions before shared programs load as they did: a
 * version-1 file written by h5py (tests/bad-input, docs/bad-input.md) and
 * a version-1 file of this writer (no shared programs, so the old
 * version), each with the ops it holds. */
static void test_old_versions(void)
{
  GError *error = NULL;
  const char *fixture = "tests/bad-input/native-ok.h5";
  g_assert_cmpuint(file_version(fixture), ==, 1);
  g_autoptr(SimWorkload) f = trace_native_load(fixture, &error);
  g_assert_no_error(error);
  g_assert_cmpuint(f->n_ranks, ==, 1);
  g_assert_cmpuint(f->ranks[0].n_ops, >, 0);
  g_assert_cmpuint(f->ranks[0].program, ==, SIM_NO_PROGRAM);

  g_autofree char *dir = test_tmpdir();
  g_autofree char *path = g_build_filename(dir, "edge.h5", NULL);
  g_autoptr(SimWorkload) e = edge_workload();
  g_assert_true(trace_native_save(e, path, &error));
  g_assert_no_error(error);
  g_assert_cmpuint(file_version(path), ==, 1);
  g_autoptr(SimWorkload) l = trace_native_load(path, &error);
  g_assert_no_error(error);
  assert_same_workload(e, l);
  assert_same_sharing(e, l);
  test_rmdir(dir);
}

/* Same workload, same bytes; saving over a file replaces it. */
static void test_deterministic_bytes(void)
{
  g_autofree char *dir = test_tmpdir();
  g_autofree char *a = g_build_filename(dir, "a.h5", NULL);
  g_autofree char *b = g_build_filename(dir, "b.h5", NULL);
  g_autoptr(SimWorkload) w = gen_gpt("gpt3-125m", 2, 1, 2, 2, 256);
  g_autoptr(SimWorkload) e = edge_workload();
  GError *error = NULL;
  /* b first holds another trace, then is replaced. */
  g_assert_true(trace_native_save(e, b, &error));
  g_assert_true(trace_native_save(w, a, &error));
  g_assert_true(trace_native_save(w, b, &error));
  g_assert_no_error(error);
  g_autofree char *ca = NULL, *cb = NULL;
  gsize na = 0, nb = 0;
  g_assert_true(g_file_get_contents(a, &ca, &na, NULL));
  g_assert_true(g_file_get_contents(b, &cb, &nb, NULL));
  g_assert_cmpmem(ca, na, cb, nb);
  g_assert_cmpuint(dir_entries(dir), ==, 2);
  test_rmdir(dir);
}

/* ---- failed writes leave nothing behind --------------------------------------- */

static void test_save_errors(void)
{
  g_autofree char *dir = test_tmpdir();
  g_autoptr(SimWorkload) w = edge_workload();
  GError *error = NULL;

  /* A directory as the target. */
  g_autofree char *sub = g_build_filename(dir, "d.h5", NULL);
  g_assert_cmpint(g_mkdir(sub, 0755), ==, 0);
  g_assert_false(trace_native_save(w, sub, &error));
  g_assert_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_IO);
  g_assert_nonnull(strstr(error->message, sub));
  g_assert_nonnull(strstr(error->message, "directory"));
  g_clear_error(&error);

  /* A directory that does not exist. */
  g_autofree char *nodir = g_build_filename(dir, "no", "such", "t.h5", NULL);
  g_assert_false(trace_native_save(w, nodir, &error));
  g_assert_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_IO);
  g_assert_nonnull(strstr(error->message, nodir));
  g_clear_error(&error);

  /* A failure half-way (an invalid provenance key, found after the ops
   * were written): the old file at the target survives, no temporary file
   * is left. */
  g_autofree char *path = g_build_filename(dir, "keep.h5", NULL);
  g_assert_true(trace_native_save(w, path, &error));
  g_autofree char *before = NULL;
  gsize n_before = 0;
  g_assert_true(g_file_get_contents(path, &before, &n_before, NULL));
  g_autoptr(SimWorkload) bad = gen_gpt("gpt3-125m", 1, 1, 1, 1, 128);
  g_hash_table_insert(bad->provenance, g_strdup("bad\xff"), g_strdup("x"));
  g_assert_false(trace_native_save(bad, path, &error));
  g_assert_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_IO);
  g_assert_nonnull(strstr(error->message, path));
  g_clear_error(&error);
  g_autofree char *after = NULL;
  gsize n_after = 0;
  g_assert_true(g_file_get_contents(path, &after, &n_after, NULL));
  g_assert_cmpmem(before, n_before, after, n_after);
  g_assert_cmpuint(dir_entries(dir), ==, 2); /* d.h5 and keep.h5 */

  /* The disk fills up (file size limit): HDF5's writes fail; clean error,
   * old file intact, nothing left behind. */
  struct rlimit old_lim, lim;
  g_assert_cmpint(getrlimit(RLIMIT_FSIZE, &old_lim), ==, 0);
  void (*old_sig)(int) = signal(SIGXFSZ, SIG_IGN);
  g_autoptr(SimWorkload) big = gen_gpt("gpt3-125m", 2, 2, 2, 8, 512);
  lim = old_lim;
  lim.rlim_cur = 64 * 1024;
  g_assert_cmpint(setrlimit(RLIMIT_FSIZE, &lim), ==, 0);
  gboolean ok = trace_native_save(big, path, &error);
  g_assert_cmpint(setrlimit(RLIMIT_FSIZE, &old_lim), ==, 0);
  signal(SIGXFSZ, old_sig);
  g_assert_false(ok);
  g_assert_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_IO);
  g_assert_nonnull(strstr(error->message, path));
  g_test_message("disk-full error: %s", error->message);
  g_clear_error(&error);
  g_clear_pointer(&after, g_free);
  g_assert_true(g_file_get_contents(path, &after, &n_after, NULL));
  g_assert_cmpmem(before, n_before, after, n_after);
  g_assert_cmpuint(dir_entries(dir), ==, 2);

  g_rmdir(sub);
  test_rmdir(dir);
}

/* ---- damaged and foreign files ------------------------------------------------- */

/* Opens a valid saved trace read-write for mutation (HDF5 quiet). */
static hid_t open_rw(const char *path)
{
  hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
  g_assert_cmpint(f, >=, 0);
  return f;
}

static void write_u32_dataset(hid_t loc, const char *name, const guint32 *v,
                              hsize_t n)
{
  hid_t s = H5Screate_simple(1, &n, NULL);
  hid_t d = H5Dcreate2(loc, name, H5T_NATIVE_UINT32, s, H5P_DEFAULT,
                       H5P_DEFAULT, H5P_DEFAULT);
  g_assert_cmpint(d, >=, 0);
  g_assert_cmpint(H5Dwrite(d, H5T_NATIVE_UINT32, H5S_ALL, H5S_ALL,
                           H5P_DEFAULT, v), >=, 0);
  H5Dclose(d);
  H5Sclose(s);
}

typedef enum {
  M_NONE,
  M_NO_FORMAT,
  M_VERSION,
  M_MISSING_OPS,
  M_MISSING_RANK,
  M_MISSING_GROUPS,
  M_OPS_WRONG_TYPE,
  M_OPS_MISSING_MEMBER,
  M_STRINGS_FIXED,
  M_DUP_STRINGS,
  M_SHAPE_INDEX,
  M_STREAM_OFF,
  M_SHAPES_2D,
  M_ATTR_TYPE,
  /* Shared programs (format version 3; the file of shared_workload()): */
  M_PROGRAM_RANGE,
  M_PATCH_RANGE,
  M_DELTA0,
  M_DELTA_SHORT,
  M_DELTA_MISSING,
  M_DELTA_SHIFT,
  M_PROGRAM_AND_OPS,
  M_UNUSED_PROGRAM,
  M_NO_PROGRAMS,
  M_MISSING_PROGRAM
} Mutation;

/* Replaces (or creates) rank 1's attribute peer_delta with n values. */
static void write_delta(hid_t f, const guint32 *v, hsize_t n)
{
  hid_t g = H5Gopen2(f, "/ranks/1", H5P_DEFAULT);
  if (H5Aexists(g, "peer_delta") > 0)
    g_assert_cmpint(H5Adelete(g, "peer_delta"), >=, 0);
  hid_t s = H5Screate_simple(1, &n, NULL);
  hid_t a = H5Acreate2(g, "peer_delta", H5T_NATIVE_UINT32, s, H5P_DEFAULT,
                       H5P_DEFAULT);
  g_assert_cmpint(H5Awrite(a, H5T_NATIVE_UINT32, v), >=, 0);
  H5Aclose(a);
  H5Sclose(s);
  H5Gclose(g);
}

static void mutate(const char *path, Mutation m)
{
  hid_t f = open_rw(path);
  switch (m) {
  case M_NONE:
    break;
  case M_NO_FORMAT:
    g_assert_cmpint(H5Adelete(f, "format"), >=, 0);
    break;
  case M_VERSION: {
    guint32 v = 99;
    hid_t a = H5Aopen(f, "format_version", H5P_DEFAULT);
    g_assert_cmpint(H5Awrite(a, H5T_NATIVE_UINT32, &v), >=, 0);
    H5Aclose(a);
    break;
  }
  case M_MISSING_OPS:
    g_assert_cmpint(H5Ldelete(f, "/ranks/1/ops", H5P_DEFAULT), >=, 0);
    break;
  case M_MISSING_RANK:
    g_assert_cmpint(H5Ldelete(f, "/ranks/2", H5P_DEFAULT), >=, 0);
    break;
  case M_MISSING_GROUPS:
    g_assert_cmpint(H5Ldelete(f, "/groups", H5P_DEFAULT), >=, 0);
    break;
  case M_OPS_WRONG_TYPE: {
    g_assert_cmpint(H5Ldelete(f, "/ranks/0/ops", H5P_DEFAULT), >=, 0);
    hid_t g = H5Gopen2(f, "/ranks/0", H5P_DEFAULT);
    guint32 v[4] = { 1, 2, 3, 4 };
    write_u32_dataset(g, "ops", v, 4);
    H5Gclose(g);
    break;
  }
  case M_OPS_MISSING_MEMBER: {
    g_assert_cmpint(H5Ldelete(f, "/ranks/0/ops", H5P_DEFAULT), >=, 0);
    hid_t t = H5Tcreate(H5T_COMPOUND, 16);
    H5Tinsert(t, "ref_ns", 0, H5T_NATIVE_INT64);
    H5Tinsert(t, "shape", 8, H5T_NATIVE_UINT32);
    H5Tinsert(t, "name", 12, H5T_NATIVE_UINT32);
    hsize_t n = 1;
    hid_t s = H5Screate_simple(1, &n, NULL);
    hid_t d = H5Dcreate2(f, "/ranks/0/ops", t, s, H5P_DEFAULT, H5P_DEFAULT,
                         H5P_DEFAULT);
    g_assert_cmpint(d, >=, 0);
    H5Dclose(d);
    H5Sclose(s);
    H5Tclose(t);
    break;
  }
  case M_STRINGS_FIXED: {
    g_assert_cmpint(H5Ldelete(f, "/strings", H5P_DEFAULT), >=, 0);
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, 8);
    hsize_t n = 2;
    hid_t s = H5Screate_simple(1, &n, NULL);
    hid_t d = H5Dcreate2(f, "/strings", t, s, H5P_DEFAULT, H5P_DEFAULT,
                         H5P_DEFAULT);
    g_assert_cmpint(H5Dwrite(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                             "abcdefghijklmnop"), >=, 0);
    H5Dclose(d);
    H5Sclose(s);
    H5Tclose(t);
    break;
  }
  case M_DUP_STRINGS:
  case M_SHAPE_INDEX:
  case M_STREAM_OFF: {
    if (m == M_DUP_STRINGS) {
      /* Entries 0 and 1 get the same text. */
      hid_t d = H5Dopen2(f, "/strings", H5P_DEFAULT);
      hid_t t = H5Dget_type(d);
      hid_t space = H5Dget_space(d);
      hsize_t n = (hsize_t)H5Sget_simple_extent_npoints(space);
      g_assert_cmpuint(n, >=, 3);
      g_autoptr(GPtrArray) all = g_ptr_array_new_with_free_func(g_free);
      for (hsize_t i = 0; i < n; i++)
        g_ptr_array_add(all, i < 2 ? g_strdup("same")
                                   : g_strdup_printf("x%u", (guint)i));
      g_assert_cmpint(H5Dwrite(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                               all->pdata), >=, 0);
      H5Sclose(space);
      H5Tclose(t);
      H5Dclose(d);
    } else if (m == M_SHAPE_INDEX) {
      /* rank 1's first op names shape 999 */
      hid_t d = H5Dopen2(f, "/ranks/1/ops", H5P_DEFAULT);
      hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(guint32));
      H5Tinsert(t, "shape", 0, H5T_NATIVE_UINT32);
      hid_t fs = H5Dget_space(d);
      hsize_t start = 0, count = 1;
      H5Sselect_hyperslab(fs, H5S_SELECT_SET, &start, NULL, &count, NULL);
      hid_t ms = H5Screate_simple(1, &count, NULL);
      guint32 v = 999;
      g_assert_cmpint(H5Dwrite(d, t, ms, fs, H5P_DEFAULT, &v), >=, 0);
      H5Sclose(ms);
      H5Sclose(fs);
      H5Tclose(t);
      H5Dclose(d);
    } else {
      g_assert_cmpint(H5Ldelete(f, "/ranks/0/stream_off", H5P_DEFAULT), >=,
                      0);
      hid_t g = H5Gopen2(f, "/ranks/0", H5P_DEFAULT);
      guint32 v[3] = { 0, 7, 3 };
      write_u32_dataset(g, "stream_off", v, 3);
      H5Gclose(g);
    }
    break;
  }
  case M_SHAPES_2D: {
    g_assert_cmpint(H5Ldelete(f, "/shapes", H5P_DEFAULT), >=, 0);
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(SimShape));
    H5Tinsert(t, "flops", 0, H5T_NATIVE_DOUBLE);
    H5Tinsert(t, "bytes", 8, H5T_NATIVE_DOUBLE);
    H5Tinsert(t, "name", 16, H5T_NATIVE_UINT32);
    H5Tinsert(t, "klass", 20, H5T_NATIVE_UINT8);
    H5Tinsert(t, "coll", 21, H5T_NATIVE_UINT8);
    H5Tinsert(t, "tensor", 22, H5T_NATIVE_UINT8);
    hsize_t n[2] = { 2, 2 };
    hid_t s = H5Screate_simple(2, n, NULL);
    hid_t d = H5Dcreate2(f, "/shapes", t, s, H5P_DEFAULT, H5P_DEFAULT,
                         H5P_DEFAULT);
    g_assert_cmpint(d, >=, 0);
    H5Dclose(d);
    H5Sclose(s);
    H5Tclose(t);
    break;
  }
  case M_PROGRAM_RANGE: {
    /* (H5Aopen_by_name from the file fails to write here, HDF5 1.10.8;
     * through the group it works.) */
    guint32 v = 99;
    hid_t g = H5Gopen2(f, "/ranks/1", H5P_DEFAULT);
    hid_t a = H5Aopen(g, "program", H5P_DEFAULT);
    g_assert_cmpint(H5Awrite(a, H5T_NATIVE_UINT32, &v), >=, 0);
    H5Aclose(a);
    H5Gclose(g);
    break;
  }
  case M_PATCH_RANGE: {
    /* program 0's first op gets patch 7 */
    hid_t d = H5Dopen2(f, "/programs/0/ops", H5P_DEFAULT);
    hid_t t = H5Tcreate(H5T_COMPOUND, 1);
    H5Tinsert(t, "patch", 0, H5T_NATIVE_UINT8);
    hid_t fs = H5Dget_space(d);
    hsize_t start = 0, count = 1;
    H5Sselect_hyperslab(fs, H5S_SELECT_SET, &start, NULL, &count, NULL);
    hid_t ms = H5Screate_simple(1, &count, NULL);
    guint8 v = 7;
    g_assert_cmpint(H5Dwrite(d, t, ms, fs, H5P_DEFAULT, &v), >=, 0);
    H5Sclose(ms);
    H5Sclose(fs);
    H5Tclose(t);
    H5Dclose(d);
    break;
  }
  case M_DELTA0: {
    guint32 v[SIM_PATCH_COUNT] = { 5, 0, 0, 0 };
    write_delta(f, v, SIM_PATCH_COUNT);
    break;
  }
  case M_DELTA_SHORT: {
    guint32 v[SIM_PATCH_COUNT - 1] = { 0, 1, 1 };
    write_delta(f, v, SIM_PATCH_COUNT - 1);
    break;
  }
  case M_DELTA_MISSING: {
    hid_t g = H5Gopen2(f, "/ranks/1", H5P_DEFAULT);
    g_assert_cmpint(H5Adelete(g, "peer_delta"), >=, 0);
    H5Gclose(g);
    break;
  }
  case M_DELTA_SHIFT: {
    /* Well-formed, but the groups and peers it names do not exist. */
    guint32 v[SIM_PATCH_COUNT] = { 0, 1000, 1000, 1000 };
    write_delta(f, v, SIM_PATCH_COUNT);
    break;
  }
  case M_PROGRAM_AND_OPS:
    g_assert_cmpint(H5Ocopy(f, "/programs/0/ops", f, "/ranks/1/ops",
                            H5P_DEFAULT, H5P_DEFAULT), >=, 0);
    break;
  case M_UNUSED_PROGRAM: {
    hid_t g = H5Gopen2(f, "/programs", H5P_DEFAULT);
    H5G_info_t info;
    g_assert_cmpint(H5Gget_info(g, &info), >=, 0);
    char name[16];
    g_snprintf(name, sizeof name, "%u", (guint)info.nlinks);
    g_assert_cmpint(H5Ocopy(g, "0", g, name, H5P_DEFAULT, H5P_DEFAULT), >=,
                    0);
    H5Gclose(g);
    break;
  }
  case M_NO_PROGRAMS:
    g_assert_cmpint(H5Ldelete(f, "/programs", H5P_DEFAULT), >=, 0);
    break;
  case M_MISSING_PROGRAM:
    g_assert_cmpint(H5Ldelete(f, "/programs/0", H5P_DEFAULT), >=, 0);
    break;
  case M_ATTR_TYPE: {
    g_assert_cmpint(H5Adelete(f, "n_ranks"), >=, 0);
    hid_t s = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(f, "n_ranks", H5T_NATIVE_DOUBLE, s, H5P_DEFAULT,
                         H5P_DEFAULT);
    double v = 3.0;
    H5Awrite(a, H5T_NATIVE_DOUBLE, &v);
    H5Aclose(a);
    H5Sclose(s);
    break;
  }
  }
  g_assert_cmpint(H5Fclose(f), >=, 0);
}

/* Rewrites the checksum record of a file changed behind the writer's back
 * (the format of docs/trace-files.md), so the loader's own checks run. */
static void reseal(const char *path)
{
  g_autofree char *bytes = NULL;
  gsize n = 0;
  g_assert_true(g_file_get_contents(path, &bytes, &n, NULL));
  g_assert_cmpuint(n, >, 512);
  g_assert_true(g_str_has_prefix(bytes, "joulesim-trace\ncrc32 "));
  uLong crc = crc32_z(0L, (const Bytef *)bytes + 512, n - 512);
  memset(bytes, 0, 512);
  g_snprintf(bytes, 512, "joulesim-trace\ncrc32 %08lx\nlength %zu\n", crc,
             n - 512);
  g_assert_true(g_file_set_contents(path, bytes, (gssize)n, NULL));
}

typedef struct {
  const char *name;
  Mutation m;
  gint code;
  const char *needle; /* must appear in the message (besides the path) */
  gboolean shared;    /* mutate shared_workload()'s file, not the edge's */
} BadCase;

/* 4 ranks on 2 shared programs (TP 2, PP 2): format version 3. */
static SimWorkload *shared_workload(void)
{
  SimWorkload *w = gen_gpt("gpt3-125m", 2, 2, 1, 2, 128);
  g_assert_cmpuint(sim_workload_n_programs(w), ==, 2);
  g_assert_cmpuint(w->ranks[1].program, !=, SIM_NO_PROGRAM);
  return w;
}

static const BadCase bad_cases[] = {
  { "no-format", M_NO_FORMAT, TRACE_NATIVE_ERROR_FORMAT,
    "not a joulesim", FALSE },
  { "newer-version", M_VERSION, TRACE_NATIVE_ERROR_VERSION,
    "version 99", FALSE },
  { "missing-ops", M_MISSING_OPS, TRACE_NATIVE_ERROR_FORMAT,
    "/ranks/1/ops is missing", FALSE },
  { "missing-rank", M_MISSING_RANK, TRACE_NATIVE_ERROR_FORMAT,
    "n_ranks", FALSE },
  { "missing-groups", M_MISSING_GROUPS, TRACE_NATIVE_ERROR_FORMAT,
    "/groups is missing", FALSE },
  { "ops-wrong-type", M_OPS_WRONG_TYPE, TRACE_NATIVE_ERROR_FORMAT,
    "/ranks/0/ops has integer records, expected compound", FALSE },
  { "ops-missing-member", M_OPS_MISSING_MEMBER, TRACE_NATIVE_ERROR_FORMAT,
    "lacks the member 'peer'", FALSE },
  { "strings-fixed", M_STRINGS_FIXED, TRACE_NATIVE_ERROR_FORMAT,
    "/strings must hold variable-length strings", FALSE },
  { "duplicate-strings", M_DUP_STRINGS, TRACE_NATIVE_ERROR_FORMAT,
    "repeats entry 0", FALSE },
  { "shape-out-of-range", M_SHAPE_INDEX, TRACE_NATIVE_ERROR_FORMAT,
    "rank 1 op 0: shape 999 out of range", FALSE },
  { "bad-stream-offsets", M_STREAM_OFF, TRACE_NATIVE_ERROR_FORMAT,
    "/ranks/0/stream_off", FALSE },
  { "two-dimensional", M_SHAPES_2D, TRACE_NATIVE_ERROR_FORMAT,
    "/shapes must be one-dimensional", FALSE },
  { "attribute-type", M_ATTR_TYPE, TRACE_NATIVE_ERROR_FORMAT,
    "'n_ranks' of the root group must be one integer", FALSE },
  { "program-out-of-range", M_PROGRAM_RANGE, TRACE_NATIVE_ERROR_FORMAT,
    "/ranks/1 runs program 99, but /programs holds 2", TRUE },
  { "patch-out-of-range", M_PATCH_RANGE, TRACE_NATIVE_ERROR_FORMAT,
    "/programs/0/ops[0]: patch 7 out of range (0 to 3)", TRUE },
  { "peer-delta-0", M_DELTA0, TRACE_NATIVE_ERROR_FORMAT,
    "/ranks/1: peer_delta[0] is 5", TRUE },
  { "peer-delta-short", M_DELTA_SHORT, TRACE_NATIVE_ERROR_FORMAT,
    "attribute 'peer_delta' of /ranks/1 must be a list of 4 integers", TRUE },
  { "peer-delta-missing", M_DELTA_MISSING, TRACE_NATIVE_ERROR_FORMAT,
    "attribute 'peer_delta' of /ranks/1 is missing", TRUE },
  { "peer-delta-shift", M_DELTA_SHIFT, TRACE_NATIVE_ERROR_FORMAT,
    "inconsistent trace: rank 1 op ", TRUE },
  { "program-and-ops", M_PROGRAM_AND_OPS, TRACE_NATIVE_ERROR_FORMAT,
    "/ranks/1 runs program 0 and also holds /ranks/1/ops", TRUE },
  { "unused-program", M_UNUSED_PROGRAM, TRACE_NATIVE_ERROR_FORMAT,
    "/programs/2 is run by no rank", TRUE },
  { "no-programs", M_NO_PROGRAMS, TRACE_NATIVE_ERROR_FORMAT,
    "/ranks/0 runs program 0, but /programs holds 0", TRUE },
  { "missing-program", M_MISSING_PROGRAM, TRACE_NATIVE_ERROR_FORMAT,
    "group /programs/0 is missing", TRUE },
};

static void test_bad_file(gconstpointer data)
{
  const BadCase *bc = data;
  g_autofree char *dir = test_tmpdir();
  g_autofree char *path = g_build_filename(dir, "bad.h5", NULL);
  g_autoptr(SimWorkload) w = bc->shared ? shared_workload()
                                        : edge_workload();
  GError *error = NULL;
  g_assert_true(trace_native_save(w, path, &error));
  H5E_auto2_t fn;
  void *fd;
  H5Eget_auto2(H5E_DEFAULT, &fn, &fd);
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
  mutate(path, bc->m);
  H5Eset_auto2(H5E_DEFAULT, fn, fd);
  /* Unsealed, the change is caught by the checksum... */
  SimWorkload *l0 = trace_native_load(path, &error);
  g_assert_null(l0);
  g_assert_nonnull(error);
  g_assert_true(error->domain == TRACE_NATIVE_ERROR);
  g_assert_true(strstr(error->message, "damaged") != NULL ||
                strstr(error->message, "extended") != NULL);
  g_clear_error(&error);
  /* ...resealed, by the structural checks. */
  reseal(path);
  SimWorkload *l = trace_native_load(path, &error);
  g_assert_null(l);
  g_assert_error(error, TRACE_NATIVE_ERROR, bc->code);
  g_test_message("%s: %s", bc->name, error->message);
  g_assert_true(g_str_has_prefix(error->message, path));
  if (strstr(error->message, bc->needle) == NULL)
    g_error("message lacks '%s': %s", bc->needle, error->message);
  g_clear_error(&error);
  /* HDF5's own error printing is restored after a failure. */
  H5E_auto2_t fn2;
  void *fd2;
  H5Eget_auto2(H5E_DEFAULT, &fn2, &fd2);
  g_assert_true(fn2 == fn && fd2 == fd);
  test_rmdir(dir);
}

/* Files that are not (complete) HDF5: missing, a directory, empty, text,
 * truncated at several points. */
static void test_not_hdf5(void)
{
  g_autofree char *dir = test_tmpdir();
  GError *error = NULL;
  struct {
    const char *name;
    const char *content;
    const char *needle;
  } cases[] = {
    { "missing.h5", NULL, "no such file" },
    { "empty.h5", "", "not an HDF5 file" },
    { "text.h5", "{\"traceEvents\": []}\n", "not an HDF5 file" },
  };
  for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *p = g_build_filename(dir, cases[i].name, NULL);
    if (cases[i].content != NULL)
      g_assert_true(g_file_set_contents(p, cases[i].content, -1, NULL));
    g_assert_null(trace_native_load(p, &error));
    g_assert_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_IO);
    g_assert_nonnull(strstr(error->message, p));
    g_assert_nonnull(strstr(error->message, cases[i].needle));
    g_clear_error(&error);
    g_assert_false(trace_native_probe(p));
  }
  g_assert_null(trace_native_load(dir, &error));
  g_assert_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_IO);
  g_assert_nonnull(strstr(error->message, "directory"));
  g_clear_error(&error);

  /* Truncations of a valid file past its user block (a cut inside the
   * 512-byte block leaves no HDF5 signature at all): every one fails
   * cleanly, naming the truncation. */
  g_autofree char *full = g_build_filename(dir, "full.h5", NULL);
  g_autoptr(SimWorkload) w = gen_gpt("gpt3-125m", 2, 1, 1, 2, 256);
  g_assert_true(trace_native_save(w, full, &error));
  g_autofree char *bytes = NULL;
  gsize n = 0;
  g_assert_true(g_file_get_contents(full, &bytes, &n, NULL));
  g_autofree char *cut = g_build_filename(dir, "cut.h5", NULL);
  const double fractions[] = { 0.01, 0.1, 0.5, 0.9, 0.999 };
  for (gsize i = 0; i < G_N_ELEMENTS(fractions); i++) {
    gsize len = 512 + (gsize)((double)(n - 512) * fractions[i]);
    g_assert_true(g_file_set_contents(cut, bytes, (gssize)len, NULL));
    g_assert_null(trace_native_load(cut, &error));
    g_assert_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_IO);
    g_assert_nonnull(strstr(error->message, cut));
    g_assert_nonnull(strstr(error->message, "truncated"));
    g_test_message("truncated at %zu of %zu bytes: %s", len, n,
                   error->message);
    g_clear_error(&error);
  }
  test_rmdir(dir);
}

/* Flipping bytes anywhere in a file never crashes the loader: every result
 * is a valid workload or an error naming the file. */
static void test_corrupt_bytes(void)
{
  g_autofree char *dir = test_tmpdir();
  g_autofree char *full = g_build_filename(dir, "full.h5", NULL);
  g_autofree char *bad = g_build_filename(dir, "bad.h5", NULL);
  g_autoptr(SimWorkload) w = edge_workload();
  GError *error = NULL;
  g_assert_true(trace_native_save(w, full, &error));
  g_autofree char *bytes = NULL;
  gsize n = 0;
  g_assert_true(g_file_get_contents(full, &bytes, &n, NULL));
  guint64 state = 12345;
  guint loaded = 0, failed = 0;
  for (guint k = 0; k < 200; k++) {
    g_autofree char *copy = g_memdup2(bytes, n);
    for (guint j = 0; j < 4; j++) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      copy[(state >> 33) % n] ^= (char)(1 + (state >> 20) % 255);
    }
    g_assert_true(g_file_set_contents(bad, copy, (gssize)n, NULL));
    SimWorkload *l = trace_native_load(bad, &error);
    if (l != NULL) {
      g_assert_no_error(error);
      g_assert_true(sim_workload_validate(l, NULL));
      sim_workload_free(l);
      loaded++;
    } else {
      g_assert_nonnull(error);
      g_assert_nonnull(strstr(error->message, bad));
      g_clear_error(&error);
      failed++;
    }
  }
  /* The checksum catches every change. */
  g_assert_cmpuint(loaded, ==, 0);
  g_test_message("200 corrupted files: %u loaded, %u refused", loaded,
                 failed);
  test_rmdir(dir);
}

/* ---- info --------------------------------------------------------------------------- */

static void test_stats(void)
{
  g_autoptr(SimWorkload) w = gen_gpt("gpt3-125m", 2, 2, 2, 4, 512);
  TraceStats st;
  trace_stats_compute(w, &st);
  g_assert_cmpuint(st.n_ranks, ==, 8);
  g_assert_cmpuint(st.n_ops, ==, sim_workload_n_ops(w));
  guint64 sc = 0, sk = 0;
  for (int c = 0; c < SIM_CLASS_COUNT; c++)
    sc += st.by_class[c];
  for (int k = 0; k < SIM_OP_KIND_COUNT; k++)
    sk += st.by_kind[k];
  g_assert_cmpuint(sc, ==, st.n_ops);
  g_assert_cmpuint(sk, ==, st.n_ops);
  /* Busy time: an independent sum. */
  for (guint r = 0; r < w->n_ranks; r++) {
    gint64 busy = 0;
    for (guint32 i = 0; i < w->ranks[r].n_ops; i++)
      if (w->ranks[r].ops[i].kind == SIM_OP_KERNEL)
        busy += w->ranks[r].ops[i].ref_ns;
    g_assert_cmpint(st.busy_ns[r], ==, busy);
    g_assert_cmpint(busy, >, 0);
  }
  /* Megatron groups: TP (stride 1), DP (stride tp), embedding ties. */
  char label[32];
  trace_group_label(w, 0, label, sizeof label);
  g_assert_cmpstr(label, ==, "tp");
  trace_group_label(w, 4, label, sizeof label);
  g_assert_cmpstr(label, ==, "dp");
  trace_group_label(w, 8, label, sizeof label);
  g_assert_cmpstr(label, ==, "embedding");
  guint64 coll = 0;
  for (guint k = 0; k < st.groups->len; k++) {
    const TraceGroupStats *gs = &g_array_index(st.groups, TraceGroupStats, k);
    g_assert_cmpuint(gs->ops % 2, ==, 0); /* every group here has 2 ranks */
    g_assert_cmpuint(gs->calls * 2, ==, gs->ops);
    coll += gs->ops;
  }
  g_assert_cmpuint(coll, ==, st.by_kind[SIM_OP_COLLECTIVE]);
  g_assert_cmpuint(st.p2p_sends, ==, st.by_kind[SIM_OP_SEND]);
  trace_stats_clear(&st);

  GString *text = g_string_new(NULL);
  trace_info(w, text);
  g_assert_nonnull(strstr(text->str, "ranks         8\n"));
  g_assert_nonnull(strstr(text->str, "ops per class"));
  g_assert_nonnull(strstr(text->str, "  tp "));
  g_assert_nonnull(strstr(text->str, "model            gpt3-125m"));
  g_string_free(text, TRUE);

  /* Without a layout, groups are named by size. */
  g_autoptr(SimWorkload) e = edge_workload();
  trace_group_label(e, 0, label, sizeof label);
  g_assert_cmpstr(label, ==, "2 ranks");
}

/* ---- a larger round trip ----------------------------------------------------------- */

/* 100,000 ops on 16 ranks save and load exactly.  How fast is measured by
 * `joulesim bench` (native/6.7b-8, native/175b-1024), not here. */
static void test_roundtrip_large(void)
{
  g_autofree char *dir = test_tmpdir();
  g_autofree char *path = g_build_filename(dir, "large.h5", NULL);
  g_autoptr(SimWorkload) w = gen_gpt("gpt3-1.3b", 2, 2, 4, 16, 1024);
  GError *error = NULL;
  g_assert_true(trace_native_save(w, path, &error));
  g_assert_no_error(error);
  g_autoptr(SimWorkload) l = trace_native_load(path, &error);
  g_assert_no_error(error);
  assert_same_workload(w, l);
  g_test_message("%" G_GUINT64_FORMAT " ops, %u ranks",
                 sim_workload_n_ops(w), w->n_ranks);
  test_rmdir(dir);
}

/* The real Kineto traces: tests/data/traces (when the importer's tests put
 * them there) or the shared data set.  Returns a sorted list (may be
 * empty). */
static GPtrArray *kineto_traces(void)
{
  static const char *const dirs[] = { "tests/data/traces/kineto",
                                      "tests/data/traces",
                                      "../shared/data/traces/kineto" };
  GPtrArray *out = g_ptr_array_new_with_free_func(g_free);
  for (gsize d = 0; d < G_N_ELEMENTS(dirs) && out->len == 0; d++) {
    GDir *dir = g_dir_open(dirs[d], 0, NULL);
    if (dir == NULL)
      continue;
    const char *n;
    while ((n = g_dir_read_name(dir)) != NULL)
      if (g_str_has_suffix(n, ".json.gz") || g_str_has_suffix(n, ".json"))
        g_ptr_array_add(out, g_build_filename(dirs[d], n, NULL));
    g_dir_close(dir);
  }
  return out;
}

static gint cmp_path(gconstpointer a, gconstpointer b)
{
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Imported traces round-trip exactly too.  Import against native load
 * is timed by `joulesim bench --trace FILE` (import/file-N), not here. */
static void test_imported_roundtrip(void)
{
  g_autoptr(GPtrArray) files = kineto_traces();
  g_ptr_array_sort(files, cmp_path);
  if (files->len == 0) {
    g_test_skip("no Kineto traces in tests/data/traces or "
                "../shared/data/traces/kineto");
    return;
  }
  g_autofree char *dir = test_tmpdir();
  g_autoptr(GpuCatalogue) cat = gpu_catalogue_new();
  for (guint i = 0; i < files->len; i++) {
    const char *src = g_ptr_array_index(files, i);
    TraceImportOptions opt;
    memset(&opt, 0, sizeof opt);
    opt.catalogue = cat;
    GError *error = NULL;
    g_autoptr(SimWorkload) w = trace_import(&src, 1, &opt, &error);
    g_assert_no_error(error);
    g_autofree char *base = g_path_get_basename(src);
    g_autofree char *name = g_strconcat(base, ".h5", NULL);
    g_autofree char *path = g_build_filename(dir, name, NULL);
    g_assert_true(trace_native_save(w, path, &error));
    g_assert_no_error(error);
    g_autoptr(SimWorkload) l = trace_native_load(path, &error);
    g_assert_no_error(error);
    assert_same_workload(w, l);
    g_test_message("%s: %" G_GUINT64_FORMAT " ops", base,
                   sim_workload_n_ops(w));
  }
  test_rmdir(dir);
}

/* ---- Lua ------------------------------------------------------------------------------ */

static gboolean run_lua(const char *src, GError **error)
{
  g_autoptr(JsSession) s = js_session_new(3);
  return js_run_string(s, "=test", src, error);
}

static void test_lua(void)
{
  g_autofree char *dir = test_tmpdir();
  g_autofree char *path = g_build_filename(dir, "w.h5", NULL);
  g_autofree char *src = g_strdup_printf(
    "local js = require 'joulesim'\n"
    "local path = '%s'\n"
    "local w = js.gpt{ model = 'gpt3-125m', tp = 2, pp = 2,\n"
    "                  microbatches = 2, seq_len = 256 }\n"
    "js.trace.save(w, path)\n"
    "local l = js.trace.load(path)\n"
    "assert(l.ranks == 4 and l.ops == w.ops and l.tp == 2)\n"
    "assert(l.label == 'w.h5', l.label)\n"
    "local i = js.trace.info(l)\n"
    "assert(i.ranks == 4 and i.ops == w.ops)\n"
    "assert(i.by_kind.kernel > 0 and i.by_class.gemm > 0)\n"
    "assert(i.collectives.tp.calls > 0 and i.collectives.tp.groups == 2)\n"
    "assert(#i.busy_s == 4 and i.busy_s[1] > 0)\n"
    "assert(i.busy_max_s >= i.busy_mean_s and i.busy_mean_s >= i.busy_min_s)\n"
    "assert(i.layout.tp == 2 and i.layout.schedule == '1f1b')\n"
    "assert(i.layout.ref_gpu == 'A100-SXM4-80GB')\n"
    "assert(i.provenance.model == 'gpt3-125m')\n"
    "assert(i.text:find('ops per class'))\n"
    "assert(i.streams.min >= 1 and i.p2p.sends > 0)\n"
    "local c = js.cluster{ gpus = 4 }\n"
    "local a = js.simulate{ cluster = c, workload = w }\n"
    "local b = js.simulate{ cluster = c, workload = l }\n"
    "assert(a.energy_j == b.energy_j and a.time_s == b.time_s)\n",
    path);
  GError *error = NULL;
  gboolean ok = run_lua(src, &error);
  if (!ok)
    g_printerr("%s\n", error->message);
  g_assert_no_error(error);

  struct {
    const char *src;
    const char *needle;
  } bad[] = {
    { "local js = require 'joulesim'\n"
      "js.trace.load('/no/such/trace.h5')\n",
      "test:2: js.trace.load: /no/such/trace.h5: cannot read a trace: no "
      "such file" },
    { "local js = require 'joulesim'\njs.trace.load()\n", "test:2:" },
    { "local js = require 'joulesim'\njs.trace.save(42, 'x.h5')\n",
      "js.trace.save: argument 'workload' must be a workload" },
    { "local js = require 'joulesim'\n"
      "local w = js.gpt{ model = 'gpt3-125m', microbatches = 1 }\n"
      "js.trace.save(w)\n",
      "test:3: js.trace.save: argument 2 must be the output file name" },
    { "local js = require 'joulesim'\n"
      "local w = js.gpt{ model = 'gpt3-125m', microbatches = 1 }\n"
      "js.trace.save(w, '/no/such/dir/x.h5')\n",
      "test:3: js.trace.save: /no/such/dir/x.h5" },
    { "local js = require 'joulesim'\njs.trace.import(42)\n",
      "js.trace.import: argument 1 must be a file name" },
    { "local js = require 'joulesim'\njs.trace.import{}\n",
      "give at least one trace file" },
    { "local js = require 'joulesim'\njs.trace.import{ 'a.json', gpuu = 'x' }\n",
      "unknown argument 'gpuu' (did you mean 'gpu'?)" },
    { "local js = require 'joulesim'\n"
      "js.trace.import{ 'a.json', gpu = 'B300' }\n",
      "test:2: js.trace.import:" },
    /* Errors after the file list is read: nothing may leak (run under
     * G_SLICE=always-malloc by make asan). */
    { "local js = require 'joulesim'\njs.trace.import{ 'a.json', 42 }\n",
      "js.trace.import: file 2 must be a string (got number)" },
    { "local js = require 'joulesim'\n"
      "js.trace.import('no-such-trace.json')\n",
      "test:2: js.trace.import: no-such-trace.json" },
    { "local js = require 'joulesim'\njs.trace.info('x')\n",
      "js.trace.info: argument 'workload' must be a workload" },
  };
  for (gsize i = 0; i < G_N_ELEMENTS(bad); i++) {
    g_assert_false(run_lua(bad[i].src, &error));
    g_assert_nonnull(error);
    if (strstr(error->message, bad[i].needle) == NULL)
      g_error("case %zu: message lacks '%s': %s", i, bad[i].needle,
              error->message);
    g_clear_error(&error);
  }
  test_rmdir(dir);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/native/roundtrip-gpt", test_roundtrip_gpt);
  g_test_add_func("/native/roundtrip-edge", test_roundtrip_edge);
  g_test_add_func("/native/roundtrip-shared", test_roundtrip_shared);
  g_test_add_func("/native/old-versions", test_old_versions);
  g_test_add_func("/native/deterministic-bytes", test_deterministic_bytes);
  g_test_add_func("/native/save-errors", test_save_errors);
  for (gsize i = 0; i < G_N_ELEMENTS(bad_cases); i++) {
    g_autofree char *name = g_strdup_printf("/native/bad-file/%s",
                                            bad_cases[i].name);
    g_test_add_data_func(name, &bad_cases[i], test_bad_file);
  }
  g_test_add_func("/native/not-hdf5", test_not_hdf5);
  g_test_add_func("/native/corrupt-bytes", test_corrupt_bytes);
  g_test_add_func("/native/stats", test_stats);
  g_test_add_func("/native/roundtrip-large", test_roundtrip_large);
  g_test_add_func("/native/imported-roundtrip", test_imported_roundtrip);
  g_test_add_func("/native/lua", test_lua);
  return g_test_run();
}
