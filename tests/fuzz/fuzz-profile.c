/* tests/fuzz/fuzz-profile.c -- libFuzzer target: the four CSV loaders of
 * measured profiles (traces/profile.c).
 *
 * Input: a mode byte, then the CSV text.
 *   'P' (or any byte = 0 mod 3)  profile_load: Perseus/Zeus
 *                                `stage,instruction,frequency,time,energy`
 *                                or per-kernel `kernel,sm_mhz,mem_mhz,...`
 *   'N' (= 1 mod 3)              profile_load_nvml: nvidia-smi samples CSV,
 *                                then "\n=====\n", then the windows CSV
 *   'R' (= 2 mod 3)              profile_load_run: `rank,time_s,energy_j`
 *
 * Checks: success or a PROFILE_ERROR naming the file; on success the
 * documented invariants of the result (traces/profile.h, top of
 * traces/profile.c): every op has points, sorted by (mem, sm) and
 * distinct, with finite positive time and energy, unique names that
 * profile_find() finds; profile_op_at() returns each measured point
 * exactly, interpolates between neighbours within their bounds and
 * refuses clocks outside the measured range with PROFILE_ERROR_RANGE;
 * a measured run has ranks 0..n-1 in order with positive figures.
 */
#include "tests/fuzz/fuzz.h"
#include "traces/profile.h"

#define PROFILE_SEP "\n=====\n"

static void check_op(const Profile *p, const ProfileOp *op)
{
  FUZZ_CHECK(op->name != NULL, "op without a name");
  FUZZ_CHECK(op->points->len > 0, "op '%s' has no points", op->name);
  FUZZ_CHECK(profile_find(p, op->name) == op, "profile_find('%s')",
             op->name);
  if (p->format == PROFILE_PERSEUS) {
    FUZZ_CHECK(op->instruction != NULL, "Perseus op without instruction");
    FUZZ_CHECK(profile_find_stage(p, op->stage, op->instruction) == op,
               "profile_find_stage(%u, %s)", op->stage, op->instruction);
    FUZZ_CHECK(op->stage < p->n_stages, "stage %u >= n_stages %u",
               op->stage, p->n_stages);
  }
  FUZZ_CHECK(op->count > 0 && isfinite(op->count), "count %g", op->count);
  FUZZ_CHECK(op->klass < SIM_CLASS_COUNT, "class %d", op->klass);
  const ProfilePoint *pts = (const ProfilePoint *)op->points->data;
  guint n = op->points->len;
  for (guint i = 0; i < n; i++) {
    FUZZ_CHECK(isfinite(pts[i].time_s) && pts[i].time_s > 0 &&
                   isfinite(pts[i].energy_j) && pts[i].energy_j > 0,
               "op '%s' point %u: time %g energy %g", op->name, i,
               pts[i].time_s, pts[i].energy_j);
    FUZZ_CHECK(pts[i].sm_mhz > 0, "op '%s': SM clock 0", op->name);
    if (i > 0)
      FUZZ_CHECK(pts[i - 1].mem_mhz < pts[i].mem_mhz ||
                     (pts[i - 1].mem_mhz == pts[i].mem_mhz &&
                      pts[i - 1].sm_mhz < pts[i].sm_mhz),
                 "op '%s': points %u and %u out of order or repeated",
                 op->name, i - 1, i);
  }
  /* Queries at the highest memory clock (mem 0). */
  g_autoptr(GArray) clocks = profile_op_clocks(op, 0);
  FUZZ_CHECK(clocks->len > 0, "op '%s': no clocks", op->name);
  guint top_mem = pts[n - 1].mem_mhz;
  for (guint i = 0; i < clocks->len; i++) {
    guint c = g_array_index(clocks, guint, i);
    if (i > 0)
      FUZZ_CHECK(g_array_index(clocks, guint, i - 1) < c,
                 "op '%s': clocks not ascending", op->name);
    double t = -1, e = -1;
    GError *err = NULL;
    FUZZ_CHECK(profile_op_at(op, c, 0, &t, &e, &err),
               "op '%s' at its measured %u MHz: %s", op->name, c,
               err->message);
    const ProfilePoint *pt = NULL;
    for (guint k = 0; k < n; k++)
      if (pts[k].mem_mhz == top_mem && pts[k].sm_mhz == c)
        pt = &pts[k];
    FUZZ_CHECK(pt != NULL && t == pt->time_s && e == pt->energy_j,
               "op '%s' at %u MHz: not the measured point", op->name, c);
    if (i + 1 < clocks->len) {
      guint c1 = g_array_index(clocks, guint, i + 1);
      guint mid = c + (c1 - c) / 2;
      double tm, em;
      FUZZ_CHECK(profile_op_at(op, mid, 0, &tm, &em, &err),
                 "op '%s' at %u MHz: %s", op->name, mid, err->message);
      double t1, e1;
      FUZZ_CHECK(profile_op_at(op, c1, 0, &t1, &e1, NULL), "op '%s' at %u",
                 op->name, c1);
      /* (Within rounding: lo + w * (hi - lo) may land an ulp outside.) */
      FUZZ_CHECK(tm >= MIN(t, t1) * (1 - 1e-12) &&
                     tm <= MAX(t, t1) * (1 + 1e-12) &&
                     em >= MIN(e, e1) * (1 - 1e-12) &&
                     em <= MAX(e, e1) * (1 + 1e-12),
                 "op '%s' at %u MHz: interpolation outside its neighbours",
                 op->name, mid);
    }
  }
  guint lo = g_array_index(clocks, guint, 0);
  guint hi = g_array_index(clocks, guint, clocks->len - 1);
  guint outside[2] = {lo - 1, hi + 1};
  for (int k = 0; k < 2; k++) {
    if ((k == 0 && lo == 0) || (k == 1 && hi == G_MAXUINT))
      continue;
    double t = -1;
    GError *err = NULL;
    FUZZ_CHECK(!profile_op_at(op, outside[k], 0, &t, NULL, &err),
               "op '%s' extrapolated to %u MHz", op->name, outside[k]);
    FUZZ_CHECK(g_error_matches(err, PROFILE_ERROR, PROFILE_ERROR_RANGE),
               "op '%s' at %u MHz: %s", op->name, outside[k], err->message);
    FUZZ_CHECK(t == -1, "op '%s': output written on error", op->name);
    g_error_free(err);
  }
}

static void check_profile(const Profile *p)
{
  FUZZ_CHECK(p->ops->len > 0, "a profile without ops");
  g_autoptr(GHashTable) names = g_hash_table_new(g_str_hash, g_str_equal);
  for (guint i = 0; i < p->ops->len; i++) {
    const ProfileOp *op = g_ptr_array_index(p->ops, i);
    FUZZ_CHECK(g_hash_table_add(names, op->name), "op name '%s' repeats",
               op->name);
    check_op(p, op);
  }
}

static void check_run(const GArray *ranks)
{
  FUZZ_CHECK(ranks->len > 0, "a measured run without ranks");
  for (guint i = 0; i < ranks->len; i++) {
    const ProfileRank *r = &g_array_index(ranks, ProfileRank, i);
    FUZZ_CHECK(r->rank == i, "rank %u at position %u", r->rank, i);
    FUZZ_CHECK(isfinite(r->time_s) && r->time_s > 0 &&
                   isfinite(r->energy_j) && r->energy_j > 0,
               "rank %u: time %g energy %g", i, r->time_s, r->energy_j);
  }
}

static int fuzz_profile_one(const guint8 *data, size_t size)
{
  guint8 mode = size > 0 ? data[0] : 'P';
  if (size > 0) {
    data++;
    size--;
  }
  int m = mode == 'P' ? 0 : mode == 'N' ? 1 : mode == 'R' ? 2 : mode % 3;
  GError *err = NULL;
  g_autofree char *a = fuzz_path("profile.csv");
  if (m == 0) {
    fuzz_write(a, data, size);
    g_autoptr(Profile) p = profile_load(a, &err);
    fuzz_check_outcome("profile_load", p != NULL, err, PROFILE_ERROR, a);
    if (p != NULL)
      check_profile(p);
  } else if (m == 1) {
    g_autoptr(GPtrArray) parts = fuzz_split(data, size, PROFILE_SEP, 2);
    g_autofree char *b = fuzz_path("windows.csv");
    gsize n0, n1 = 0;
    const void *d0 = g_bytes_get_data(g_ptr_array_index(parts, 0), &n0);
    const void *d1 = parts->len > 1
                         ? g_bytes_get_data(g_ptr_array_index(parts, 1), &n1)
                         : "";
    fuzz_write(a, d0, n0);
    fuzz_write(b, d1, n1);
    g_autoptr(Profile) p = profile_load_nvml(a, b, &err);
    /* Either file may be at fault: the message names one of them. */
    fuzz_check_outcome("profile_load_nvml", p != NULL, err, PROFILE_ERROR,
                       fuzz_tmpdir());
    if (p != NULL) {
      FUZZ_CHECK(p->format == PROFILE_KERNEL, "NVML profile not per-kernel");
      check_profile(p);
    }
  } else {
    fuzz_write(a, data, size);
    g_autoptr(GArray) ranks = profile_load_run(a, &err);
    fuzz_check_outcome("profile_load_run", ranks != NULL, err,
                       PROFILE_ERROR, a);
    if (ranks != NULL)
      check_run(ranks);
  }
  g_clear_error(&err);
  fuzz_clean_dir();
  return 0;
}

FUZZ_TARGET(fuzz_profile_one)
