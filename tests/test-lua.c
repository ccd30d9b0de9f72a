/* tests/test-lua.c -- the Lua binding: the API works end to end, and every
 * kind of bad argument gives an error naming the function, the argument and
 * the script line. */
#include "testlua.h"
#include "testresults.h"
#include "testutil.h"

#include <string.h>

static void test_simulate(void)
{
  test_lua_expect_ok(
    "local js = require 'joulesim'\n"
    "local c = js.cluster{ gpu = 'A100-SXM4-80GB', gpus = 4 }\n"
    "assert(c.n_gpus == 4 and c.gpu == 'A100-SXM4-80GB')\n"
    "local w = js.gpt{ model = 'gpt3-125m', tp = 2, pp = 2, dp = 1,\n"
    "                  microbatches = 4, seq_len = 512 }\n"
    "assert(w.ranks == 4 and w.ops > 0)\n"
    "local r = js.simulate{ cluster = c, workload = w, iterations = 2 }\n"
    "assert(r.time_s > 0 and r.energy_j > 0)\n"
    "assert(#r.iterations == 2 and #r.per_gpu == 4)\n"
    "assert(math.abs(r.iterations[1].time_s + r.iterations[2].time_s\n"
    "                - r.time_s) < 1e-9)\n"
    "assert(r.avg_power_w > 50 and r.avg_power_w < 400, r.avg_power_w)\n"
    "assert(r.by_class.gemm.energy_j > 0 and r.by_phase.backward.time_s > 0)\n"
    "assert(r.policy == 'max' and r.switches == 0)\n"
    "-- energy partition: classes + blocked + idle = total\n"
    "local sum = r.blocked_j + r.idle_j\n"
    "for _, v in pairs(r.by_class) do sum = sum + v.energy_j end\n"
    "assert(math.abs(sum - r.energy_j) < 1e-6 * r.energy_j)\n"
    "local f = js.simulate{ cluster = c, workload = w,\n"
    "                       policy = js.policy.fixed{ sm = 900 } }\n"
    "assert(f.policy == 'fixed(sm=900)')\n"
    "assert(f.iteration_time_s > r.iteration_time_s)\n"
    "local cmp = js.compare(r, f)\n"
    "assert(cmp.slowdown > 0)\n"
    "assert(tostring(cmp):find('energy saving'))\n"
    "assert(js.summary(r):find('energy by class'))\n");
}

/* Node and facility energy (models/node.h).  The default node ("none",
 * pue 1) leaves the GPU figure as it is; a node of constant components is
 * the integral of its power: over one node and T seconds, with CPUs at
 * 100 + (300 - 100) x 0.5 = 200 W and 40 W of the rest, (E_gpu + 240 T) /
 * 0.8 at the wall; the NICs add their idle 10 W only (one node: no
 * inter-node traffic), and NVSwitches at 0 W idle, 100 W active add 100 W
 * over the time the GPUs spend in communication, per GPU on average. */
static void test_node_energy(void)
{
  test_lua_expect_ok(
    "local js = require 'joulesim'\n"
    "local w = js.gpt{ model = 'gpt3-125m', tp = 2, pp = 2, dp = 2,\n"
    "                  microbatches = 4, seq_len = 256 }\n"
    "local r = js.simulate{ cluster = js.cluster{ gpus = 8 }, workload = w }\n"
    "assert(r.node == 'none' and r.pue == 1)\n"
    "assert(r.gpu_energy_j == r.energy_j and r.node_energy_j == r.energy_j\n"
    "       and r.facility_energy_j == r.energy_j)\n"
    "local node = { cpu_idle_w = 100, cpu_active_w = 300, cpu_load = 0.5,\n"
    "               other_w = 40, psu_efficiency = 0.8 }\n"
    "local c = js.cluster{ gpus = 8, node = node, pue = 1.25 }\n"
    "local n = js.simulate{ cluster = c, workload = w }\n"
    "assert(n.energy_j == r.energy_j and n.gpu_energy_j == r.energy_j)\n"
    "local want = (r.energy_j + 240 * r.time_s) / 0.8\n"
    "assert(math.abs(n.node_energy_j - want) < 1e-9 * want, n.node_energy_j)\n"
    "assert(math.abs(n.facility_energy_j - 1.25 * want) < 1e-9 * want)\n"
    "assert(n.node == 'custom' and n.pue == 1.25)\n"
    "assert(c.node == 'custom' and c.pue == 1.25)\n"
    "node.nic_idle_w, node.nic_active_w = 10, 1000\n"
    "node.nvswitch_active_w = 100\n"
    "local s = js.simulate{ cluster = js.cluster{ gpus = 8, node = node },\n"
    "                       workload = w }\n"
    "local comm = 0\n"
    "for _, g in ipairs(s.per_gpu) do comm = comm + g.comm_s end\n"
    "assert(comm > 0)\n"
    "want = (r.energy_j + 250 * r.time_s + 100 * comm / 8) / 0.8\n"
    "assert(math.abs(s.node_energy_j - want) < 1e-9 * want, s.node_energy_j)\n"
    "assert(js.summary(s):find('facility'))\n"
    "-- presets: the HGX H100 fit reproduces Latif et al.'s 8.4 kW peak\n"
    "assert(math.abs(js.node_power('hgx-h100', 5600, 0, 1) - 8400) < 1e-9)\n"
    "assert(js.node_power('none', 5600, 1, 1) == 5600)\n"
    "local a = js.simulate{ cluster = js.cluster{ gpus = 8, node = 'dgx-a100' },\n"
    "                       workload = w }\n"
    "assert(a.node == 'dgx-a100' and a.node_energy_j > 1.2 * a.energy_j)\n"
    "-- js.pipeline_run's result carries them too (the same run)\n"
    "local p = js.pipeline_run{ cluster = js.cluster{ gpus = 8,\n"
    "  node = 'dgx-a100' }, workload = w, policy = 'max' }\n"
    "assert(p.energy_j == a.energy_j and p.node_energy_j == a.node_energy_j)\n"
    "-- js.node: a preset's figures and what its parts rest on; a table's\n"
    "-- figures have no sources, and no argument is 'none'\n"
    "local h = js.node('hgx-h100')\n"
    "assert(h.name == 'hgx-h100' and h.other_w == 1320 and h.cpu_load == 0.5)\n"
    "assert(h.sources.other_w:find('^fit on Latif'))\n"
    "assert(h.sources.nvswitch:find('^estimate'))\n"
    "local n = 0\n"
    "for _ in pairs(js.node('dgx-a100').sources) do n = n + 1 end\n"
    "assert(n == 8)\n"
    "assert(js.node().name == 'none' and next(js.node().sources) == nil)\n"
    "local t = js.node{ preset = 'dgx-h100', cpu_load = 1 }\n"
    "assert(t.name == 'custom' and t.cpu_load == 1 and t.other_w == 1320)\n"
    "assert(next(t.sources) == nil)\n");
}

static void test_determinism(void)
{
  /* Same script, same seed: identical numbers (compared as strings with
   * full precision). */
  const char *src =
    "local js = require 'joulesim'\n"
    "local c = js.cluster{ gpus = 8, variability = { perf = 0.05, power = 0.05 } }\n"
    "local w = js.gpt{ model = 'gpt3-125m', tp = 2, pp = 2, dp = 2,\n"
    "                  microbatches = 4, seq_len = 256 }\n"
    "local r = js.simulate{ cluster = c, workload = w, seed = 3 }\n"
    "RESULT = string.format('%.17g %.17g %d', r.time_s, r.energy_j,\n"
    "                       math.random(1, 1000000))\n"
    "local f = assert(io.open(OUT, 'w')) f:write(RESULT) f:close()\n";
  g_autofree char *dir = test_tmpdir();
  g_autofree char *a = g_build_filename(dir, "a", NULL);
  g_autofree char *b = g_build_filename(dir, "b", NULL);
  const char *outs[2] = {a, b};
  for (int i = 0; i < 2; i++) {
    g_autofree char *full = g_strdup_printf("OUT = [[%s]]\n%s", outs[i], src);
    test_lua_expect_ok(full);
  }
  g_autofree char *ta = NULL, *tb = NULL;
  g_assert_true(g_file_get_contents(a, &ta, NULL, NULL));
  g_assert_true(g_file_get_contents(b, &tb, NULL, NULL));
  g_assert_cmpstr(ta, ==, tb);
  test_rmdir(dir);
}

/* js.simulate{ threads = N }: the same figures, to the last bit, on 1, 2
 * and 5 threads (sim_engine_set_threads; tests/test-threads.c has the
 * engine's own cases). */
static void test_threads(void)
{
  test_lua_expect_ok(
    "local js = require 'joulesim'\n"
    "local c = js.cluster{ gpus = 8, variability = { perf = 0.05, power = 0.05 } }\n"
    "local w = js.gpt{ model = 'gpt3-125m', tp = 2, pp = 2, dp = 2,\n"
    "                  microbatches = 4, seq_len = 256 }\n"
    "local function key(r)\n"
    "  local t = { string.format('%.17g %.17g %.17g', r.time_s, r.energy_j,\n"
    "                            r.waste_j) }\n"
    "  for g, p in ipairs(r.per_gpu) do\n"
    "    t[#t + 1] = string.format('%.17g %.17g', p.energy_j, p.blocked_s)\n"
    "  end\n"
    "  return table.concat(t, ' ')\n"
    "end\n"
    "local one = key(js.simulate{ cluster = c, workload = w, iterations = 2 })\n"
    "for _, n in ipairs{ 2, 5 } do\n"
    "  local r = js.simulate{ cluster = c, workload = w, iterations = 2,\n"
    "                         threads = n }\n"
    "  assert(key(r) == one, n)\n"
    "end\n");
}

static void test_results_roundtrip(void)
{
  g_autofree char *dir = test_tmpdir();
  g_autofree char *path = g_build_filename(dir, "r.h5", NULL);
  g_autofree char *src = g_strdup_printf(
    "local js = require 'joulesim'\n"
    "local out = js.results([[%s]], 'runs')\n"
    "out:append{ policy = 'max', time_s = 1.5, n = 3, ok = true }\n"
    "out:append{ policy = 'fixed', time_s = 2.5, n = 4, ok = false }\n"
    "assert(out:rows() == 2)\n"
    "out:close()\n"
    "local again = js.results([[%s]], 'runs')\n"
    "again:append{ policy = 'x', time_s = 3, n = 5, ok = true }\n"
    "assert(again:rows() == 3)\n"
    "again:close()\n"
    "local r = js.results([[%s]], 'runs', { mode = 'replace' })\n"
    "assert(r:rows() == 0)\n"
    "r:append{ policy = 'y', time_s = 1.0, n = 1, ok = true }\n"
    "r:close()\n",
    path, path, path);
  test_lua_expect_ok(src);
  g_autoptr(GPtrArray) rows = test_read_rows(path, "runs");
  g_assert_cmpuint(rows->len, ==, 1);
  test_rmdir(dir);
}

/* ---- bad arguments: (script, expected fragments) ------------------------- */

typedef struct {
  const char *name;
  const char *src;
  const char *expect1;
  const char *expect2;
} BadCase;

#define W "local js = require 'joulesim'\n"

static const BadCase bad_cases[] = {
  {"unknown-gpu", W "js.cluster{ gpu = 'A100-SXM9', gpus = 8 }",
   "test:2:", "A100-SXM4-80GB"},
  {"unknown-key", W "js.cluster{ gpus = 8, gpus_per_nod = 8 }",
   "did you mean 'gpus_per_node'", "test:2:"},
  {"negative-gpus", W "js.cluster{ gpus = -8 }", "'gpus'", "got -8"},
  {"zero-tp", W "js.gpt{ model = 'gpt3-125m', tp = 0 }", "'tp'", "got 0"},
  {"string-tp", W "js.gpt{ model = 'gpt3-125m', tp = 'eight' }", "'tp'",
   "integer"},
  {"fractional-pp", W "js.gpt{ model = 'gpt3-125m', pp = 1.5 }", "'pp'",
   "integer"},
  {"unknown-model", W "js.gpt{ model = 'gpt3-9000b' }", "gpt3-175b",
   "test:2:"},
  {"bad-schedule", W "js.gpt{ model = 'gpt3-125m', schedule = 'zigzag' }",
   "'schedule'", "1f1b"},
  {"heads-vs-tp", W "js.gpt{ model = 'gpt3-125m', tp = 5 }", "tp", "js.gpt"},
  {"rank-mismatch",
   W "local c = js.cluster{ gpus = 8 }\n"
     "local w = js.gpt{ model = 'gpt3-125m', tp = 2, pp = 2, microbatches = 2 }\n"
     "js.simulate{ cluster = c, workload = w }",
   "4 ranks", "8 GPUs"},
  {"missing-cluster",
   W "local w = js.gpt{ model = 'gpt3-125m' }\njs.simulate{ workload = w }",
   "'cluster'", "test:3:"},
  {"fixed-out-of-range",
   W "local c = js.cluster{ gpus = 1 }\n"
     "local w = js.gpt{ model = 'gpt3-125m', microbatches = 1 }\n"
     "js.simulate{ cluster = c, workload = w,\n"
     "             policy = js.policy.fixed{ sm = 5000 } }",
   "5000", "210-1410"},
  {"fixed-no-clock", W "js.policy.fixed{}", "js.policy.fixed", "sm"},
  {"unwritable-results", W "js.results('/nonexistent-dir/x.h5', 't')",
   "/nonexistent-dir/x.h5", "test:2:"},
  {"bad-row-value",
   W "local out = js.results(OUT, 't')\nout:append{ f = function() end }",
   "column 'f'", "allowed"},
  {"syntax-error", W "local x = = 1", "test:2:", "unexpected symbol"},
  {"iterations-zero",
   W "local c = js.cluster{ gpus = 1 }\n"
     "local w = js.gpt{ model = 'gpt3-125m', microbatches = 1 }\n"
     "js.simulate{ cluster = c, workload = w, iterations = 0 }",
   "'iterations'", "got 0"},
  {"threads-zero",
   W "local c = js.cluster{ gpus = 1 }\n"
     "local w = js.gpt{ model = 'gpt3-125m', microbatches = 1 }\n"
     "js.simulate{ cluster = c, workload = w, threads = 0 }",
   "'threads'", "got 0"},
  {"power-limit-absurd", W "js.cluster{ gpus = 1, power_limit_w = 10 }",
   "power", "js.cluster"},
  {"huge-cluster", W "js.cluster{ gpus = 1e12 }", "'gpus'", "1048576"},
  {"unknown-network", W "js.cluster{ gpus = 8, network = 'carrier-pigeon' }",
   "dgx-a100", "js.cluster"},
  {"unknown-node", W "js.cluster{ gpus = 8, node = 'dgx-z900' }",
   "unknown node 'dgx-z900'", "hgx-h100"},
  {"negative-node-power",
   W "js.cluster{ gpus = 8, node = { preset = 'dgx-h100', nic_idle_w = -5 } }",
   "'nic_idle_w'", "got -5"},
  {"node-active-below-idle",
   W "js.cluster{ gpus = 8, node = { cpu_idle_w = 300, cpu_active_w = 100 } }",
   "cpu active power 100 W is below its idle power 300 W", "test:2:"},
  {"pue-below-one", W "js.cluster{ gpus = 8, pue = 0.9 }", "'pue'",
   "got 0.9"},
  {"node-power-unknown", W "js.node_power('dgx-b200', 5600)",
   "js.node_power", "unknown node 'dgx-b200'"},
  {"node-unknown", W "js.node('dgx-b200')", "js.node",
   "unknown node 'dgx-b200'"},
};

/* `want`, or "test:N+1:" when it is "test:N:". */
static char *shift_line(const char *want)
{
  int line;
  if (sscanf(want, "test:%d:", &line) == 1)
    return g_strdup_printf("test:%d:", line + 1);
  return g_strdup(want);
}

static void test_bad(gconstpointer data)
{
  const BadCase *bc = data;
  g_autofree char *dir = test_tmpdir();
  g_autofree char *out = g_build_filename(dir, "o.h5", NULL);
  g_autofree char *src = g_strdup_printf("OUT = [[%s]]\n%s", out, bc->src);
  /* OUT adds a line: shift expected line numbers by one. */
  g_autofree char *want1 = shift_line(bc->expect1);
  g_autofree char *want2 = shift_line(bc->expect2);
  test_lua_expect_error(src, want1, want2, NULL);
  /* nothing half-written */
  g_assert_false(g_file_test(out, G_FILE_TEST_EXISTS) &&
                 strcmp(bc->name, "bad-row-value") != 0);
  test_rmdir(dir);
}

static void test_random_is_seeded(void)
{
  test_lua_expect_ok(
    "math.randomseed(5)\n"
    "local a = { math.random(), math.random(1, 6), math.random(10) }\n"
    "math.randomseed(5)\n"
    "local b = { math.random(), math.random(1, 6), math.random(10) }\n"
    "for i = 1, 3 do assert(a[i] == b[i]) end\n"
    "for i = 1, 1000 do local v = math.random(3, 4)\n"
    "  assert(v == 3 or v == 4) end\n");
}

static void test_gpu_table(void)
{
  test_lua_expect_ok(
    "local js = require 'joulesim'\n"
    "local g = js.gpu('H100-SXM5-80GB')\n"
    "assert(g.n_sm == 132 and g.sm_max_mhz == 1980)\n"
    "assert(g.power_limit_w == 700)\n"
    "assert(g.description:find('source') or g.description:find('datasheet'))\n"
    "local names = js.gpus()\n"
    "assert(#names >= 3)\n");
}

/* js.gpu.price: a compute-bound GEMM slows ~1/f and is capped at the limit;
 * a streaming kernel keeps its time when the SM clock falls and draws
 * less; cap = false lifts the cap. */
static void test_gpu_price(void)
{
  test_lua_expect_ok(
    "local js = require 'joulesim'\n"
    "local function p(t) t.gpu = 'A100-SXM4-80GB'; return js.gpu.price(t) end\n"
    "local g1 = p{ class = 'gemm', flops = 1.1e12, bytes = 4e8, sm_mhz = 1410,\n"
    "              power_limit_w = 250 }\n"
    "assert(g1.capped and g1.power_w <= 250 and g1.sm_mhz < 1410)\n"
    "local g2 = p{ class = 'gemm', flops = 1.1e12, bytes = 4e8, sm_mhz = 1410,\n"
    "              cap = false }\n"
    "assert(not g2.capped and g2.sm_mhz == 1410 and g2.power_w > 250)\n"
    "assert(math.abs(g2.energy_j - g2.power_w * g2.time_s) < 1e-9)\n"
    "local lo = p{ class = 'gemm', flops = 1.1e12, bytes = 4e8, sm_mhz = 705,\n"
    "              cap = false }\n"
    "assert(lo.time_s > 1.9 * g2.time_s and lo.time_s < 2.1 * g2.time_s)\n"
    "local m1 = p{ class = 'elementwise', bytes = 8e9, sm_mhz = 1410 }\n"
    "local m2 = p{ class = 'elementwise', bytes = 8e9, sm_mhz = 1005 }\n"
    "assert(m2.time_s < 1.02 * m1.time_s and m2.power_w < m1.power_w)\n"
    "assert(m1.util_memory > 0.8)\n"
    "local tf = p{ class = 'gemm', flops = 1e12, math = 'tf32', cap = false }\n"
    "local bf = p{ class = 'gemm', flops = 1e12, math = 'bf16', cap = false }\n"
    "assert(math.abs(tf.time_s / bf.time_s - 2) < 0.01)\n");
}

/* js.gpu.price prices a TF32 GEMM from the catalogue (activity_tf32):
 * the ViT-L/16 FC1 GEMM of measured/h100-powercap on H100-SXM5-94GB
 * settles within 12% of the measured clock and board power under every
 * cap of 200-700 W (joulesim issue 29's target; activity 1, the BF16
 * unit, settled it 12-33% too slow). */
static void test_gpu_price_tf32_caps(void)
{
  g_autofree char *src = g_strdup_printf(
    "local js = require 'joulesim'\n"
    "local n = 0\n"
    "for line in io.lines([[%s]]) do\n"
    "  local cap, total, _, _, mhz = line:match(\n"
    "    '^(%%d+),([%%d.]+),([%%d.]+),([%%d.]+),([%%d.]+)$')\n"
    "  if cap then\n"
    "    local q = js.gpu.price{ gpu = 'H100-SXM5-94GB', class = 'gemm',\n"
    "      math = 'tf32', flops = 2 * 50432 * 1024 * 4096,\n"
    "      bytes = 4 * (50432 * 1024 + 1024 * 4096 + 50432 * 4096),\n"
    "      power_limit_w = tonumber(cap) }\n"
    "    assert(math.abs(q.sm_mhz / tonumber(mhz) - 1) < 0.12, cap)\n"
    "    assert(math.abs(q.power_w / tonumber(total) - 1) < 0.12, cap)\n"
    "    n = n + 1\n"
    "  end\n"
    "end\n"
    "assert(n == 6, n)\n",
    TEST_DATA("measured/h100-powercap/h100_94gb_vitl16_tf32_caps.csv"));
  test_lua_expect_ok(src);
}

/* measured/zeus-powerlimit: Bloom 3B on 4 x A100 PCIe under one power
 * limit, 300 down to 175 W.  The job as `joulesim fidelity` builds it
 * (Merak's partition, TF32, Hugging Face's kernels) is slower at every
 * lower limit, its time normalised to 300 W is within 5% of the measured
 * one down to 60% of the default limit (180 W), and its energy is lowest
 * at the measured 225 W (issue 30: the model had it at 200 W, and at 200
 * W 11% too fast, before the memory interface's power while in use). */
static void test_zeus_a100_deep_caps(void)
{
  g_autofree char *src = g_strdup_printf(
    "local js = require 'joulesim'\n"
    "local c = js.cluster{ gpu = 'A100-PCIE-80GB', gpus = 4,\n"
    "                      gpus_per_node = 4, network = 'pcie' }\n"
    "local w = js.gpt{ model = 'bloom-3b', seq_len = 1024, pp = 4,\n"
    "  microbatch_size = 4, microbatches = 128, recompute = true,\n"
    "  stage_layers = { 9, 8, 8, 5 }, precision = 'tf32',\n"
    "  gpu = 'A100-PCIE-80GB', impl = 'hf' }\n"
    "local rows = {}\n"
    "for line in io.lines([[%s]]) do\n"
    "  local lim, t, e = line:match('^bloom%%-3b,\"[^\"]*\",' ..\n"
    "    '%%d+,%%d+,%%d+,%%d+,%%d+,%%d+,(%%d+),%%d+,%%d+,%%d+,' ..\n"
    "    '([%%d.]+),([%%d.]+)')\n"
    "  if lim then\n"
    "    rows[#rows + 1] = { lim = tonumber(lim), t = tonumber(t),\n"
    "                        e = tonumber(e) }\n"
    "  end\n"
    "end\n"
    "assert(#rows == 6, #rows)\n"
    "table.sort(rows, function(a, b) return a.lim > b.lim end)\n"
    "local t0, prev, best_m, best_p\n"
    "for _, r in ipairs(rows) do\n"
    "  local p = js.simulate{ cluster = c, workload = w,\n"
    "    policy = js.policy.powercap{ watts = r.lim } }\n"
    "  t0 = t0 or { m = r.t, p = p.time_s }\n"
    "  assert(not prev or p.time_s > prev, r.lim)\n"
    "  prev = p.time_s\n"
    "  local err = (p.time_s / t0.p) / (r.t / t0.m) - 1\n"
    "  if r.lim >= 0.6 * 300 then assert(math.abs(err) < 0.05, r.lim) end\n"
    "  if not best_m or r.e < best_m.e then best_m = r end\n"
    "  if not best_p or p.energy_j < best_p.e then\n"
    "    best_p = { lim = r.lim, e = p.energy_j }\n"
    "  end\n"
    "end\n"
    "assert(best_m.lim == 225 and best_p.lim == 225, best_p.lim)\n",
    TEST_DATA("measured/zeus-powerlimit/a100_pcie_pp4_global.csv"));
  test_lua_expect_ok(src);
}

/* js.cluster{ boost = "controller" }: the driver's controller lets the
 * first GEMMs overshoot the limit (peak above it) where the per-kernel cap
 * never does; a planned policy still plans and runs under it. */
static void test_boost_controller(void)
{
  test_lua_expect_ok(
    "local js = require 'joulesim'\n"
    "local w = js.gpt{ model = 'gpt3-1.3b', pp = 2, microbatches = 4 }\n"
    "local a = js.simulate{ cluster = js.cluster{ gpus = 2 }, workload = w }\n"
    "local c = js.cluster{ gpus = 2, boost = 'controller' }\n"
    "local b = js.simulate{ cluster = c, workload = w }\n"
    "assert(a.peak_power_w <= 400 + 1e-6, a.peak_power_w)\n"
    "assert(b.peak_power_w > 400, b.peak_power_w)\n"
    "assert(b.time_s ~= a.time_s)\n"
    "local p = js.simulate{ cluster = c, workload = w,\n"
    "                       policy = js.policy.iteration{ slowdown = 0.05 } }\n"
    "assert(p.energy_j > 0)\n");
}

/* GPU memory: w.memory_by_stage has one entry per stage (embeddings on
 * the first, the tied copy and the head on the last), w.memory is the
 * largest; js.simulate refuses GPT-3 13B at TP1 on 80 GB H100s (18 bytes
 * x 12.85e9 parameters = 231 GB of state) naming the stage, the breakdown
 * and the remedies, and runs it with check_memory = false; a workload
 * without an estimate (js.pipeline) has no w.memory. */
static void test_gpu_memory(void)
{
  test_lua_expect_ok(
    "local js = require 'joulesim'\n"
    "local w = js.gpt{ model = 'gpt3-1.3b', tp = 2, pp = 4, dp = 1,\n"
    "                  microbatches = 8, seq_len = 512 }\n"
    "local st = w.memory_by_stage\n"
    "assert(#st == 4)\n"
    "for i, s in ipairs(st) do\n"
    "  assert(s.stage == i - 1 and s.in_flight == 4 - (i - 1))\n"
    "  local sum = s.weights_gb + s.grads_gb + s.optimizer_gb\n"
    "              + s.activations_gb + s.allowance_gb\n"
    "  assert(math.abs(sum - s.total_gb) < 1e-9 * s.total_gb)\n"
    "  assert(math.abs((s.weights_gb + s.grads_gb + s.optimizer_gb) * 1e9\n"
    "                  / s.params - 18) < 1e-9)\n"
    "end\n"
    "assert(st[1].params > st[2].params and st[4].params > st[2].params)\n"
    "assert(w.memory.total_gb == st[1].total_gb and w.memory.stage == 0)\n"
    "local big = js.gpt{ model = 'gpt3-13b', tp = 1, dp = 8,\n"
    "                    microbatches = 1, seq_len = 512, fold = true }\n"
    "local c = js.cluster{ gpu = 'H100-SXM5-80GB', gpus = 8 }\n"
    "local ok, err = pcall(js.simulate, { cluster = c, workload = big })\n"
    "assert(not ok, 'refused')\n"
    "for _, want in ipairs{ 'js.simulate: ', 'does not fit in GPU memory',\n"
    "    'stage 0 of tp1 pp1 dp8', 'H100-SXM5-80GB has 80.0 GB',\n"
    "    'weights', 'optimizer', 'activations', 'recompute = true',\n"
    "    'zero = 1', 'tp = 2', 'check_memory = false' } do\n"
    "  assert(err:find(want, 1, true), want .. ' not in ' .. err)\n"
    "end\n"
    "assert(big.memory.total_gb > 231)\n"
    "local r = js.simulate{ cluster = c, workload = big,\n"
    "                       check_memory = false }\n"
    "assert(r.time_s > 0)\n"
    "local p = js.pipeline{ profile = 'tests/data/profiles/"
    "gpt3-175b+a100_sxm_bf16.csv', microbatches = 4 }\n"
    "assert(p.memory == nil and p.memory_by_stage == nil)\n");
  test_lua_expect_error(
    "local js = require 'joulesim'\n"
    "js.simulate{ cluster = js.cluster{ gpus = 1 },\n"
    "             workload = js.gpt{ model = 'gpt3-125m' },\n"
    "             check_memory = 'no' }\n",
    "js.simulate: argument 'check_memory' must be a boolean (got string)",
    NULL);
}

/* r.trust (run/trust.h): the level is the weakest part's, and the
 * reasons name the part and the evidence. */
static void test_trust(void)
{
  test_lua_expect_ok(
    "local js = require 'joulesim'\n"
    "local w = js.gpt{ model = 'gpt3-1.3b', pp = 2, microbatches = 4 }\n"
    "local function run(gpu, pol)\n"
    "  local c = js.cluster{ gpu = gpu, gpus = 2 }\n"
    "  local r = js.simulate{ cluster = c, workload = w, policy = pol }\n"
    "  return r.trust.level, table.concat(r.trust.reasons, '\\n'), r\n"
    "end\n"
    "local function has(text, s) return text:find(s, 1, true) ~= nil end\n"
    "-- The A100 SXM4 80GB fit is held out on the Bloom profile and the\n"
    "-- generator's efficiency factors on held-out rows.\n"
    "local l, why, r = run('A100-SXM4-80GB')\n"
    "assert(l == 'validated', why)\n"
    "assert(has(why, 'bloom+a100_sxm_bf16.csv'), why)\n"
    "assert(#r.trust.reasons == 2, why)\n"
    "assert(has(js.summary(r), '  trust            validated: '))\n"
    "-- The H100 fit (on the 94 GB card's cap curve) leaves the 80 GB\n"
    "-- card's memory rail and every Hopper stall activity estimates.\n"
    "l, why = run('H100-SXM5-80GB')\n"
    "assert(l == 'estimated', why)\n"
    "assert(has(why, 'H100-SXM5-80GB power terms are estimates: '\n"
    "            .. 'p_mem_static_w, stall_activity'), why)\n"
    "assert(has(why, 'the H100 94GB fit\\'s memory rail at no traffic'), why)\n"
    "l, why = run('H100-SXM5-94GB')\n"
    "assert(l == 'estimated', why)\n"
    "assert(has(why, 'H100-SXM5-94GB power terms are estimates: '\n"
    "            .. 'stall_activity (as the A100 fit'), why)\n"
    "-- Fitted on the 80GB card's profile, never held out on the 40GB.\n"
    "l, why = run('A100-SXM4-40GB')\n"
    "assert(l == 'calibrated', why)\n"
    "assert(has(why, 'gpt3-175b+a100_sxm_bf16.csv'), why)\n"
    "-- The Zeus sweeps check caps down to 225 W of the 300 W default\n"
    "-- (75%): 225 W is inside, 200 W (67%) outside.\n"
    "l, why = run('A100-PCIE-80GB', js.policy.powercap{ watts = 225 })\n"
    "assert(l == 'validated', why)\n"
    "assert(has(why, 'power limit 225 W is 75% of the 300 W default'), why)\n"
    "l, why = run('A100-PCIE-80GB', js.policy.powercap{ watts = 200 })\n"
    "assert(l == 'estimated', why)\n"
    "assert(why == 'power limit 200 W is 67% of the A100-PCIE-80GB\\'s '\n"
    "       .. '300 W default, below the 75% (225 W) down to which '\n"
    "       .. 'capping was checked (docs/fidelity.md, the Zeus '\n"
    "       .. 'power-limit sweeps)', why)\n"
    "-- The same cap through the cluster, on a GPU without its own sweep:\n"
    "-- 250 W is 62.5% of the SXM4's 400 W.\n"
    "local c = js.cluster{ gpu = 'A100-SXM4-80GB', gpus = 2,\n"
    "                      power_limit_w = 250 }\n"
    "r = js.simulate{ cluster = c, workload = w }\n"
    "assert(r.trust.level == 'estimated' and #r.trust.reasons == 1)\n"
    "assert(has(r.trust.reasons[1], 'power limit 250 W is 62%'))\n"
    "-- The boost controller's period and step are estimates.\n"
    "c = js.cluster{ gpu = 'A100-SXM4-80GB', gpus = 2, boost = 'controller' }\n"
    "r = js.simulate{ cluster = c, workload = w }\n"
    "assert(r.trust.level == 'estimated')\n"
    "assert(has(r.trust.reasons[1], 'boost_period_ms, boost_step_mhz'))\n"
    "-- A node: the validated A100 run's node and facility energy rest on\n"
    "-- the preset's estimates (only hgx-h100's other_w is fitted, on\n"
    "-- Latif et al.'s peak); a node a script gives is checked nowhere.\n"
    "c = js.cluster{ gpu = 'A100-SXM4-80GB', gpus = 2, node = 'hgx-h100' }\n"
    "r = js.simulate{ cluster = c, workload = w }\n"
    "assert(r.trust.level == 'estimated' and #r.trust.reasons == 1)\n"
    "assert(r.trust.reasons[1] == 'node_energy_j and facility_energy_j rest '\n"
    "       .. 'on the hgx-h100 node\\'s estimates: cpu_idle_w, cpu_load, '\n"
    "       .. 'dram, nic, nvswitch, psu_efficiency (models/node.c; '\n"
    "       .. 'energy_j, the GPUs\\', does not); other_w fitted on Latif '\n"
    "       .. 'et al.\\'s 8.4 kW peak (arXiv 2412.08602)', r.trust.reasons[1])\n"
    "assert(has(js.summary(r), '  trust            estimated: node_energy_j'))\n"
    "c = js.cluster{ gpu = 'A100-SXM4-80GB', gpus = 2, node = 'dgx-a100' }\n"
    "r = js.simulate{ cluster = c, workload = w }\n"
    "assert(r.trust.level == 'estimated')\n"
    "assert(has(r.trust.reasons[1], 'nvswitch, other_w, psu_efficiency'))\n"
    "c = js.cluster{ gpu = 'A100-SXM4-80GB', gpus = 2,\n"
    "                node = { preset = 'hgx-h100', other_w = 1000 } }\n"
    "r = js.simulate{ cluster = c, workload = w }\n"
    "assert(r.trust.level == 'estimated' and #r.trust.reasons == 1)\n"
    "assert(has(r.trust.reasons[1], 'node figures the script gave'))\n"
    "-- No node (the default, or 'none'): nothing about it.\n"
    "c = js.cluster{ gpu = 'A100-SXM4-80GB', gpus = 2, node = 'none' }\n"
    "r = js.simulate{ cluster = c, workload = w }\n"
    "assert(r.trust.level == 'validated' and #r.trust.reasons == 2)\n");
}

/* Issue 28: the board limit holds the sum of what runs at once.  GPT-3
 * 13B, TP8 PP2 DP4 (its data-parallel all-reduces and pipeline sends
 * overlap the GEMMs, which the cap holds at the limit): before, the peak
 * read 785 W on the 700 W H100 and 448 W on the 400 W A100 (428 W at a
 * locked 1200 MHz).  Now every
 * GPU's sensor reads at most the limit, at max clocks and at a locked
 * clock; the energy is the additive sum less held_j, and held_j is no
 * more than the overlapping transfers added (their increment over their
 * whole duration: a kernel alone never exceeds the limit). */
static void test_limit_overlap(void)
{
  test_lua_expect_ok(
    "local js = require 'joulesim'\n"
    "local w = js.gpt{ model = 'gpt3-13b', tp = 8, pp = 2, dp = 4,\n"
    "                  microbatches = 8 }\n"
    "for _, gpu in ipairs{ 'A100-SXM4-40GB', 'H100-SXM5-80GB' } do\n"
    "  local g = js.gpu(gpu)\n"
    "  local c = js.cluster{ gpu = gpu, gpus = 64 }\n"
    "  for _, pol in ipairs{ js.policy.max(), js.policy.fixed{ sm = 1200 } } do\n"
    "    local r = js.simulate{ cluster = c, workload = w, policy = pol }\n"
    "    local what = gpu .. ' ' .. r.policy\n"
    "    assert(r.peak_power_w <= g.power_limit_w + 1e-6, what)\n"
    "    assert(r.peak_power_w > g.idle_power_w, what)\n"
    "    for i = 1, r.n_gpus do\n"
    "      assert(r.per_gpu[i].peak_power_w <= g.power_limit_w + 1e-6, what)\n"
    "    end\n"
    "    -- held at max clocks; at 1200 MHz only on the A100 (428 W summed\n"
    "    -- before; 517 W on the H100)\n"
    "    local over = r.policy == 'max' or gpu == 'A100-SXM4-40GB'\n"
    "    assert((r.held_j > 0) == over and r.held_j >= 0, what)\n"
    "    local added = (g.comm_power_w - g.idle_power_w) *\n"
    "                    r.by_class.comm.time_s\n"
    "                  + (g.blocking_power_w - g.idle_power_w) *\n"
    "                    r.by_class.comm.time_s\n"
    "    assert(r.held_j < added, what)\n"
    "    local sum = r.blocked_j + r.idle_j\n"
    "    for _, v in pairs(r.by_class) do sum = sum + v.energy_j end\n"
    "    assert(math.abs(sum - r.energy_j) < 1e-9 * r.energy_j, what)\n"
    "  end\n"
    "end\n");
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/lua/limit-overlap", test_limit_overlap);
  g_test_add_func("/lua/boost-controller", test_boost_controller);
  g_test_add_func("/lua/gpu-price", test_gpu_price);
  g_test_add_func("/lua/gpu-price-tf32-caps", test_gpu_price_tf32_caps);
  g_test_add_func("/lua/zeus-a100-deep-caps", test_zeus_a100_deep_caps);
  g_test_add_func("/lua/simulate", test_simulate);
  g_test_add_func("/lua/trust", test_trust);
  g_test_add_func("/lua/gpu-memory", test_gpu_memory);
  g_test_add_func("/lua/node-energy", test_node_energy);
  g_test_add_func("/lua/determinism", test_determinism);
  g_test_add_func("/lua/threads", test_threads);
  g_test_add_func("/lua/results-roundtrip", test_results_roundtrip);
  g_test_add_func("/lua/random-is-seeded", test_random_is_seeded);
  g_test_add_func("/lua/gpu-table", test_gpu_table);
  for (guint i = 0; i < G_N_ELEMENTS(bad_cases); i++) {
    g_autofree char *p = g_strdup_printf("/lua/bad/%s", bad_cases[i].name);
    g_test_add_data_func(p, &bad_cases[i], test_bad);
  }
  return g_test_run();
}
