/* tests/test-lua-policies.c -- the pipeline policies, stragglers and
 * uncertainty through js.simulate: js.policy.perseus/envpipe/zeus
 * reproduce js.pipeline_run, stragglers slow the run as specified and are
 * deterministic for a seed, bad arguments name the argument, the
 * bootstrap interval brackets its estimate, and planned and pipeline
 * policies on folded workloads give the unfolded figures (refusing what
 * folding cannot represent). */
#include "testlua.h"
#include "testutil.h"

#define PIPE_SETUP                                                          \
  "local js = require 'joulesim'\n"                                         \
  "local prof = 'tests/data/profiles/gpt3-175b+a100_sxm_bf16.csv'\n"        \
  "local c = js.cluster{ gpu = 'A100-SXM4-80GB', gpus = 16,\n"              \
  "  blocking_power_w = 83.64, idle_power_w = 83.64,\n"                     \
  "  switch_latency_ms = 0 }\n"                                             \
  "local w = js.pipeline{ profile = prof, microbatches = 6, dp = 2 }\n"     \
  "local function near(a, b) return math.abs(a - b) <= 1e-9 * math.abs(b)\n"\
  "  end\n"

/* js.simulate with the pipeline policies gives js.pipeline_run's numbers
 * (same planner, same engine) and the frontier with :plan(i). */
static void test_same_as_pipeline_run(void)
{
  test_lua_expect_ok(PIPE_SETUP
    "local cases = {\n"
    "  { js.policy.perseus{}, { policy = 'perseus' } },\n"
    "  { js.policy.perseus{ slowdown = 0.05 },\n"
    "    { policy = 'perseus', slowdown = 0.05 } },\n"
    "  { js.policy.envpipe{}, { policy = 'envpipe' } },\n"
    "  { js.policy.zeus{ eta = 0.8, step_w = 10 },\n"
    "    { policy = 'zeus', eta = 0.8, step_w = 10 } },\n"
    "}\n"
    "local strag = { { pipeline = 2, slowdown = 1.2 } }\n"
    "for i, k in ipairs(cases) do\n"
    "  for _, st in ipairs{ false, true } do\n"
    "    local a = { cluster = c, workload = w, iterations = 2 }\n"
    "    for kk, v in pairs(k[2]) do a[kk] = v end\n"
    "    if st then a.stragglers = strag end\n"
    "    local b = js.pipeline_run(a)\n"
    "    local r = js.simulate{ cluster = c, workload = w, policy = k[1],\n"
    "      iterations = 2, stragglers = st and strag or nil }\n"
    "    assert(near(r.time_s, b.time_s), i .. ': time ' .. r.time_s ..\n"
    "           ' vs ' .. b.time_s)\n"
    "    assert(near(r.energy_j, b.energy_j), i .. ': energy')\n"
    "    assert(near(r.plan_energy_j, b.plan_energy_j))\n"
    "    assert(near(r.allmax_time_s, b.allmax_time_s))\n"
    "  end\n"
    "end\n"
    "local r = js.simulate{ cluster = c, workload = w,\n"
    "                       policy = js.policy.perseus{} }\n"
    "assert(r.policy == 'perseus(s=0)', r.policy)\n"
    "local fr = r.frontier\n"
    "assert(#fr > 3 and r.point >= 1 and r.point <= #fr)\n"
    "for i = 2, #fr do assert(fr[i].time_s > fr[i - 1].time_s and\n"
    "  fr[i].energy_j < fr[i - 1].energy_j) end\n"
    "local ref = js.perseus_frontier{ cluster = c, workload = w }\n"
    "assert(#ref == #fr and near(ref[#ref].energy_j, fr[#fr].energy_j))\n"
    "local p1, q1 = fr:plan(#fr), ref:plan(#ref)\n"
    "assert(#p1 == 8 and #p1[1].forward == 6)\n"
    "for s = 1, 8 do for m = 1, 6 do\n"
    "  assert(p1[s].forward[m] == q1[s].forward[m])\n"
    "  assert(p1[s].backward[m] == q1[s].backward[m])\n"
    "end end\n"
    "local z = js.simulate{ cluster = c, workload = w,\n"
    "                       policy = js.policy.zeus{} }\n"
    "assert(z.limit_w > 0 and z.frontier == nil)\n"
    "local m = js.simulate{ cluster = c, workload = w }\n"
    "assert(r.energy_j < m.energy_j and r.time_s <= m.time_s * (1 + 1e-6))\n");
}

/* Explicit stragglers slow exactly the iterations named; random ones are
 * deterministic for a seed and differ between seeds. */
static void test_stragglers(void)
{
  test_lua_expect_ok(PIPE_SETUP
    "local base = js.simulate{ cluster = c, workload = w, iterations = 3 }\n"
    "local s = js.simulate{ cluster = c, workload = w, iterations = 3,\n"
    "  stragglers = { { gpu = 16, slowdown = 1.5, from_iteration = 2,\n"
    "                   to_iteration = 2 } } }\n"
    "assert(near(s.iterations[1].time_s, base.iterations[1].time_s))\n"
    "-- GPU 16: pipeline 2's last (heaviest) stage, so it shows\n"
    "assert(s.iterations[2].time_s > 1.1 * base.iterations[2].time_s)\n"
    "assert(near(s.iterations[3].time_s, base.iterations[3].time_s))\n"
    "assert(s.iterations[2].time_s < 1.5 * base.iterations[2].time_s)\n"
    "assert(s.energy_j > base.energy_j)\n"
    "-- a whole pipeline 1.3x slower: the iteration is 1.3x (computation-\n"
    "-- level: every op of the pipeline is a kernel)\n"
    "local p = js.simulate{ cluster = c, workload = w, iterations = 1,\n"
    "  stragglers = { { pipeline = 1, slowdown = 1.3 } } }\n"
    "assert(math.abs(p.time_s / base.iterations[1].time_s - 1.3) < 0.02,\n"
    "       p.time_s / base.iterations[1].time_s)\n"
    "-- straggler-aware Perseus: never slower than the straggler alone,\n"
    "-- never more energy than max-and-wait\n"
    "local a = js.simulate{ cluster = c, workload = w, iterations = 1,\n"
    "  policy = js.policy.perseus{ straggler_aware = true },\n"
    "  stragglers = { { pipeline = 1, slowdown = 1.3 } } }\n"
    "assert(a.time_s <= p.time_s * (1 + 1e-9) and a.energy_j < p.energy_j)\n"
    "-- random stragglers: same seed same bits, another seed differs\n"
    "local function rnd(seed)\n"
    "  return js.simulate{ cluster = c, workload = w, iterations = 6,\n"
    "    seed = seed, stragglers = { rate = 0.2, slowdown = { 1.1, 1.4 },\n"
    "                                duration = { 1, 3 } } }\n"
    "end\n"
    "local r1, r2, r3 = rnd(11), rnd(11), rnd(12)\n"
    "assert(r1.time_s == r2.time_s and r1.energy_j == r2.energy_j)\n"
    "assert(r1.time_s ~= r3.time_s)\n"
    "local b6 = js.simulate{ cluster = c, workload = w, iterations = 6 }\n"
    "assert(r1.time_s > b6.time_s)\n"
    "-- with a kernel-level workload too (straggler machine wrapper)\n"
    "local c4 = js.cluster{ gpu = 'A100-SXM4-80GB', gpus = 4 }\n"
    "local g = js.gpt{ model = 'gpt3-125m', tp = 1, pp = 2, dp = 2,\n"
    "                  microbatches = 4, seq_len = 512 }\n"
    "local g0 = js.simulate{ cluster = c4, workload = g }\n"
    "local g1 = js.simulate{ cluster = c4, workload = g,\n"
    "  policy = js.policy.fixed{ sm = 1200 },\n"
    "  stragglers = { { gpu = 3, slowdown = 2 } } }\n"
    "local g2 = js.simulate{ cluster = c4, workload = g,\n"
    "  policy = js.policy.fixed{ sm = 1200 } }\n"
    "assert(g1.time_s > g2.time_s and g2.time_s > g0.time_s)\n");
}

typedef struct {
  const char *name;
  const char *src;
  const char *expect1;
  const char *expect2;
} BadCase;

#define BAD_SETUP PIPE_SETUP "local function sim(t) t.cluster = c\n" \
  "  t.workload = w; return js.simulate(t) end\n"

static const BadCase bad_cases[] = {
  {"perseus-unknown-key", BAD_SETUP "js.policy.perseus{ slowdwn = 0.1 }\n",
   "js.policy.perseus", "did you mean 'slowdown'"},
  {"perseus-slowdown-range", BAD_SETUP "js.policy.perseus{ slowdown = -1 }\n",
   "js.policy.perseus", "'slowdown'"},
  {"perseus-aware-type",
   BAD_SETUP "js.policy.perseus{ straggler_aware = 1 }\n",
   "js.policy.perseus", "'straggler_aware' must be a boolean"},
  {"perseus-resolution", BAD_SETUP "js.policy.perseus{ resolution = 0.5 }\n",
   "js.policy.perseus", "'resolution'"},
  {"perseus-lag", BAD_SETUP "js.policy.perseus{ lag = -2 }\n",
   "js.policy.perseus", "'lag'"},
  {"envpipe-key", BAD_SETUP "js.policy.envpipe{ slowdown = 0 }\n",
   "js.policy.envpipe", "unknown argument 'slowdown'"},
  {"zeus-eta", BAD_SETUP "js.policy.zeus{ eta = 2 }\n", "js.policy.zeus",
   "'eta'"},
  {"zeus-step", BAD_SETUP "js.policy.zeus{ step_w = 0 }\n", "js.policy.zeus",
   "'step_w'"},
  {"zeus-hand-table", BAD_SETUP "sim{ policy = { name = 'zeus', eta = 'x' } }\n",
   "js.policy.zeus", "'eta'"},
  {"perseus-timeline-no-run",
   BAD_SETUP "sim{ policy = js.policy.perseus{}, timeline = { out = 'x.h5' } "
   "}\n",
   "js.simulate{timeline}", "'run'"},
  {"stragglers-type", BAD_SETUP "sim{ stragglers = 3 }\n", "js.simulate",
   "'stragglers'"},
  {"straggler-gpu-range",
   BAD_SETUP "sim{ stragglers = { { gpu = 99, slowdown = 1.2 } } }\n",
   "js.simulate", "gpu"},
  {"straggler-slowdown",
   BAD_SETUP "sim{ stragglers = { { gpu = 1, slowdown = 0.5 } } }\n",
   "js.simulate", "'slowdown'"},
  {"straggler-no-slowdown", BAD_SETUP "sim{ stragglers = { { gpu = 1 } } }\n",
   "js.simulate", "'slowdown'"},
  {"straggler-key",
   BAD_SETUP "sim{ stragglers = { { gpu = 1, slowdwn = 2 } } }\n",
   "js.simulate", "did you mean 'slowdown'"},
  {"straggler-random-pair",
   BAD_SETUP "sim{ stragglers = { rate = 0.1, slowdown = 1.2,\n"
   "  duration = { 1, 2 } } }\n",
   "js.simulate", "'slowdown' = {lo, hi}"},
  {"straggler-duration",
   BAD_SETUP "sim{ stragglers = { rate = 0.1, slowdown = { 1.1, 1.2 },\n"
   "  duration = { 3, 1 } } }\n",
   "js.simulate", "'duration'"},
  {"uncertainty-type", BAD_SETUP "sim{ uncertainty = 5 }\n", "js.simulate",
   "'uncertainty'"},
  {"uncertainty-key",
   BAD_SETUP "sim{ uncertainty = { profile = prof, sample = 4 } }\n",
   "js.simulate{uncertainty}", "did you mean 'samples'"},
  {"uncertainty-profile", BAD_SETUP "sim{ uncertainty = { samples = 4 } }\n",
   "js.simulate{uncertainty}", "'profile'"},
  {"uncertainty-fit",
   BAD_SETUP "sim{ uncertainty = { profile = prof, fit = 'none' } }\n",
   "js.simulate{uncertainty}", "'fit'"},
  {"uncertainty-level",
   BAD_SETUP "sim{ uncertainty = { profile = prof, level = 1 } }\n",
   "js.simulate{uncertainty}", "'level'"},
  {"uncertainty-missing-file",
   BAD_SETUP "sim{ uncertainty = { profile = 'no/such.csv' } }\n",
   "js.simulate{uncertainty}", "no/such.csv"},
};

static void test_bad(gconstpointer data)
{
  const BadCase *bc = data;
  /* "test:": the error is located at a script line. */
  test_lua_expect_error(bc->src, bc->expect1, bc->expect2, "test:", NULL);
}

/* The bootstrap interval brackets its estimate, is deterministic for a
 * seed and has the requested sample count. */
static void test_uncertainty(void)
{
  test_lua_expect_ok(
    "local js = require 'joulesim'\n"
    "local prof = 'tests/data/profiles/gpt3-175b+a100_sxm_bf16.csv'\n"
    "local c = js.cluster{ gpu = 'A100-SXM4-80GB', gpus = 4 }\n"
    "local g = js.gpt{ model = 'gpt3-125m', tp = 2, pp = 2, dp = 1,\n"
    "                  microbatches = 2, seq_len = 256 }\n"
    "local function go(seed)\n"
    "  return js.simulate{ cluster = c, workload = g,\n"
    "    policy = js.policy.fixed{ sm = 1200 },\n"
    "    uncertainty = { profile = js.profile.load(prof), samples = 8,\n"
    "                    level = 0.8, seed = seed } }\n"
    "end\n"
    "local r = go(3)\n"
    "for _, k in ipairs{ 'energy_interval', 'time_interval' } do\n"
    "  local iv = r[k]\n"
    "  assert(iv.samples == 8 and iv.level == 0.8, k)\n"
    "  -- a degenerate interval (every sample the same time) may differ from\n"
    "  -- the estimate in the last bits: compare within 1e-12\n"
    "  local eps = 1e-12 * iv.estimate\n"
    "  assert(iv.lo <= iv.estimate + eps and iv.estimate <= iv.hi + eps,\n"
    "         k .. ': ' .. iv.lo .. ' ' .. iv.estimate .. ' ' .. iv.hi)\n"
    "  assert(iv.sd >= 0 and iv.estimate > 0)\n"
    "end\n"
    "assert(r.energy_interval.hi > r.energy_interval.lo)\n"
    "local r2 = go(3)\n"
    "assert(r2.energy_interval.lo == r.energy_interval.lo and\n"
    "       r2.time_interval.hi == r.time_interval.hi)\n"
    "-- a path works as well as a loaded profile\n"
    "local r3 = js.simulate{ cluster = c, workload = g,\n"
    "  uncertainty = { profile = prof, samples = 4, fit = 'power' } }\n"
    "assert(r3.energy_interval.samples == 4)\n"
    "assert(r3.energy_interval.lo <= r3.energy_interval.hi)\n");
}

/* Planned and pipeline policies on a folded workload (js.gpt{ fold =
 * true }) plan per rank class and give the unfolded run's figures: time,
 * energy, every GPU's energy, the plan's own; a Lua function policy is
 * shown the same units.  What prices GPUs individually is still refused,
 * naming the cause. */
#define FOLD_SETUP                                                          \
  "local js = require 'joulesim'\n"                                         \
  "local c = js.cluster{ gpu = 'A100-SXM4-80GB', gpus = 8,\n"               \
  "                      network = 'dgx-a100' }\n"                          \
  "local function gen(fold)\n"                                              \
  "  return js.gpt{ model = 'gpt3-125m', tp = 2, pp = 2, dp = 2,\n"         \
  "                 microbatches = 4, seq_len = 512, fold = fold }\n"       \
  "end\n"                                                                   \
  "local u, f = gen(false), gen(true)\n"                                    \
  "assert(f.folded and not u.folded)\n"                                     \
  "local function near(a, b) return math.abs(a - b) <= 1e-9 * math.abs(b)\n"\
  "  end\n"

static void test_folded(void)
{
  test_lua_expect_ok(FOLD_SETUP
    "local function log_units(seen)\n"
    "  return function(k)\n"
    "    seen[#seen + 1] = k.name .. ' ' .. k.count .. ' ' ..\n"
    "                      k.options[2].energy_j\n"
    "    if k.class == 'gemm' then return { sm = 1200 } end\n"
    "  end\n"
    "end\n"
    "local seen_u, seen_f = {}, {}\n"
    "local cases = {\n"
    "  { js.policy.kernel{ slowdown = 0.05, granularity = 'op' } },\n"
    "  { js.policy.pass{ slowdown = 0.05 } },\n"
    "  { js.policy.powercap{ slowdown = 0.05 } },\n"
    "  { log_units(seen_u), log_units(seen_f), 0 },\n"
    "  { js.policy.perseus{ slowdown = 0.05 } },\n"
    "  { js.policy.envpipe{} },\n"
    "}\n"
    "for i, k in ipairs(cases) do\n"
    "  local a = js.simulate{ cluster = c, workload = u, policy = k[1],\n"
    "                         iterations = 2, switch_latency_ms = k[3] }\n"
    "  local b = js.simulate{ cluster = c, workload = f,\n"
    "    policy = k[2] or k[1], iterations = 2, switch_latency_ms = k[3] }\n"
    "  assert(a.policy == b.policy, i)\n"
    "  assert(a.time_s == b.time_s, i .. ': ' .. a.time_s .. ' ' .. b.time_s)\n"
    "  assert(near(a.energy_j, b.energy_j), i)\n"
    "  assert(b.ops < a.ops and b.ops_represented == a.ops)\n"
    "  for g = 1, 8 do\n"
    "    assert(near(a.per_gpu[g].energy_j, b.per_gpu[g].energy_j), i)\n"
    "  end\n"
    "  if a.plan then\n"
    "    assert(a.plan.classes == b.plan.classes and a.plan.classes == 2)\n"
    "    assert(near(a.plan.energy_j, b.plan.energy_j), i)\n"
    "    assert(a.plan.chosen == b.plan.chosen, i)\n"
    "  else\n"
    "    assert(near(a.plan_energy_j, b.plan_energy_j), i)\n"
    "  end\n"
    "end\n"
    "assert(#seen_u > 3 and #seen_u == #seen_f)\n"
    "for i = 1, #seen_u do assert(seen_u[i] == seen_f[i], seen_f[i]) end\n"
    "-- js.pipeline_run too\n"
    "local a = js.pipeline_run{ cluster = c, workload = u, slowdown = 0.05 }\n"
    "local b = js.pipeline_run{ cluster = c, workload = f, slowdown = 0.05 }\n"
    "assert(a.time_s == b.time_s and near(a.energy_j, b.energy_j))\n");
}

static const struct {
  const char *name, *src, *expect;
} fold_refusals[] = {
  {"kernel-variability",
   "js.simulate{ cluster = c, workload = f, policy = js.policy.kernel{},\n"
   "             variability = { perf = 0.02 } }\n", "variability"},
  {"perseus-variability",
   "js.simulate{ cluster = c, workload = f, policy = js.policy.perseus{},\n"
   "             variability = { power = 0.02 } }\n", "variability"},
  {"perseus-stragglers",
   "js.simulate{ cluster = c, workload = f,\n"
   "  policy = js.policy.perseus{ straggler_aware = true },\n"
   "  stragglers = { { gpu = 3, slowdown = 1.2 } } }\n", "stragglers"},
  {"pipeline-run-stragglers",
   "js.pipeline_run{ cluster = c, workload = f, straggler_aware = true,\n"
   "  stragglers = { { gpu = 3, slowdown = 1.2 } } }\n", "stragglers"},
};

static void test_folded_refused(gconstpointer data)
{
  guint i = GPOINTER_TO_UINT(data);
  g_autofree char *src = g_strconcat(FOLD_SETUP, fold_refusals[i].src, NULL);
  test_lua_expect_error(src, "folded", fold_refusals[i].expect,
                        "fold = false", NULL);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/lua-policies/same-as-pipeline-run",
                  test_same_as_pipeline_run);
  g_test_add_func("/lua-policies/stragglers", test_stragglers);
  g_test_add_func("/lua-policies/uncertainty", test_uncertainty);
  g_test_add_func("/lua-policies/folded", test_folded);
  for (guint i = 0; i < G_N_ELEMENTS(fold_refusals); i++) {
    g_autofree char *p = g_strdup_printf("/lua-policies/folded-refused/%s",
                                         fold_refusals[i].name);
    g_test_add_data_func(p, GUINT_TO_POINTER(i), test_folded_refused);
  }
  for (guint i = 0; i < G_N_ELEMENTS(bad_cases); i++) {
    g_autofree char *p = g_strdup_printf("/lua-policies/bad/%s",
                                         bad_cases[i].name);
    g_test_add_data_func(p, &bad_cases[i], test_bad);
  }
  return g_test_run();
}
