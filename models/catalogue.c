/* models/catalogue.c -- the embedded GPU catalogue, as C tables.
 *
 * Every number carries its source: a published figure (docs/sources.md, an
 * NVIDIA datasheet), a fit (docs/gpu-model.md, reproduced by
 * `test-gpu -m thorough -p /gpu/calibration/fit/<GPU>`), or "estimate:" with the
 * reasoning.  The model that reads these numbers is described in
 * models/gpu.c.  gpu_catalogue_new() validates and copies every entry.
 *
 * The first word of a source is machine-read (gpu_param_basis): "fit..."
 * and "estimate..." say what a number rests on, so a run on estimated
 * power terms says so (run/trust.h).  The record's held-out checks of
 * these entries are at the end of this file (heldout_checks).
 *
 * Conventions
 * - sm_default_mhz (what "auto" asks for) is the maximum boost clock; the
 *   power cap then decides what actually runs.
 * - v_max is a nominal 1 V: the model only uses V(f) / v_max, so v_min is
 *   the fitted voltage ratio at and below f_knee.
 * - activity.gemm = 1 defines the unit of p_dyn_w (a dense BF16 GEMM on
 *   random data); other classes are relative to it.  activity_tf32 scales
 *   it for kernels on the TF32 tensor rate (fitted on GH100 only).
 * - DRAM power p_mem_w = access energy per bit x bit rate at full bandwidth.
 */
#include "models/gpu.h"

#define P(val, src) {(val), (src)}

/* ---------------------------------------------------------------------- */
/* Shared sources                                                          */

#define SRC_README "docs/sources.md"
#define SRC_FIT_A100                                                         \
  "fit to tests/data/profiles/gpt3-175b+a100_sxm_bf16.csv, the A100 8192^3 " \
  "GEMM at 400 W (258 TFLOP/s) and blocking power 83.64 W, see "             \
  "docs/gpu-model.md"
#define SRC_VNOM "nominal 1 V: the model uses V(f)/v_max only"
/* The boost controller (sim/engine.c): the window is the sensor's
 * averaging (docs/sources.md: on A100/H100 the power sensor averages 25 ms
 * of every 100 ms); period and step are estimates. */
#define BOOST_PARAMS                                                        \
  .boost_window_ms =                                                        \
      P(25, SRC_README ": the power sensor averages 25 ms of every 100 ms"), \
  .boost_period_ms = P(5, "estimate: the controller decides every few ms"), \
  .boost_step_mhz = P(15, "estimate: one SM clock step per decision")
#define SRC_GEMM_EFF                                                         \
  "docs/sources.md: 8192^3 BF16 GEMM 295 TFLOP/s unthrottled (zeros) / 312 " \
  "peak = 0.945"
#define SRC_EST_EFF_C "estimate: fraction of peak FLOP rate for this class"
#define SRC_EST_EFF_M                                                       \
  "estimate: STREAM-like kernels reach ~85-90% of peak DRAM bandwidth; "     \
  "less for strided/gather access"
#define SRC_EST_ACT                                                         \
  "estimate: SM switching activity relative to a tensor GEMM (=1)"
#define SRC_ACT_GEMM "definition: unit of p_dyn_w (dense BF16 GEMM, random data)"
/* activity_tf32 where no TF32 load was measured on the part. */
#define SRC_EST_TF32(why)                                                   \
  "estimate: 1, a TF32 tensor op priced as the 16-bit unit (" why ")"
#define SRC_EST_TF32_NONE SRC_EST_TF32("no TF32 power measurement")
#define SRC_OVERHEAD "estimate: launch + tail of a kernel, a few microseconds"
#define SRC_ISSUE                                                           \
  "estimate: DRAM traffic the SMs (LSU + L2, SM clock domain) sustain per "  \
  "SM clock; 32 B/clk/SM = 4.9 TB/s on A100 at 1410 MHz, 2.4-3x DRAM; "      \
  "streaming kernels slow below bw / (n_sm x this)"

/* Per-class efficiencies.  GEMM efficiency is a parameter (the published
 * A100 figure for GA100; estimates elsewhere); the others are estimates
 * shared by every part. */
#define EFF_COMPUTE(gemm_eff, gemm_src)                                     \
  {                                                                          \
    [SIM_CLASS_GEMM] = P(gemm_eff, gemm_src),                                \
    [SIM_CLASS_ATTENTION] = P(0.60, SRC_EST_EFF_C ": batched head-dim 128 " \
                                                  "GEMMs"),                  \
    [SIM_CLASS_ELEMENTWISE] = P(0.50, SRC_EST_EFF_C),                        \
    [SIM_CLASS_NORM] = P(0.50, SRC_EST_EFF_C),                               \
    [SIM_CLASS_SOFTMAX] = P(0.50, SRC_EST_EFF_C),                            \
    [SIM_CLASS_REDUCTION] = P(0.50, SRC_EST_EFF_C),                          \
    [SIM_CLASS_EMBEDDING] = P(0.30, SRC_EST_EFF_C),                          \
    [SIM_CLASS_OPTIMIZER] = P(0.50, SRC_EST_EFF_C),                          \
    [SIM_CLASS_MEMCPY] = P(0.50, SRC_EST_EFF_C),                             \
    [SIM_CLASS_COMM] = P(0.30, SRC_EST_EFF_C),                               \
    [SIM_CLASS_OTHER] = P(0.50, SRC_EST_EFF_C),                              \
  }

#define EFF_MEMORY                                                          \
  {                                                                          \
    [SIM_CLASS_GEMM] = P(0.80, SRC_EST_EFF_M),                               \
    [SIM_CLASS_ATTENTION] = P(0.75, SRC_EST_EFF_M),                          \
    [SIM_CLASS_ELEMENTWISE] = P(0.85, SRC_EST_EFF_M),                        \
    [SIM_CLASS_NORM] = P(0.80, SRC_EST_EFF_M),                               \
    [SIM_CLASS_SOFTMAX] = P(0.80, SRC_EST_EFF_M),                            \
    [SIM_CLASS_REDUCTION] = P(0.75, SRC_EST_EFF_M),                          \
    [SIM_CLASS_EMBEDDING] = P(0.50, SRC_EST_EFF_M),                          \
    [SIM_CLASS_OPTIMIZER] = P(0.85, SRC_EST_EFF_M),                          \
    [SIM_CLASS_MEMCPY] = P(0.90, SRC_EST_EFF_M),                             \
    [SIM_CLASS_COMM] = P(0.50, SRC_EST_EFF_M),                               \
    [SIM_CLASS_OTHER] = P(0.60, SRC_EST_EFF_M),                              \
  }

/* Activity: GEMM is the unit; attention's batched GEMMs are smaller and
 * interleave softmax-like work; vector classes drive the load/store and ALU
 * paths, not the tensor cores (one shared value, fitted on A100). */
#define ACTIVITY(vec, vec_src)                                              \
  {                                                                          \
    [SIM_CLASS_GEMM] = P(1.0, SRC_ACT_GEMM),                                 \
    [SIM_CLASS_ATTENTION] = P(0.80, SRC_EST_ACT),                            \
    [SIM_CLASS_ELEMENTWISE] = P(vec, vec_src),                               \
    [SIM_CLASS_NORM] = P(vec, vec_src),                                      \
    [SIM_CLASS_SOFTMAX] = P(vec, vec_src),                                   \
    [SIM_CLASS_REDUCTION] = P(vec, vec_src),                                 \
    [SIM_CLASS_EMBEDDING] = P(vec, vec_src),                                 \
    [SIM_CLASS_OPTIMIZER] = P(vec, vec_src),                                 \
    [SIM_CLASS_MEMCPY] = P(0.20, SRC_EST_ACT ": copy engines/LSU only"),     \
    [SIM_CLASS_COMM] = P(0.30, SRC_EST_ACT ": NCCL kernels use a few SMs"),  \
    [SIM_CLASS_OTHER] = P(0.50, SRC_EST_ACT),                                \
  }

/* ---------------------------------------------------------------------- */
/* GA100 (A100): published facts, fitted power shape                       */

/* Fitted A100 power parameters (docs/gpu-model.md, section "Fit"). */
#define A100_P_CONST 54.5
#define A100_P_DYN 467.5
#define A100_P_LEAK 29.1
#define A100_V_MIN 0.772
#define A100_F_KNEE 1088.0
/* The PCIe boards' own V(f), fitted to the KernelTuner sweep of an A100
 * PCIe 40GB (tests/test-gpu.c, /gpu/calibration/vcurve/A100): lower and
 * convex, where the SXM4 stage fit's is linear from a higher knee. */
#define A100_PCIE_V_MIN 0.744
#define A100_PCIE_F_KNEE 944.0
#define A100_V_EXP 1.74
#define A100_PCIE_P_CONST 26.6
#define SRC_VCURVE_A100                                                     \
  "fit to tests/data/measured/kerneltuner/"                                \
  "a100_pcie_40gb_fp32_synthetic.csv (one FP32 kernel at 10 locked "        \
  "clocks on GA100), docs/gpu-model.md"
#define A100_STALL 0.20
#define A100_ACT_VEC 0.59
#define SRC_ACT_VEC_A100 "fit (one value for the vector classes), see " \
                         "docs/gpu-model.md"

#define SRC_ISSUE_DC                                                        \
  "estimate: as A100 (32 B/clk/SM of DRAM traffic from the SMs; streaming "  \
  "kernels slow below bw / (n_sm x this))"

/* Nothing measured on an A100 prices TF32: the KernelTuner sweep runs FP32
 * on the CUDA cores (another unit) and the Perseus runs do not state
 * their precision (TF32 or FP16, tests/data/measured/README.md). */
#define SRC_EST_TF32_A100                                                   \
  SRC_EST_TF32("the KernelTuner sweep is FP32 CUDA-core math; the Perseus " \
               "runs' precision is not stated")
#define A100_CLOCKS                                                         \
  .sm_min_mhz = P(210, SRC_README ": A100 SM clock 210-1410 MHz"),          \
  .sm_max_mhz = P(1410, SRC_README ": A100 SM clock 210-1410 MHz"),         \
  .sm_step_mhz = P(15, SRC_README ": 15 MHz steps"),                        \
  .sm_default_mhz = P(1410, "max boost (" SRC_README ")"),                  \
  .n_sm = P(108, SRC_README ": A100 108 SMs"),                              \
  .tensor_flop_per_clk_sm =                                                 \
      P(2048, SRC_README ": 312 TFLOP/s dense BF16 = 2048 FLOP/clk/SM"),    \
  .dense_bf16_tflops =                                                      \
      P(312, "NVIDIA A100 datasheet: 312 TFLOP/s dense BF16 (624 with "    \
             "sparsity), SXM4 and PCIe"),                                   \
  .vector_flop_per_clk_sm =                                                 \
      P(128, "NVIDIA A100 datasheet: 19.5 TFLOP/s FP32 = 64 FMA/clk/SM"),   \
  .tf32_flop_per_clk_sm =                                                   \
      P(1024, "NVIDIA A100 datasheet: 156 TFLOP/s dense TF32 = 1024 "       \
              "FLOP/clk/SM"),                                               \
  .fp8_flop_per_clk_sm = P(0, "no FP8 tensor cores on Ampere (FP8 arrives "  \
                              "with Ada and Hopper, sm_89/sm_90)"),          \
  .fp8_gemm_eff_ratio = P(0, "no FP8 tensor cores"),                        \
  .mem_issue_bytes_per_clk_sm = P(32, SRC_ISSUE),                           \
  .kernel_overhead_us = P(3, SRC_OVERHEAD),                                 \
  .switch_latency_ms =                                                      \
      P(10, "estimate within " SRC_README " range (~1 ms to hundreds of "   \
            "ms; ~6 ms reported on H200)"),                                 \
  .eff_compute = EFF_COMPUTE(0.945, SRC_GEMM_EFF), .eff_memory = EFF_MEMORY

/* The fitted power shape, for the SXM4 parts (the fit's own cards). */
#define A100_POWER(src, floor, vshape)                                      \
  floor, .p_dyn_w = P(A100_P_DYN, src), .v_max = P(1.0, SRC_VNOM), vshape,  \
  .stall_activity = P(A100_STALL, src),                                     \
  BOOST_PARAMS,                                                             \
  .activity = ACTIVITY(A100_ACT_VEC, SRC_ACT_VEC_A100),                     \
  .activity_tf32 = P(1, SRC_EST_TF32_A100)

#define A100_SXM_FLOOR                                                      \
  .p_const_w = P(A100_P_CONST, SRC_FIT_A100),                               \
  .p_leak_w = P(A100_P_LEAK, SRC_FIT_A100)
#define A100_PCIE_FLOOR                                                     \
  .p_const_w = P(A100_PCIE_P_CONST, SRC_VCURVE_A100 ": the PCIe board's "   \
                 "floor, P_leak : P_const as the SXM4 fit"),                \
  .p_leak_w = P(A100_PCIE_P_CONST * A100_P_LEAK / A100_P_CONST,             \
                SRC_VCURVE_A100 ": the PCIe board's floor, P_leak : "       \
                "P_const as the SXM4 fit")
#define A100_SXM_VSHAPE                                                     \
  .v_min = P(A100_V_MIN, SRC_FIT_A100 " (ratio to v_max)"),                 \
  .f_knee_mhz = P(A100_F_KNEE, SRC_FIT_A100),                               \
  .v_curve_exp = P(0, "fit form: linear above the knee (the SXM4 stage "    \
                      "profile has no locked-clock sweep of its own)")
#define A100_PCIE_VSHAPE                                                    \
  .v_min = P(A100_PCIE_V_MIN, SRC_VCURVE_A100 " (ratio to v_max)"),         \
  .f_knee_mhz = P(A100_PCIE_F_KNEE, SRC_VCURVE_A100),                       \
  .v_curve_exp = P(A100_V_EXP, SRC_VCURVE_A100)

#define A100_SXM_COMMON                                                     \
  A100_CLOCKS, A100_POWER(SRC_FIT_A100, A100_SXM_FLOOR, A100_SXM_VSHAPE),                                    \
  .power_min_w = P(100, SRC_README ": A100 power limit min 100 W"),         \
  .idle_power_w = P(60, SRC_README ": A100 idle ~55-65 W"),                 \
  .blocked_power_w =                                                        \
      P(83.64, SRC_README ": A100 blocked in NCCL P2P receive 83.64 W"),    \
  .comm_power_w = P(110, "estimate (not published): blocked 83.64 W plus "  \
                         "a few SMs and NVLink busy")

/* ---------------------------------------------------------------------- */
/* GH100 (H100, H200): published facts; power fitted on the H100 cap curve */

/* Fitted on the one published H100 power-versus-clock curve, an H100 SXM
 * 94 GB (HBM2e) under caps of 200-700 W (tests/data/measured/h100-powercap,
 * `joulesim fidelity --only h100-powercap --refit`; docs/gpu-model.md "The
 * H100 fit"): the memory rail's static and traffic power, the V(f) curve,
 * P_const and P_leak (with the idle and context power of an H100 SXM 80 GB
 * as two more facts), and P_dyn from the 8192^3 BF16 GEMM's 798 TFLOP/s at
 * 700 W on an H100 SXM5 80GB.  The SM-side terms carry to every GH100 part
 * (same die and clocks); the PCIe part's to its 114 SMs and 1755 MHz; the
 * memory terms to the other memories by their bandwidth (estimates). */
#define H100_P_CONST 0.0
#define H100_P_LEAK 59.4
#define H100_P_DYN 786.0
#define H100_V_MIN 0.795
#define H100_F_KNEE 1135.0
#define H100_V_EXP 1.91
#define H100_MEM_STATIC 47.9
#define H100_MEM_PJ_BIT 6.68
/* The H100 PCIe: the SXM curve read relative to V(1755) = 0.9083. */
#define H100_PCIE_P_DYN 496.5
#define H100_PCIE_P_LEAK 38.5
#define H100_PCIE_V_MIN 0.875
/* The TF32 tensor unit's activity on GH100 (every GH100 part: the same
 * SMs). */
#define H100_ACT_TF32 0.622
#define SRC_FIT_H100_TF32                                                   \
  "fit to tests/data/measured/h100-powercap (ViT-L/16 in TF32, its FC1 "    \
  "GEMM, on the H100 SXM 94GB at caps 200, 400, 600, 700 W) with p_dyn_w " \
  "from the BF16 GEMM, see docs/gpu-model.md \"The H100 fit\""
#define SRC_FIT_H100                                                        \
  "fit to tests/data/measured/h100-powercap (H100 SXM 94GB, caps 200, "     \
  "400, 600, 700 W), H100 idle and context power and the 8192^3 BF16 "      \
  "GEMM at 700 W, see docs/gpu-model.md \"The H100 fit\""
#define SRC_FIT_H100_DIE SRC_FIT_H100 " (same GH100 die and clocks)"
#define SRC_H100_GEMM_EFF                                                   \
  "derived: 8192^3 BF16 GEMM 894 TFLOP/s on zeros at 1980 MHz (H200, "     \
  "tests/data/measured/README.md) / 1070 peak"
/* FP8 GEMMs against BF16 ones: fitted on one published end-to-end rate
 * (docs/gpu-model.md, "FP8 GEMMs"; the other rows of the table predicted
 * in docs/fidelity.md). */
#define H100_FP8_GEMM_RATIO 0.73
#define SRC_FIT_H100_FP8                                                    \
  "fit to published/llama-h100 (NeMo 24.12: Llama 2 7B, FP8, 8 H100s, "     \
  "780 TFLOP/s per GPU), see docs/gpu-model.md \"FP8 GEMMs\""
#define SRC_FIT_H100_FP8_DIE SRC_FIT_H100_FP8 " (same GH100 die)"
#define SRC_H100_STALL                                                      \
  "estimate: as the A100 fit (a compute-bound GEMM cannot show it)"
#define H100_ACT_VEC_SRC "estimate: as the A100 fit"
#define SRC_H100_IDLE                                                       \
  "tests/data/measured/README.md: bare idle of an H100 SXM 80 GB 71.8 W"
#define SRC_H100_BLOCKED                                                    \
  "tests/data/measured/README.md: H100 idle 71.8 W plus 26-50 W for a "     \
  "CUDA context without kernels (midpoint)"
/* The memory rail's traffic power at full bandwidth of another HBM part:
 * the fit's energy per bit times its bandwidth (estimate: HBM3/3e move a
 * bit for somewhat less than HBM2e). */
#define H100_P_MEM(gbps) (H100_MEM_PJ_BIT * 8e-3 * (gbps))
#define SRC_H100_PMEM                                                       \
  "estimate: the H100 94GB fit's 6.68 pJ/bit x this bandwidth"
#define SRC_H100_MEM_STATIC                                                 \
  "estimate: the H100 94GB fit's memory rail at no traffic (another "       \
  "HBM generation or stack count)"

/* The SM side of the fit, on a GH100 part at 1980 MHz. */
#define H100_SM_POWER(src)                                                  \
  .p_const_w = P(H100_P_CONST, src), .p_dyn_w = P(H100_P_DYN, src),         \
  .p_leak_w = P(H100_P_LEAK, src), .v_min = P(H100_V_MIN, src),             \
  .v_max = P(1.0, SRC_VNOM), .f_knee_mhz = P(H100_F_KNEE, src),             \
  .v_curve_exp = P(H100_V_EXP, src),                                        \
  .stall_activity = P(A100_STALL, SRC_H100_STALL), BOOST_PARAMS,            \
  .activity = ACTIVITY(A100_ACT_VEC, H100_ACT_VEC_SRC),                     \
  .activity_tf32 = P(H100_ACT_TF32, SRC_FIT_H100_TF32)

/* An H100 SXM5's facts, shared by the 80 GB and 94 GB boards. */
#define H100_SXM5_COMMON                                                    \
  .sm_min_mhz = P(345, SRC_README ": H100 SM clock 345-1980 MHz"),          \
  .sm_max_mhz = P(1980, SRC_README ": H100 SM clock 345-1980 MHz"),         \
  .sm_step_mhz = P(15, SRC_README ": 15 MHz steps"),                        \
  .sm_default_mhz = P(1980, "max boost (" SRC_README ")"),                  \
  .n_sm = P(132, SRC_README ": H100 SXM5 132 SMs"),                         \
  .tensor_flop_per_clk_sm =                                                 \
      P(4096, SRC_README ": 989 TFLOP/s dense BF16 at 1830 MHz = 4096 "     \
              "FLOP/clk/SM"),                                               \
  .vector_flop_per_clk_sm =                                                 \
      P(256, "NVIDIA H100 datasheet: 67 TFLOP/s FP32 = 128 FMA/clk/SM"),    \
  .tf32_flop_per_clk_sm =                                                   \
      P(2048, "NVIDIA H100 datasheet: SXM5 494.7 TFLOP/s dense TF32 (989 "  \
              "with sparsity) = 2048 FLOP/clk/SM, half the BF16 rate"),     \
  .dense_bf16_tflops =                                                      \
      P(989, "NVIDIA H100 datasheet: SXM5 989 TFLOP/s dense BF16 (1979 "    \
             "with sparsity), at the 1830 MHz boost clock"),                \
  .fp8_flop_per_clk_sm =                                                    \
      P(8192, "NVIDIA H100 datasheet: SXM5 1979 TFLOP/s dense FP8 (3958 "   \
              "with sparsity) = 8192 FLOP/clk/SM, twice the BF16 rate"),    \
  .fp8_gemm_eff_ratio = P(H100_FP8_GEMM_RATIO, SRC_FIT_H100_FP8),           \
  .mem_issue_bytes_per_clk_sm = P(32, SRC_ISSUE_DC),                        \
  .kernel_overhead_us = P(3, SRC_OVERHEAD),                                 \
  .eff_compute = EFF_COMPUTE(0.835, SRC_H100_GEMM_EFF),                     \
  .eff_memory = EFF_MEMORY,                                                 \
  .power_limit_w = P(700, SRC_README ": H100 default power limit 700 W"),   \
  .power_min_w = P(200, SRC_README ": H100 power limit min 200 W"),         \
  .power_max_w = P(700, SRC_README ": H100 SXM5 700 W"),                    \
  .idle_power_w = P(71.8, SRC_H100_IDLE),                                   \
  .blocked_power_w = P(110, SRC_H100_BLOCKED),                              \
  .comm_power_w = P(150, "estimate (not published): blocked 110 W plus "    \
                         "NCCL SMs and NVLink4 busy"),                      \
  .switch_latency_ms =                                                      \
      P(6, SRC_README ": ~6 ms reported on H200 (same Hopper family)")

/* ---------------------------------------------------------------------- */
/* GA102 (A40, RTX 3080 Ti)                                                */

/* Fitted A40 power parameters (docs/gpu-model.md, section "A40"). */
#define SRC_GA102_VLIN                                                      \
  "linear above the knee: no locked-clock sweep of a GA102 part in the "    \
  "data (GA100's is convex, exponent 1.74)"
#define A40_STALL 0.87
#define RTX3080TI_STALL A40_STALL
#define RTX3080TI_MEM_STATIC 114.0
#define RTX3080TI_P_DYN 192.0
#define RTX3080TI_BOOST 1995
#define SRC_FIT_STUDY                                                       \
  "fit to the kernel-DVFS study's GEMM rows at 5001 MHz memory "            \
  "(tests/data/measured/kernel-dvfs-study; joulesim fidelity --refit), "    \
  "docs/gpu-model.md"
#define A40_P_CONST 51.9
#define A40_P_DYN 349.5
#define A40_P_LEAK 18.5
#define A40_V_MIN 0.7606
#define A40_F_KNEE 1060.0
#define A40_ACT_VEC 0.78
#define SRC_FIT_A40                                                         \
  "fit to tests/data/profiles/gpt3-175b+a40_bf16.csv and blocking power "   \
  "70.38 W, see docs/gpu-model.md"


/* ---------------------------------------------------------------------- */
/* GV100 (V100), GH100 with HBM3e (H200), AD102 (L40S): the GPUs public     */
/* traces come from, so an imported trace finds its own device here.       */
/* Published facts; every power and voltage parameter is scaled from the   */
/* A100 or A40 fit ("estimate").                                           */

/* V100 SXM2 (300 W): P_dyn and P_leak scale from the A100 fit by TDP
 * 300/400 W, P_const by idle ~45/60 W; voltage shape as GA100 with the
 * knee at the same 0.67 f_max as the H100 entries. */
#define V100_P_CONST 40.9
#define V100_P_DYN 350.6
#define V100_P_LEAK 21.8
#define SRC_V100_SCALE                                                      \
  "estimate: A100 fit scaled by TDP 300/400 W (not measured on V100)"
#define SRC_V100_CONST                                                      \
  "estimate: A100 fit 54.5 W scaled by idle ~45/60 W (V100 SXM2 idles "     \
  "near 40-50 W in nvidia-smi reports; not in docs/sources.md)"
#define SRC_V100_SHAPE                                                      \
  "estimate: GA100 voltage shape (v_min ratio, exponent 1.74, A100 stall "  \
  "activity), knee at 0.67 f_max"
#define SRC_V100_DS "NVIDIA Tesla V100 datasheet (SXM2)"

#define V100_SXM2_COMMON                                                    \
  .sm_min_mhz = P(135, "nvidia-smi -q -d SUPPORTED_CLOCKS on V100 SXM2: "   \
                       "135-1530 MHz"),                                     \
  .sm_max_mhz = P(1530, SRC_V100_DS ": boost 1530 MHz"),                    \
  .sm_step_mhz = P(15, "estimate: nvidia-smi lists 7-8 MHz steps on V100 " \
                       "(1530, 1522, 1515, ...); every other one, as the " \
                       "model's grid is whole MHz"),                        \
  .sm_default_mhz = P(1530, "max boost (" SRC_V100_DS ")"),                 \
  .n_mem_clocks = 1,                                                        \
  .mem_mhz = {P(877, "derived: 900 GB/s on 4096-bit HBM2 = 1.75 Gbps/pin = " \
                     "2 x 877 MHz; fixed")},                                \
  .n_sm = P(80, SRC_V100_DS ": 80 SMs (5120 CUDA cores)"),                  \
  .tensor_flop_per_clk_sm =                                                 \
      P(1024, SRC_V100_DS ": 125 TFLOP/s FP16 tensor at 1530 MHz = 1024 "   \
              "FLOP/clk/SM (no BF16 on Volta: 16-bit means FP16)"),         \
  .dense_bf16_tflops =                                                      \
      P(125, SRC_V100_DS ": 125 TFLOP/s FP16 tensor (no BF16 on Volta)"),  \
  .vector_flop_per_clk_sm =                                                 \
      P(128, SRC_V100_DS ": 15.7 TFLOP/s FP32 = 64 FMA/clk/SM"),            \
  .tf32_flop_per_clk_sm =                                                   \
      P(128, "no TF32 on Volta: a TF32 request (allow_tf32) runs FP32 on "  \
             "the CUDA cores, so the FP32 rate"),                           \
  .fp8_flop_per_clk_sm = P(0, "no FP8 tensor cores on Volta"),              \
  .fp8_gemm_eff_ratio = P(0, "no FP8 tensor cores"),                        \
  .mem_bw_gbps = P(900, SRC_V100_DS ": 900 GB/s HBM2"),                     \
  .mem_issue_bytes_per_clk_sm = P(32, SRC_ISSUE_DC),                        \
  .kernel_overhead_us = P(3, SRC_OVERHEAD),                                 \
  .eff_compute = EFF_COMPUTE(0.85, "estimate: large FP16 GEMMs reach "      \
                                   "~100-110 of 125 TFLOP/s on V100"),      \
  .eff_memory = EFF_MEMORY,                                                 \
  .power_limit_w = P(300, SRC_V100_DS ": 300 W"),                           \
  .power_min_w = P(150, "nvidia-smi -q -d POWER on V100 SXM2: min power "   \
                        "limit 150 W"),                                     \
  .power_max_w = P(300, SRC_V100_DS ": 300 W"),                             \
  .idle_power_w = P(45, SRC_V100_CONST),                                    \
  .blocked_power_w = P(62.7, "estimate (not published): P_const + P_leak, " \
                             "as the A100/A40 fits make it"),               \
  .comm_power_w = P(85, "estimate (not published): blocked plus NCCL SMs " \
                        "and NVLink2 busy"),                                \
  .p_const_w = P(V100_P_CONST, SRC_V100_CONST),                             \
  .p_mem_w = P(28.1, "estimate: ~3.9 pJ/bit HBM2 access energy x 900 "      \
                     "GB/s"),                                               \
  .p_mem_static_w = P(0, "not modelled: one fixed memory clock, its static " \
                         "power is part of p_const_w"),                     \
  .p_dyn_w = P(V100_P_DYN, SRC_V100_SCALE),                                 \
  .p_leak_w = P(V100_P_LEAK, SRC_V100_SCALE),                               \
  .v_min = P(A100_V_MIN, SRC_V100_SHAPE),                                   \
  .v_max = P(1.0, SRC_VNOM),                                                \
  .f_knee_mhz = P(1028, SRC_V100_SHAPE),                                  \
  .v_curve_exp = P(A100_V_EXP, SRC_V100_SHAPE),                             \
  .stall_activity = P(A100_STALL, SRC_V100_SHAPE),                          \
  BOOST_PARAMS,                                                             \
  .switch_latency_ms =                                                      \
      P(10, "estimate within " SRC_README " range (~1 ms to hundreds of "   \
            "ms)"),                                                         \
  .activity = ACTIVITY(A100_ACT_VEC, "estimate: as the A100 fit"),        \
  .activity_tf32 = P(1, SRC_EST_TF32("no TF32 tensor cores on Volta: "      \
                                     "FP32 on the CUDA cores"))

/* L40S (AD102, 350 W): power scaled from the A40 fit (GA102, 300 W) by
 * TDP 350/300 W; voltage shape as the A40 fit with the knee at the same
 * fraction of f_max. */
#define L40S_P_DYN 407.8
#define L40S_P_LEAK 21.6
#define SRC_L40S_DS "NVIDIA L40S datasheet"
#define SRC_L40S_SCALE                                                      \
  "estimate: A40 fit scaled by TDP 350/300 W (not measured on L40S)"

static const GpuSpec builtins[] = {
  {
    .name = "A100-SXM4-40GB",
    .memory_gb = P(40, "NVIDIA A100 datasheet: 40GB HBM2"),
    .description = "NVIDIA A100 SXM4 40GB (HBM2, 400 W)",
    A100_SXM_COMMON,
    .n_mem_clocks = 1,
    .mem_mhz = {P(1215, SRC_README ": A100 40GB memory clock 1215 MHz, "
                        "fixed")},
    .mem_bw_gbps = P(1555, SRC_README ": A100 40GB 1555 GB/s"),
    .power_limit_w = P(400, SRC_README ": A100 default power limit 400 W"),
    .power_max_w = P(400, "NVIDIA A100 datasheet: 400 W max TDP (SXM4)"),
    .p_mem_w = P(48.5, "estimate: ~3.9 pJ/bit HBM2 access energy x "
                       "1555 GB/s"),
    .p_mem_static_w = P(0, "not modelled: one fixed memory clock, its static "
                           "power is part of p_const_w"),
  },
  {
    .name = "A100-SXM4-80GB",
    .memory_gb = P(80, "NVIDIA A100 datasheet: 80GB HBM2e"),
    .description = "NVIDIA A100 SXM4 80GB (HBM2e, 400 W; 500 W variants)",
    A100_SXM_COMMON,
    .n_mem_clocks = 1,
    .mem_mhz = {P(1593, SRC_README ": A100 80GB memory clock 1593 MHz, "
                        "fixed")},
    .mem_bw_gbps = P(2039, SRC_README ": A100 80GB 2039 GB/s"),
    .power_limit_w = P(400, SRC_README ": A100 default power limit 400 W"),
    .power_max_w = P(500, SRC_README ": 500 W variants exist (the "
                          "Perseus profile's card)"),
    .p_mem_w = P(63.6, "estimate: ~3.9 pJ/bit HBM2e access energy x "
                       "2039 GB/s"),
    .p_mem_static_w = P(0, "not modelled: one fixed memory clock, its static "
                           "power is part of p_const_w"),
  },
  {
    .name = "A100-PCIE-80GB",
    .memory_gb = P(80, "NVIDIA A100 datasheet: PCIe 80GB HBM2e"),
    .description = "NVIDIA A100 PCIe 80GB (HBM2e, 300 W)",
    A100_CLOCKS,
    A100_POWER("estimate: same GA100 die as the SXM4 fit", A100_PCIE_FLOOR,
               A100_PCIE_VSHAPE),
    .n_mem_clocks = 1,
    .mem_mhz = {P(1512, "NVIDIA A100 PCIe 80GB: memory clock 1512 MHz")},
    .mem_bw_gbps = P(1935, "NVIDIA A100 datasheet: PCIe 80GB 1935 GB/s"),
    .power_limit_w = P(300, "NVIDIA A100 datasheet: PCIe max TDP 300 W"),
    .power_min_w = P(150, "estimate: PCIe board minimum limit"),
    .power_max_w = P(300, "NVIDIA A100 datasheet: PCIe max TDP 300 W"),
    .idle_power_w = P(60, "estimate: as A100 SXM (" SRC_README
                          ": ~55-65 W)"),
    .blocked_power_w = P(83.64, "estimate: A100 SXM figure (" SRC_README
                                ": 83.64 W)"),
    .comm_power_w = P(110, "estimate (not published): as A100 SXM"),
    .p_mem_w = P(60.4, "estimate: ~3.9 pJ/bit HBM2e access energy x "
                       "1935 GB/s"),
    .p_mem_static_w = P(21, "fit to the Perseus plan-2 run of Bloom 3B on 4 x "
                            "A100 PCIe (tests/data/measured/perseus-runs/"
                            "bloom-3b_a100_dp1_pp4_tp1_plans.csv: 221.0 W "
                            "per GPU at SM clocks 1028-1050 MHz), the job "
                            "at a locked 1035 MHz, docs/gpu-model.md: the "
                            "HBM2e interface while in use, which the "
                            "KernelTuner floor (no DRAM traffic) leaves out"),
  },
  {
    .name = "H100-SXM5-80GB",
    .memory_gb = P(80, "NVIDIA H100 datasheet: SXM5 80GB HBM3"),
    .description = "NVIDIA H100 SXM5 80GB (HBM3, 700 W)",
    H100_SXM5_COMMON,
    .n_mem_clocks = 1,
    .mem_mhz = {P(2619, SRC_README ": H100 memory clock 2619 MHz, fixed")},
    .mem_bw_gbps = P(3350, SRC_README ": H100 SXM5 3350 GB/s"),
    .p_mem_w = P(H100_P_MEM(3350), SRC_H100_PMEM),
    .p_mem_static_w = P(H100_MEM_STATIC, SRC_H100_MEM_STATIC),
    H100_SM_POWER(SRC_FIT_H100_DIE),
  },
  {
    .name = "H100-SXM5-94GB",
    .memory_gb = P(94, "tests/data/measured/README.md: H100 SXM 94 GB "
                       "HBM2e"),
    .description = "NVIDIA H100 SXM 94GB (HBM2e, 700 W; the card of the "
                   "measured cap curve)",
    H100_SXM5_COMMON,
    .n_mem_clocks = 1,
    .mem_mhz = {P(1569, "derived: 2.41 TB/s on six 1024-bit HBM2e stacks = "
                        "3.14 Gbps/pin = 2 x 1569 MHz; fixed")},
    .mem_bw_gbps = P(2410, "tests/data/measured/README.md: H100 SXM 94 GB "
                           "HBM2e, 2.41 TB/s"),
    .p_mem_w = P(H100_P_MEM(2410), SRC_FIT_H100 ": the memory rail's "
                 "traffic power at full bandwidth"),
    .p_mem_static_w = P(H100_MEM_STATIC, SRC_FIT_H100 ": the memory rail "
                        "at no traffic"),
    H100_SM_POWER(SRC_FIT_H100),
  },
  {
    .name = "H100-PCIE-80GB",
    .memory_gb = P(80, "NVIDIA H100 datasheet: PCIe 80GB HBM2e"),
    .description = "NVIDIA H100 PCIe 80GB (HBM2e, 350 W)",
    .sm_min_mhz = P(345, "estimate: as H100 SXM5 (" SRC_README ")"),
    .sm_max_mhz = P(1755, "NVIDIA H100 PCIe: max boost 1755 MHz"),
    .sm_step_mhz = P(15, "as H100 SXM5 (" SRC_README ")"),
    .sm_default_mhz = P(1755, "max boost"),
    .n_mem_clocks = 1,
    .mem_mhz = {P(1593, "HBM2e as A100 80GB: 1593 MHz (2039 GB/s on 5120 "
                        "bits)")},
    .n_sm = P(114, "NVIDIA H100 PCIe datasheet: 114 SMs"),
    .tensor_flop_per_clk_sm =
        P(4096, "NVIDIA H100 datasheet: PCIe 756 TFLOP/s dense BF16 = 4096 "
                "FLOP/clk/SM x 114 SMs x 1620 MHz"),
    .dense_bf16_tflops =
        P(756, "NVIDIA H100 datasheet: PCIe 756 TFLOP/s dense BF16 (1513 "
               "with sparsity)"),
    .vector_flop_per_clk_sm = P(256, "GH100: 128 FP32 FMA/clk/SM"),
    .tf32_flop_per_clk_sm =
        P(2048, "NVIDIA H100 datasheet: PCIe 378 TFLOP/s dense TF32 (756 "
                "with sparsity), half the BF16 rate"),
    .fp8_flop_per_clk_sm =
        P(8192, "NVIDIA H100 datasheet: PCIe 1513 TFLOP/s dense FP8 (3026 "
                "with sparsity) = 8192 FLOP/clk/SM x 114 SMs x 1620 MHz"),
    .fp8_gemm_eff_ratio = P(H100_FP8_GEMM_RATIO, SRC_FIT_H100_FP8_DIE),
    .mem_bw_gbps = P(2039, "NVIDIA H100 datasheet: PCIe 2 TB/s (HBM2e, "
                           "5120-bit at 1593 MHz)"),
    .mem_issue_bytes_per_clk_sm = P(32, SRC_ISSUE_DC),
    .kernel_overhead_us = P(3, SRC_OVERHEAD),
    .eff_compute = EFF_COMPUTE(0.835, SRC_H100_GEMM_EFF),
    .eff_memory = EFF_MEMORY,
    .power_limit_w = P(350, "NVIDIA H100 datasheet: PCIe max TDP 350 W"),
    .power_min_w = P(200, "estimate: as H100 SXM5 (" SRC_README ")"),
    .power_max_w = P(350, "NVIDIA H100 datasheet: PCIe max TDP 350 W"),
    .idle_power_w = P(70, "estimate: low end of " SRC_README
                          " H100 idle ~65-100 W"),
    .blocked_power_w = P(110, "estimate: as the H100 SXM (" SRC_H100_BLOCKED
                              ")"),
    .comm_power_w = P(140, "estimate (not published): blocked plus NCCL "
                           "SMs and PCIe/NVLink bridge busy"),
    .p_const_w = P(H100_P_CONST, "estimate: as the H100 SXM fit (a PCIe "
                                 "board of its own)"),
    .p_mem_w = P(H100_P_MEM(2039), SRC_H100_PMEM),
    .p_mem_static_w = P(H100_MEM_STATIC * 5.0 / 6.0, SRC_H100_MEM_STATIC
                        ": five stacks of the 94GB's six"),
    .p_dyn_w = P(H100_PCIE_P_DYN, SRC_FIT_H100 ": x 114/132 SMs x "
                 "1755/1980 MHz x V(1755)^2"),
    .p_leak_w = P(H100_PCIE_P_LEAK, SRC_FIT_H100 ": x 114/132 SMs x "
                  "V(1755)^3"),
    .v_min = P(H100_PCIE_V_MIN, SRC_FIT_H100 ": v_min / V(1755)"),
    .v_max = P(1.0, SRC_VNOM),
    .f_knee_mhz = P(H100_F_KNEE, SRC_FIT_H100_DIE),
    .v_curve_exp = P(H100_V_EXP, SRC_FIT_H100_DIE),
    .stall_activity = P(A100_STALL, SRC_H100_STALL),
    BOOST_PARAMS,
    .switch_latency_ms =
        P(6, SRC_README ": ~6 ms reported on H200 (same Hopper family)"),
    .activity = ACTIVITY(A100_ACT_VEC, H100_ACT_VEC_SRC),
    .activity_tf32 = P(H100_ACT_TF32, SRC_FIT_H100_TF32),
  },
  {
    .name = "A40",
    .memory_gb = P(48, "NVIDIA A40 datasheet: 48 GB GDDR6 with ECC"),
    .description = "NVIDIA A40 48GB (GA102, GDDR6, 300 W)",
    .sm_min_mhz = P(210, SRC_README ": A40 SM clock 210-1740 MHz"),
    .sm_max_mhz = P(1740, SRC_README ": A40 SM clock 210-1740 MHz"),
    .sm_step_mhz = P(15, "15 MHz steps, as the Perseus A40 profile "
                         "(docs/sources.md)"),
    .sm_default_mhz = P(1740, "max boost (" SRC_README ")"),
    .n_mem_clocks = 1,
    .mem_mhz = {P(7251, "derived: 696 GB/s on a 384-bit GDDR6 bus = 14.5 "
                        "Gbps/pin = 2 x 7251 MHz; fixed (" SRC_README ")")},
    .n_sm = P(84, SRC_README ": A40 84 SMs"),
    .tensor_flop_per_clk_sm =
        P(1024, SRC_README ": ~150 TFLOP/s BF16 = 1024 FLOP/clk/SM x 84 x "
                "1740 MHz"),
    .dense_bf16_tflops =
        P(149.7, "NVIDIA A40 datasheet: 149.7 TFLOP/s dense BF16 (299.4 "
                 "with sparsity)"),
    .vector_flop_per_clk_sm = P(256, "NVIDIA A40 datasheet: 37.4 TFLOP/s "
                                     "FP32 = 128 FMA/clk/SM"),
    .tf32_flop_per_clk_sm =
        P(512, "NVIDIA A40 datasheet: 74.8 TFLOP/s dense TF32 (149.6 with "
               "sparsity), half the BF16 rate"),
    .fp8_flop_per_clk_sm = P(0, "no FP8 tensor cores on Ampere (GA102)"),
    .fp8_gemm_eff_ratio = P(0, "no FP8 tensor cores"),
    .mem_bw_gbps = P(696, SRC_README ": A40 696 GB/s"),
    .mem_issue_bytes_per_clk_sm = P(32, SRC_ISSUE_DC),
    .kernel_overhead_us = P(3, SRC_OVERHEAD),
    .eff_compute = EFF_COMPUTE(0.80, "estimate: large BF16 GEMM share of "
                                     "peak on GA102"),
    .eff_memory = EFF_MEMORY,
    .power_limit_w = P(300, SRC_README ": A40 300 W"),
    .power_min_w = P(100, "estimate: board minimum limit"),
    .power_max_w = P(300, SRC_README ": A40 300 W"),
    .idle_power_w = P(30, "estimate (not published here): passive 300 W "
                          "board at idle clocks"),
    .blocked_power_w =
        P(70.38, SRC_README ": A40 blocked in NCCL P2P receive 70.38 W"),
    .comm_power_w = P(90, "estimate (not published): blocked 70.38 W plus "
                          "NCCL SMs and PCIe busy"),
    .p_const_w = P(A40_P_CONST, SRC_FIT_A40),
    .p_mem_w = P(41.8, "estimate: ~7.5 pJ/bit GDDR6 access energy x "
                       "696 GB/s"),
    .p_mem_static_w = P(0, "not modelled: one fixed memory clock, its static "
                           "power is part of p_const_w"),
    .p_dyn_w = P(A40_P_DYN, SRC_FIT_A40),
    .p_leak_w = P(A40_P_LEAK, SRC_FIT_A40),
    .v_min = P(A40_V_MIN, SRC_FIT_A40 " (ratio to v_max)"),
    .v_max = P(1.0, SRC_VNOM),
    .f_knee_mhz = P(A40_F_KNEE, SRC_FIT_A40),
    .v_curve_exp = P(0, SRC_GA102_VLIN),
    .stall_activity = P(A40_STALL, SRC_FIT_A40),
    BOOST_PARAMS,
    .switch_latency_ms =
        P(10, "estimate within " SRC_README " range (~1 ms to hundreds of "
              "ms)"),
    .activity = ACTIVITY(A40_ACT_VEC, SRC_FIT_A40),
    .activity_tf32 = P(1, SRC_EST_TF32("the A40 stage profiles' precision "
                                       "is not stated")),
  },
  {
    .name = "RTX-3080-Ti",
    .memory_gb = P(12, "NVIDIA GeForce RTX 3080 Ti specifications: 12 GB "
                       "GDDR6X"),
    .description = "NVIDIA GeForce RTX 3080 Ti (GA102, GDDR6X, 350 W; "
                   "memory-clock DVFS)",
    .sm_min_mhz = P(210, SRC_README ": RTX 3080 Ti SM clock 210-2100 MHz"),
    .sm_max_mhz = P(2100, SRC_README ": RTX 3080 Ti SM clock 210-2100 MHz"),
    .sm_step_mhz = P(15, SRC_README ": 15 MHz steps"),
    .sm_default_mhz = P(RTX3080TI_BOOST, SRC_FIT_STUDY ": the clock the "
                        "driver's boost reaches under load (2100 MHz can be "
                        "locked, " SRC_README ")"),
    .n_mem_clocks = 5,
    .mem_mhz = {P(405, SRC_README ": 405, 810, 5001, 9251, 9501 MHz"),
                P(810, SRC_README ": 405, 810, 5001, 9251, 9501 MHz"),
                P(5001, SRC_README ": 405, 810, 5001, 9251, 9501 MHz"),
                P(9251, SRC_README ": 405, 810, 5001, 9251, 9501 MHz"),
                P(9501, SRC_README ": 405, 810, 5001, 9251, 9501 MHz")},
    .n_sm = P(80, SRC_README ": RTX 3080 Ti 80 SMs"),
    .tensor_flop_per_clk_sm =
        P(512, SRC_README ": ~68 TFLOP/s BF16 with FP32 accumulation (half "
               "rate) = 512 FLOP/clk/SM x 80 x 1665 MHz boost"),
    .dense_bf16_tflops =
        P(68.2, SRC_README ": 68.2 TFLOP/s dense BF16 with FP32 "
                "accumulation at the 1665 MHz boost (GeForce half rate; "
                "NVIDIA's 273 TFLOP/s is FP16 accumulation with sparsity)"),
    .vector_flop_per_clk_sm = P(256, "GA102: 128 FP32 FMA/clk/SM (34.1 "
                                     "TFLOP/s at 1665 MHz)"),
    .tf32_flop_per_clk_sm =
        P(256, "NVIDIA Ampere GA102 whitepaper: GeForce dense TF32 = 256 "
               "FLOP/clk/SM (RTX 3080: 29.8 TFLOP/s, 68 SMs at 1710 MHz)"),
    .fp8_flop_per_clk_sm = P(0, "no FP8 tensor cores on Ampere (GA102)"),
    .fp8_gemm_eff_ratio = P(0, "no FP8 tensor cores"),
    .mem_bw_gbps = P(912, SRC_README ": RTX 3080 Ti 912 GB/s at 9501 MHz"),
    .mem_issue_bytes_per_clk_sm = P(32, SRC_ISSUE_DC),
    .kernel_overhead_us = P(3, SRC_OVERHEAD),
    .eff_compute = EFF_COMPUTE(0.90, SRC_README ": llm.c GEMMs measured "
                                     "~65-75 TFLOP/s of ~68 (boost-clock) "
                                     "peak; estimate"),
    .eff_memory = EFF_MEMORY,
    .power_limit_w = P(350, SRC_README ": RTX 3080 Ti 350 W"),
    .power_min_w = P(100, "estimate: board minimum limit"),
    .power_max_w = P(400, "estimate: board-dependent maximum"),
    .idle_power_w = P(25, "estimate (not published here): consumer card "
                          "idle"),
    .blocked_power_w = P(60, "estimate (not published): A40's 70.38 W "
                             "scaled to a smaller board"),
    .comm_power_w = P(80, "estimate (not published): no NVLink, PCIe "
                          "peer-to-peer"),
    .p_const_w = P(A40_P_CONST, "estimate: as the A40 fit (GA102)"),
    .p_mem_w = P(52.9, "estimate: ~7.25 pJ/bit GDDR6X access energy x "
                       "912 GB/s"),
    .p_mem_static_w = P(RTX3080TI_MEM_STATIC, SRC_FIT_STUDY ": GDDR6X PAM4 "
                        "I/O, PHY, DLLs and termination at 19 Gbps/pin, "
                        "whatever the traffic"),
    .p_dyn_w = P(RTX3080TI_P_DYN, SRC_FIT_STUDY),
    .p_leak_w = P(A40_P_LEAK * 80.0 / 84.0, "estimate: A40 fit x 80/84 SMs"),
    .v_min = P(A40_V_MIN, "estimate: A40 fit ratio"),
    .v_max = P(1.0, SRC_VNOM),
    .f_knee_mhz = P(A40_F_KNEE * 2100.0 / 1740.0,
                    "estimate: A40 fit knee at the same fraction of f_max"),
    .v_curve_exp = P(0, SRC_GA102_VLIN),
    .stall_activity = P(RTX3080TI_STALL, "estimate: as the A40 fit (GA102)"),
    BOOST_PARAMS,
    .switch_latency_ms =
        P(100, SRC_README ": >100 ms through nvidia-smi on a consumer "
               "Ampere card"),
    .activity = ACTIVITY(A40_ACT_VEC, "estimate: as the A40 fit"),
    .activity_tf32 = P(1, SRC_EST_TF32_NONE),
  },
  {
    .name = "V100-SXM2-16GB",
    .memory_gb = P(16, "NVIDIA V100 datasheet: 16 GB HBM2"),
    .description = "NVIDIA Tesla V100 SXM2 16GB (GV100, HBM2, 300 W)",
    V100_SXM2_COMMON,
  },
  {
    .name = "V100-SXM2-32GB",
    .memory_gb = P(32, "NVIDIA V100 datasheet: 32 GB HBM2"),
    .description = "NVIDIA Tesla V100 SXM2 32GB (GV100, HBM2, 300 W)",
    V100_SXM2_COMMON,
  },
  {
    .name = "H200-SXM-141GB",
    .memory_gb = P(141, "NVIDIA H200 datasheet: 141GB HBM3e"),
    .description = "NVIDIA H200 SXM 141GB (GH100, HBM3e, 700 W)",
    .sm_min_mhz = P(345, "as H100 SXM5 (same GH100 die; " SRC_README ")"),
    .sm_max_mhz = P(1980, "NVIDIA H200 datasheet: boost 1980 MHz, as H100 "
                          "SXM5"),
    .sm_step_mhz = P(15, "as H100 SXM5 (" SRC_README ": 15 MHz steps)"),
    .sm_default_mhz = P(1980, "max boost"),
    .n_mem_clocks = 1,
    .mem_mhz = {P(3125, "derived: 4.8 TB/s on 6144-bit HBM3e = 6.25 "
                        "Gbps/pin = 2 x 3125 MHz; fixed")},
    .n_sm = P(132, "NVIDIA H200 datasheet: same GH100 configuration as H100 "
                   "SXM5, 132 SMs"),
    .tensor_flop_per_clk_sm =
        P(4096, "NVIDIA H200 datasheet: 989 TFLOP/s dense BF16 (1979 with "
                "sparsity), as H100 SXM5 = 4096 FLOP/clk/SM"),
    .dense_bf16_tflops =
        P(989, "NVIDIA H200 datasheet: 989 TFLOP/s dense BF16 (1979 with "
               "sparsity)"),
    .vector_flop_per_clk_sm =
        P(256, "NVIDIA H200 datasheet: 67 TFLOP/s FP32 = 128 FMA/clk/SM"),
    .tf32_flop_per_clk_sm =
        P(2048, "NVIDIA H200 datasheet: 494.7 TFLOP/s dense TF32 (989 with "
                "sparsity), half the BF16 rate"),
    .fp8_flop_per_clk_sm =
        P(8192, "NVIDIA H200 datasheet: 1979 TFLOP/s dense FP8 (3958 with "
                "sparsity), as H100 SXM5 = 8192 FLOP/clk/SM"),
    .fp8_gemm_eff_ratio = P(H100_FP8_GEMM_RATIO, SRC_FIT_H100_FP8_DIE),
    .mem_bw_gbps = P(4800, "NVIDIA H200 datasheet: 4.8 TB/s HBM3e"),
    .mem_issue_bytes_per_clk_sm = P(32, SRC_ISSUE_DC),
    .kernel_overhead_us = P(3, SRC_OVERHEAD),
    .eff_compute = EFF_COMPUTE(0.835, SRC_H100_GEMM_EFF),
    .eff_memory = EFF_MEMORY,
    .power_limit_w = P(700, "NVIDIA H200 datasheet: SXM up to 700 W "
                            "(configurable)"),
    .power_min_w = P(200, "estimate: as H100 SXM5 (" SRC_README ")"),
    .power_max_w = P(700, "NVIDIA H200 datasheet: SXM up to 700 W"),
    .idle_power_w = P(71.8, "estimate: as the H100 SXM 80 GB (" SRC_H100_IDLE
                            ")"),
    .blocked_power_w = P(115, "estimate (not published): the H100 SXM's "
                              "110 W plus the larger HBM3e stacks' refresh"),
    .comm_power_w = P(155, "estimate (not published): blocked plus NCCL "
                           "SMs and NVLink4 busy, as H100 SXM5"),
    .p_mem_w = P(H100_P_MEM(4800), SRC_H100_PMEM),
    .p_mem_static_w = P(H100_MEM_STATIC, SRC_H100_MEM_STATIC),
    H100_SM_POWER(SRC_FIT_H100_DIE),
    .switch_latency_ms = P(6, SRC_README ": ~6 ms reported on H200"),
  },
  {
    .name = "L40S",
    .memory_gb = P(48, SRC_L40S_DS ": 48GB GDDR6 with ECC"),
    .description = "NVIDIA L40S 48GB (AD102, GDDR6, 350 W)",
    .sm_min_mhz = P(210, "estimate: as GA102 parts (" SRC_README
                         ": A40 210 MHz)"),
    .sm_max_mhz = P(2520, SRC_L40S_DS ": boost 2520 MHz"),
    .sm_step_mhz = P(15, "estimate: 15 MHz steps as the Ampere parts"),
    .sm_default_mhz = P(2520, "max boost (" SRC_L40S_DS ")"),
    .n_mem_clocks = 1,
    .mem_mhz = {P(9001, "derived: 864 GB/s on a 384-bit GDDR6 bus = 18 "
                        "Gbps/pin = 2 x 9001 MHz; fixed")},
    .n_sm = P(142, SRC_L40S_DS ": 18176 CUDA cores = 142 SMs x 128"),
    .tensor_flop_per_clk_sm =
        P(1024, SRC_L40S_DS ": 362 TFLOP/s dense BF16 (733 with sparsity) "
                "~ 1024 FLOP/clk/SM x 142 x 2520 MHz (366)"),
    .dense_bf16_tflops =
        P(362.05, SRC_L40S_DS ": 362.05 TFLOP/s dense BF16 (733 with "
                  "sparsity)"),
    .vector_flop_per_clk_sm =
        P(256, SRC_L40S_DS ": 91.6 TFLOP/s FP32 = 128 FMA/clk/SM"),
    .tf32_flop_per_clk_sm =
        P(512, SRC_L40S_DS ": 183 TFLOP/s dense TF32 (366 with sparsity), "
               "half the BF16 rate"),
    .fp8_flop_per_clk_sm =
        P(2048, SRC_L40S_DS ": 733 TFLOP/s dense FP8 (1466 with sparsity) "
                "~ 2048 FLOP/clk/SM x 142 x 2520 MHz (733)"),
    .fp8_gemm_eff_ratio = P(1, "estimate: as BF16 (no FP8 load measured "
                               "on Ada)"),
    .mem_bw_gbps = P(864, SRC_L40S_DS ": 864 GB/s GDDR6"),
    .mem_issue_bytes_per_clk_sm = P(32, SRC_ISSUE_DC),
    .kernel_overhead_us = P(3, SRC_OVERHEAD),
    .eff_compute = EFF_COMPUTE(0.80, "estimate: large BF16 GEMM share of "
                                     "peak, as A40"),
    .eff_memory = EFF_MEMORY,
    .power_limit_w = P(350, SRC_L40S_DS ": max power 350 W"),
    .power_min_w = P(100, "estimate: board minimum limit, as A40"),
    .power_max_w = P(350, SRC_L40S_DS ": max power 350 W"),
    .idle_power_w = P(35, "estimate (not published): passive 350 W board "
                          "at idle clocks, a little above A40's 30 W"),
    .blocked_power_w = P(75, "estimate (not published): A40's 70.38 W "
                             "scaled to the larger die"),
    .comm_power_w = P(95, "estimate (not published): blocked plus NCCL "
                          "SMs and PCIe busy (no NVLink)"),
    .p_const_w = P(A40_P_CONST, "estimate: as the A40 fit"),
    .p_mem_w = P(51.8, "estimate: ~7.5 pJ/bit GDDR6 access energy x "
                       "864 GB/s"),
    .p_mem_static_w = P(0, "not modelled: one fixed memory clock, its static "
                           "power is part of p_const_w"),
    .p_dyn_w = P(L40S_P_DYN, SRC_L40S_SCALE),
    .p_leak_w = P(L40S_P_LEAK, SRC_L40S_SCALE),
    .v_min = P(A40_V_MIN, "estimate: A40 fit ratio"),
    .v_max = P(1.0, SRC_VNOM),
    .f_knee_mhz = P(A40_F_KNEE * 2520.0 / 1740.0,
                    "estimate: A40 fit knee at the same fraction of f_max"),
    .v_curve_exp = P(0, SRC_GA102_VLIN),
    .stall_activity = P(A40_STALL, "estimate: as the A40 fit"),
    BOOST_PARAMS,
    .switch_latency_ms =
        P(10, "estimate within " SRC_README " range (~1 ms to hundreds of "
              "ms)"),
    .activity = ACTIVITY(A40_ACT_VEC, "estimate: as the A40 fit"),
    .activity_tf32 = P(1, SRC_EST_TF32_NONE),
  },
};

const GpuSpec *gpu_builtin_specs(guint *n)
{
  g_return_val_if_fail(n != NULL, NULL);
  *n = G_N_ELEMENTS(builtins);
  return builtins;
}

/* ---------------------------------------------------------------------- */
/* Provenance: what the numbers above rest on                              */

GpuBasis gpu_param_basis(const GpuParam *p)
{
  g_return_val_if_fail(p != NULL, GPU_BASIS_GIVEN);
  if (p->source == NULL)
    return GPU_BASIS_GIVEN;
  if (g_str_has_prefix(p->source, "estimate"))
    return GPU_BASIS_ESTIMATED;
  if (g_str_has_prefix(p->source, "fit"))
    return GPU_BASIS_FITTED;
  return GPU_BASIS_GIVEN;
}

const char *gpu_basis_name(GpuBasis b)
{
  static const char *const names[] = {"given", "fitted", "estimated"};
  return (guint)b < G_N_ELEMENTS(names) ? names[b] : "?";
}

/* The terms "The fit" of docs/gpu-model.md frees (p_mem_static_w where a
 * memory clock can change it; 0 elsewhere, and then given). */
static const char *const power_terms[] = {
  "p_dyn_w", "p_const_w", "p_leak_w", "p_mem_static_w", "v_min",
  "f_knee_mhz", "v_curve_exp", "stall_activity", NULL};

const char *gpu_power_term_name(guint i)
{
  return i < G_N_ELEMENTS(power_terms) ? power_terms[i] : NULL;
}

/* The record's held-out checks of the built-in power models
 * (docs/fidelity-record.csv, rows whose role is "predicted"), one per
 * entry that has one.  The limit is the lowest one down to which the
 * entry's decoder sweeps still hold ("What the figures say": the model is
 * too fast below it): 200 W on the A100 PCIe, 225 W on the A40. */
static const GpuCheck heldout_checks[] = {
  {"A100-SXM4-80GB",
   "profiles/bloom+a100_sxm_bf16.csv, the Bloom stage profile predicted by "
   "the fit on GPT-3 175B (energy MAPE 0.04%, time 0.01%)",
   0},
  {"A100-PCIE-80GB",
   "zeus-powerlimit/a100_pcie_pp4_global.csv and the Perseus Bloom 3B A100 "
   "plan runs but plan 2 (the memory interface's fit), predicted "
   "(normalised time within 3.2% and energy within 3.15 points from 300 "
   "to 200 W)",
   200},
  {"A40",
   "profiles/bloom+a40_bf16.csv, zeus-powerlimit/a40_global.csv and the "
   "Perseus A40 runs, predicted (Bloom profile energy MAPE 0.04%; sweeps "
   "within 5.7% time and 2.8 points energy from 300 to 225 W)",
   225},
  {"RTX-3080-Ti",
   "kernel-dvfs-study/forward_kernels.csv, the eleven kernels besides the "
   "five fitted GEMMs, predicted (energy change at the measured best pair "
   "within 16.2 points)",
   0},
};

static const GpuSpec *builtin_named(const char *name)
{
  for (gsize i = 0; i < G_N_ELEMENTS(builtins); i++)
    if (g_strcmp0(builtins[i].name, name) == 0)
      return &builtins[i];
  return NULL;
}

static gboolean same_param(const GpuParam *a, const GpuParam *b)
{
  return a->v == b->v && g_strcmp0(a->source, b->source) == 0;
}

/* Whether g prices power as the built-in b does. */
static gboolean same_power(const GpuSpec *g, const GpuSpec *b)
{
  if (!same_param(&g->power_limit_w, &b->power_limit_w))
    return FALSE;
  for (guint i = 0; power_terms[i] != NULL; i++)
    if (!same_param(gpu_spec_param((GpuSpec *)g, power_terms[i]),
                    gpu_spec_param((GpuSpec *)b, power_terms[i])))
      return FALSE;
  return TRUE;
}

const GpuCheck *gpu_heldout_check(const GpuSpec *g)
{
  g_return_val_if_fail(g != NULL, NULL);
  for (gsize i = 0; i < G_N_ELEMENTS(heldout_checks); i++) {
    const GpuCheck *k = &heldout_checks[i];
    if (g_strcmp0(k->gpu, g->name) != 0)
      continue;
    const GpuSpec *b = builtin_named(k->gpu);
    return b != NULL && same_power(g, b) ? k : NULL;
  }
  return NULL;
}

double gpu_checked_limit_fraction(void)
{
  double frac = 0;
  for (gsize i = 0; i < G_N_ELEMENTS(heldout_checks); i++) {
    const GpuCheck *k = &heldout_checks[i];
    const GpuSpec *b = builtin_named(k->gpu);
    if (b != NULL && k->min_limit_w > 0)
      frac = MAX(frac, k->min_limit_w / b->power_limit_w.v);
  }
  return frac;
}
