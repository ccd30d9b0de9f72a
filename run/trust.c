/* run/trust.c -- see run/trust.h.
 *
 * Each part of a run adds one reason at its level; the run keeps the
 * reasons of its weakest level only, so they say why it is not better.
 */
#include "run/trust.h"

#include <string.h>

const char *js_trust_level_name(JsTrustLevel level)
{
  static const char *const names[] = {"validated", "calibrated",
                                      "estimated"};
  return (guint)level < G_N_ELEMENTS(names) ? names[level] : "?";
}

void js_trust_clear(JsTrust *t)
{
  if (t == NULL)
    return;
  if (t->reasons != NULL)
    g_ptr_array_unref(t->reasons);
  memset(t, 0, sizeof *t);
}

static void trust_init(JsTrust *t)
{
  t->level = JS_TRUST_VALIDATED;
  t->reasons = g_ptr_array_new_with_free_func(g_free);
}

/* One part at `level`, because of `reason` (owned, taken). */
static void add_part(JsTrust *t, JsTrustLevel level, char *reason)
{
  if (level > t->level) {
    g_ptr_array_set_size(t->reasons, 0);
    t->level = level;
  }
  if (level == t->level)
    g_ptr_array_add(t->reasons, reason);
  else
    g_free(reason);
}

/* A source without its leading "estimate: " or "fit ", for quoting. */
static const char *source_text(const GpuParam *p)
{
  const char *s = p->source != NULL ? p->source : "(no source)";
  if (g_str_has_prefix(s, "estimate: "))
    return s + strlen("estimate: ");
  return s;
}

/* The names of g's power terms whose basis is b, comma-separated, and the
 * first of them (NULL when none). */
static const GpuParam *terms_of(const GpuSpec *g, GpuBasis b, GString *names)
{
  const GpuParam *first = NULL;
  const char *n;
  for (guint i = 0; (n = gpu_power_term_name(i)) != NULL; i++) {
    const GpuParam *p = gpu_spec_param((GpuSpec *)g, n);
    if (gpu_param_basis(p) != b)
      continue;
    g_string_append_printf(names, "%s%s", names->len > 0 ? ", " : "", n);
    if (first == NULL)
      first = p;
  }
  return first;
}

/* ---- the parts ------------------------------------------------------------ */

static void gpu_part(const GpuSpec *g, JsTrust *t)
{
  const GpuCheck *k = gpu_heldout_check(g);
  if (k != NULL) {
    add_part(t, JS_TRUST_VALIDATED,
             g_strdup_printf("%s power model: held out in docs/fidelity.md "
                             "on %s", g->name, k->data));
    return;
  }
  g_autoptr(GString) est = g_string_new(NULL);
  const GpuParam *e = terms_of(g, GPU_BASIS_ESTIMATED, est);
  if (e != NULL) {
    add_part(t, JS_TRUST_ESTIMATED,
             g_strdup_printf("%s power terms are estimates: %s (%s); no "
                             "held-out check in docs/fidelity.md",
                             g->name, est->str, source_text(e)));
    return;
  }
  g_autoptr(GString) fit = g_string_new(NULL);
  const GpuParam *f = terms_of(g, GPU_BASIS_FITTED, fit);
  if (f != NULL)
    add_part(t, JS_TRUST_CALIBRATED,
             g_strdup_printf("%s power terms are fitted (%s: %s) but not "
                             "checked on held-out data in docs/fidelity.md",
                             g->name, fit->str, source_text(f)));
  else
    add_part(t, JS_TRUST_ESTIMATED,
             g_strdup_printf("%s power terms are neither fitted nor checked "
                             "(p_dyn_w: %s)", g->name,
                             source_text(&g->p_dyn_w)));
}

static void limit_part(const GpuSpec *g, double limit_w, JsTrust *t)
{
  double def = g->power_limit_w.v;
  if (limit_w <= 0 || limit_w >= def)
    return;
  double frac = gpu_checked_limit_fraction();
  double lo = frac > 0 ? frac * def : def;
  const GpuCheck *k = gpu_heldout_check(g);
  if (limit_w < lo)
    add_part(t, JS_TRUST_ESTIMATED,
             g_strdup_printf("power limit %.0f W is %.0f%% of the %s's "
                             "%.0f W default, below the %.0f%% (%.0f W) down "
                             "to which capping was checked (docs/fidelity.md, "
                             "the Zeus power-limit sweeps)",
                             limit_w, 100 * limit_w / def, g->name, def,
                             100 * frac, lo));
  else
    add_part(t, JS_TRUST_VALIDATED,
             g_strdup_printf("power limit %.0f W is %.0f%% of the %.0f W "
                             "default, within the %.0f%% down to which "
                             "capping was checked (docs/fidelity.md%s)",
                             limit_w, 100 * limit_w / def, def, 100 * frac,
                             k != NULL && k->min_limit_w > 0
                               ? ", on this GPU"
                               : ", on other GPUs' sweeps"));
}

static void boost_part(const GpuSpec *g, JsTrust *t)
{
  static const char *const terms[] = {"boost_window_ms", "boost_period_ms",
                                      "boost_step_mhz"};
  g_autoptr(GString) est = g_string_new(NULL);
  for (gsize i = 0; i < G_N_ELEMENTS(terms); i++)
    if (gpu_param_basis(gpu_spec_param((GpuSpec *)g, terms[i])) ==
        GPU_BASIS_ESTIMATED)
      g_string_append_printf(est, "%s%s", est->len > 0 ? ", " : "",
                             terms[i]);
  add_part(t, est->len > 0 ? JS_TRUST_ESTIMATED : JS_TRUST_CALIBRATED,
           g_strdup_printf("the boost controller (boost = \"controller\") "
                           "is not checked in docs/fidelity.md%s%s%s",
                           est->len > 0 ? " and its " : "",
                           est->len > 0 ? est->str : "",
                           est->len > 0 ? " are estimates" : ""));
}

/* Kernel shapes of w (ops of kind SIM_OP_KERNEL) and how many of them
 * have neither FLOPs nor bytes, so their time at other clocks or on
 * another GPU comes from the estimated class fractions (models/gpu.h,
 * gpu_class_time_fractions). */
static void count_relative(const SimWorkload *w, guint *n_kernel,
                           guint *n_relative)
{
  guint ns = w->shapes->len;
  g_autofree guint8 *seen = g_new0(guint8, MAX(ns, 1));
  for (guint r = 0; r < w->n_ranks; r++) {
    const SimRank *rk = &w->ranks[r];
    for (guint32 i = 0; i < rk->n_ops; i++)
      if (rk->ops[i].kind == SIM_OP_KERNEL && rk->ops[i].shape < ns)
        seen[rk->ops[i].shape] = 1;
  }
  *n_kernel = *n_relative = 0;
  for (guint s = 0; s < ns; s++) {
    if (!seen[s])
      continue;
    const SimShape *sh = &g_array_index(w->shapes, SimShape, s);
    (*n_kernel)++;
    if (!(sh->flops > 0) && !(sh->bytes > 0))
      (*n_relative)++;
  }
}

static void trace_part(const JsTrustRun *run, const char *importer,
                       JsTrust *t)
{
  /* The importer records "gpu_only" as host_ops without them. */
  const char *host = g_hash_table_lookup(run->w->provenance, "host_ops");
  if (host != NULL && strcmp(host, "gpu_only") != 0)
    add_part(t, JS_TRUST_VALIDATED,
             g_strdup_printf("the %s trace's replay with its host streams: "
                             "held out in docs/fidelity.md on the Kineto "
                             "traces, each step within 1.25%%", importer));
  else
    add_part(t, JS_TRUST_ESTIMATED,
             g_strdup_printf("the %s trace was imported without host "
                             "streams (gpu_only): that replay was 75-82%% "
                             "short of the measured steps in "
                             "docs/fidelity.md", importer));
  guint nk = 0, nrel = 0;
  count_relative(run->w, &nk, &nrel);
  if (nrel == 0)
    return;
  const char *ref = run->w->ref_gpu;
  if (run->clocks_changed)
    add_part(t, JS_TRUST_ESTIMATED,
             g_strdup_printf("%u of the trace's %u distinct kernels have no "
                             "FLOPs or bytes: their time at the clocks the "
                             "policy sets comes from estimated class "
                             "fractions "
                             "(docs/gpu-model.md, \"Kernels without "
                             "counters\")", nrel, nk));
  if (ref != NULL && g_strcmp0(ref, run->gpu->name) != 0)
    add_part(t, JS_TRUST_ESTIMATED,
             g_strdup_printf("%u of the trace's %u distinct kernels have no "
                             "FLOPs or bytes: on the %s they keep the times "
                             "recorded on the %s", nrel, nk, run->gpu->name,
                             ref));
}

static void workload_part(const JsTrustRun *run, JsTrust *t)
{
  GHashTable *pv = run->w->provenance;
  const char *importer = pv != NULL ? g_hash_table_lookup(pv, "importer")
                                    : NULL;
  const char *gen = pv != NULL ? g_hash_table_lookup(pv, "generator") : NULL;
  if (importer != NULL) {
    trace_part(run, importer, t);
  } else if (g_strcmp0(gen, "gpt") == 0) {
    const char *impl = g_hash_table_lookup(pv, "impl");
    add_part(t, JS_TRUST_VALIDATED,
             g_strdup_printf("the GPT generator's %s kernels: efficiency "
                             "factors held out in docs/fidelity.md (Megatron "
                             "weak-scaling even rows, the Merak Bloom 3B "
                             "runs)", impl != NULL ? impl : "megatron"));
  } else if (g_strcmp0(gen, "pipeline") == 0) {
    const char *prof = g_hash_table_lookup(pv, "profile");
    add_part(t, JS_TRUST_VALIDATED,
             g_strdup_printf("computations priced from the measured profile "
                             "%s (docs/fidelity.md: profiles held out within "
                             "0.05%%)", prof != NULL ? prof : "(unnamed)"));
  } else {
    add_part(t, JS_TRUST_ESTIMATED,
             g_strdup("the workload names no generator, importer or profile "
                      "in its provenance: its op costs are its builder's"));
  }
}

/* The node around the GPUs (models/node.h): node_energy_j and
 * facility_energy_j rest on its figures, energy_j does not.  A preset is
 * as good as its weakest part by its sources; figures a script gave are
 * checked nowhere. */
static void node_part(const NodeSpec *n, JsTrust *t)
{
  if (n == NULL || g_strcmp0(n->name, "none") == 0)
    return;
  const char *src = NULL;
  node_part_source(n, 0, &src);
  if (src == NULL) {
    add_part(t, JS_TRUST_ESTIMATED,
             g_strdup("node_energy_j and facility_energy_j rest on node "
                      "figures the script gave (js.cluster{ node = { ... } "
                      "}), not checked in docs/fidelity.md"));
    return;
  }
  g_autoptr(GString) est = g_string_new(NULL);
  g_autoptr(GString) fit = g_string_new(NULL);
  const char *fit_src = NULL, *part;
  for (guint i = 0; (part = node_part_source(n, i, &src)) != NULL; i++) {
    if (g_str_has_prefix(src, "estimate")) {
      g_string_append_printf(est, "%s%s", est->len > 0 ? ", " : "", part);
    } else if (g_str_has_prefix(src, "fit")) {
      g_string_append_printf(fit, "%s%s", fit->len > 0 ? ", " : "", part);
      if (fit_src == NULL)
        fit_src = src;
    }
  }
  if (est->len > 0)
    add_part(t, JS_TRUST_ESTIMATED,
             g_strdup_printf("node_energy_j and facility_energy_j rest on "
                             "the %s node's estimates: %s (models/node.c; "
                             "energy_j, the GPUs', does not)%s%s%s%s",
                             n->name, est->str,
                             fit->len > 0 ? "; " : "", fit->str,
                             fit->len > 0 ? " fitted " : "",
                             fit_src != NULL ? fit_src + strlen("fit ") : ""));
  else if (fit->len > 0)
    add_part(t, JS_TRUST_CALIBRATED,
             g_strdup_printf("node_energy_j and facility_energy_j rest on "
                             "the %s node's %s, fitted (%s) but not checked "
                             "on held-out data", n->name, fit->str,
                             fit_src + strlen("fit ")));
}

/* ---- API ------------------------------------------------------------------ */

void js_trust_gpu(const GpuSpec *g, JsTrust *t)
{
  trust_init(t);
  gpu_part(g, t);
}

void js_trust_assess(const JsTrustRun *run, JsTrust *t)
{
  trust_init(t);
  gpu_part(run->gpu, t);
  limit_part(run->gpu, run->power_limit_w, t);
  if (run->boost_controller)
    boost_part(run->gpu, t);
  workload_part(run, t);
  node_part(run->node, t);
}

void js_trust_describe_gpu(const GpuSpec *g, GString *out)
{
  JsTrust t = {0};
  js_trust_gpu(g, &t);
  g_string_append_printf(out, "power model: %s\n",
                         js_trust_level_name(t.level));
  for (guint i = 0; i < t.reasons->len; i++)
    g_string_append_printf(out, "  %s\n",
                           (const char *)g_ptr_array_index(t.reasons, i));
  js_trust_clear(&t);
  g_string_append_printf(out, "  %-16s %-10s %s\n", "term", "rests on",
                         "source");
  const char *n;
  for (guint i = 0; (n = gpu_power_term_name(i)) != NULL; i++) {
    const GpuParam *p = gpu_spec_param((GpuSpec *)g, n);
    g_string_append_printf(out, "  %-16s %-10s %s\n", n,
                           gpu_basis_name(gpu_param_basis(p)),
                           p->source != NULL ? p->source : "(no source)");
  }
  const GpuCheck *k = gpu_heldout_check(g);
  double frac = gpu_checked_limit_fraction();
  double def = g->power_limit_w.v;
  if (k != NULL && k->min_limit_w > 0)
    g_string_append_printf(out, "power limits checked on this GPU: %.0f-%.0f "
                                "W (docs/fidelity.md)\n",
                           k->min_limit_w, def);
  g_string_append_printf(out, "power limits below %.0f%% of the default "
                              "(%.0f W) rest on estimates\n",
                         100 * frac, frac * def);
}
