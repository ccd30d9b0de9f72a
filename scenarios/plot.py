#!/usr/bin/env python3
"""scenarios/plot.py -- PNG figures from a joulesim results file.

Usage:
    python3 scenarios/plot.py RESULTS.h5 [-o DIR] [--table NAME ...] [--dpi N]

Looks at what the file holds and draws what it can (one PNG per figure in
DIR, default ./figures; the paths are printed):

  saving_<table>.png     energy saving vs slowdown, one colour per policy,
                         for a table with a string column `policy` and
                         either saving_pct/slowdown_pct columns or an
                         energy column (energy_per_iteration_j, energy_j)
                         and a time column (iteration_time_s, time_s): each
                         row is then compared with the row of the baseline
                         policy ("max", else "auto") that has the same other
                         point values (the table's `sweep_keys` attribute,
                         written by js.sweep, names them; without it, the
                         string columns and the layout integers tp, pp, dp,
                         gpus, ... do).  saving = 1 - E/E_base, slowdown =
                         T/T_base - 1, in percent.
  frontier_<table>.png   a time-energy frontier (a table whose name contains
                         "frontier", with time_s and energy_j columns; one
                         curve per value of a label/policy/run column).
  by_class_<table>.png   energy by op class: columns <class>_j (gemm_j,
                         attention_j, ..., comm_j, blocked_j, idle_j; also
                         energy_<class>_j), one stacked bar per row, or per
                         policy (and GPU) averaged when there are many rows.
  power_<run>.png        power and SM clock over time from
                         /timelines/<run>, per GPU (first 8): the steps, or,
                         with many samples, the mean power over 300 time
                         bins (energy-preserving) and the mean clock while
                         kernels run.
  validation_<table>.png measured vs predicted: column pairs measured_X /
                         predicted_X (or X_measured / X_predicted, or
                         meas_X / pred_X as `joulesim fidelity --out`
                         writes them, one PNG per dataset), as curves over a
                         clock column (freq_mhz, sm_mhz, frequency,
                         clock_mhz, power_limit_w, plan, stage) per
                         kernel/stage/case, else as a scatter against y = x.

Rows with a non-empty `error` column (failed sweep points) are left out.
Needs python3-h5py and python3-matplotlib (`make plot-deps`); numpy comes
with them.  Exit status: 0 (also when there is nothing to plot, which is
said), 1 when the file cannot be read, 2 on bad arguments.
"""
import argparse
import os
import re
import sys

import h5py
import numpy as np
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

CLASSES = ["gemm", "attention", "elementwise", "norm", "softmax", "reduction",
           "embedding", "optimizer", "memcpy", "comm", "other", "blocked",
           "idle"]
LAYOUT_INTS = {"tp", "pp", "dp", "gpus", "nodes", "gpus_per_node",
               "microbatches", "microbatch_size", "seq_len", "layers",
               "stages", "iterations", "seed"}
NOT_KEYS = {"policy", "point_id", "error", "policy_label", "label"}
ENERGY_COLS = ["energy_per_iteration_j", "energy_j"]
TIME_COLS = ["iteration_time_s", "time_s"]
CLOCK_COLS = ["freq_mhz", "sm_mhz", "frequency", "clock_mhz", "frequency_mhz",
              "power_limit_w", "plan", "stage"]
GROUP_COLS = ["kernel", "stage", "instruction", "label", "policy", "run",
              "gpu", "config", "case"]


def text(x):
    return x.decode("utf-8") if isinstance(x, bytes) else str(x)


class Table:
    """A results table as a dict of numpy columns (strings decoded)."""

    def __init__(self, name, dset):
        self.name = name
        data = dset[:]
        self.cols = {}
        for col in data.dtype.names or ():
            values = data[col]
            if values.dtype.kind in "OSU":
                values = np.array([text(v) for v in values], dtype=object)
            self.cols[col] = values
        keys = dset.attrs.get("sweep_keys")
        self.sweep_keys = None
        if keys is not None and not isinstance(keys, h5py.Empty):
            self.sweep_keys = [text(k) for k in np.atleast_1d(keys)]
        if "error" in self.cols:
            ok = np.array([e == "" for e in self.cols["error"]], dtype=bool)
            self.cols = {k: v[ok] for k, v in self.cols.items()}
        self.n = len(next(iter(self.cols.values()))) if self.cols else 0

    def has(self, *names):
        return all(n in self.cols for n in names)

    def first(self, names):
        for n in names:
            if n in self.cols and self.cols[n].dtype.kind in "fiu":
                return n
        return None

    def is_string(self, col):
        return col in self.cols and self.cols[col].dtype == object


def safe(name):
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


def save(fig, out_dir, stem, dpi, written):
    path = os.path.join(out_dir, safe(stem) + ".png")
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    written.append(path)


def group_keys(t):
    """The columns that identify a configuration apart from its policy."""
    if t.sweep_keys:
        return [k for k in t.sweep_keys if k != "policy" and k in t.cols]
    keys = []
    for col, values in t.cols.items():
        if col in NOT_KEYS:
            continue
        if values.dtype == object or (col in LAYOUT_INTS and
                                      values.dtype.kind in "iu"):
            keys.append(col)
    return keys


def plot_saving(t, out_dir, dpi, written):
    if not t.is_string("policy") or t.n == 0:
        return
    policies = t.cols["policy"]
    if t.has("saving_pct", "slowdown_pct"):
        saving = t.cols["saving_pct"].astype(float)
        slowdown = t.cols["slowdown_pct"].astype(float)
        base = "max" if "max" in set(policies) else None
        use = np.array([p != base for p in policies], dtype=bool)
        if base is None:
            use = ~((saving == 0) & (slowdown == 0))
    else:
        ecol, tcol = t.first(ENERGY_COLS), t.first(TIME_COLS)
        if ecol is None or tcol is None:
            return
        present = set(policies)
        base = "max" if "max" in present else "auto" if "auto" in present \
            else None
        if base is None:
            return
        keys = group_keys(t)
        ident = [tuple(t.cols[k][i] for k in keys) for i in range(t.n)]
        ref = {}
        for i in range(t.n):
            if policies[i] == base:
                ref[ident[i]] = i
        saving = np.full(t.n, np.nan)
        slowdown = np.full(t.n, np.nan)
        energy = t.cols[ecol].astype(float)
        time = t.cols[tcol].astype(float)
        for i in range(t.n):
            j = ref.get(ident[i])
            if j is None or policies[i] == base:
                continue
            saving[i] = 100.0 * (1.0 - energy[i] / energy[j])
            slowdown[i] = 100.0 * (time[i] / time[j] - 1.0)
        use = np.isfinite(saving) & np.isfinite(slowdown)
    if not use.any():
        return
    fig, ax = plt.subplots(figsize=(7, 5))
    names = sorted(set(policies[use]))
    cmap = plt.get_cmap("tab10")
    for k, pol in enumerate(names):
        sel = use & np.array([p == pol for p in policies], dtype=bool)
        ax.scatter(slowdown[sel], saving[sel], s=22, alpha=0.75,
                   color=cmap(k % 10),
                   label="%s (%d, median %.1f%% saved at %.1f%% slower)" % (
                       pol, sel.sum(), np.median(saving[sel]),
                       np.median(slowdown[sel])))
    ax.axhline(0, color="0.6", lw=0.8)
    ax.axvline(0, color="0.6", lw=0.8)
    ax.set_xlabel("slowdown vs %s (%%)" % (base or "baseline"))
    ax.set_ylabel("energy saving vs %s (%%)" % (base or "baseline"))
    ax.set_title("%s: energy saving vs slowdown per policy" % t.name)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    save(fig, out_dir, "saving_" + t.name, dpi, written)


def plot_frontier(t, out_dir, dpi, written):
    if "frontier" not in t.name.lower() or not t.has("time_s", "energy_j"):
        return
    if t.n == 0:
        return
    time = t.cols["time_s"].astype(float)
    energy = t.cols["energy_j"].astype(float)
    label_col = next((c for c in GROUP_COLS if t.is_string(c)), None)
    groups = sorted(set(t.cols[label_col])) if label_col else [None]
    fig, ax = plt.subplots(figsize=(7, 5))
    for g in groups:
        sel = np.ones(t.n, dtype=bool) if g is None else \
            np.array([v == g for v in t.cols[label_col]], dtype=bool)
        order = np.argsort(time[sel])
        ax.plot(time[sel][order], energy[sel][order], marker="o", ms=3,
                label=g if g is not None else None)
    ax.set_xlabel("iteration time (s)")
    ax.set_ylabel("energy (J)")
    ax.set_title("%s: time-energy frontier (%d points)" % (t.name, t.n))
    ax.grid(True, alpha=0.3)
    if label_col:
        ax.legend(fontsize=8)
    save(fig, out_dir, "frontier_" + t.name, dpi, written)


def class_columns(t):
    found = []
    for c in CLASSES:
        for col in (c + "_j", "energy_" + c + "_j", "class_" + c + "_j"):
            if col in t.cols and t.cols[col].dtype.kind == "f":
                found.append((c, col))
                break
    return found


def plot_by_class(t, out_dir, dpi, written):
    cols = class_columns(t)
    if len(cols) < 2 or t.n == 0:
        return
    values = np.array([t.cols[col].astype(float) for _, col in cols])  # C x N
    if t.n <= 16:
        labels = []
        for i in range(t.n):
            if "point_id" in t.cols:
                labels.append(t.cols["point_id"][i])
            else:
                parts = [str(t.cols[c][i]) for c in ("config", "model", "gpu",
                                                     "policy")
                         if c in t.cols]
                labels.append(" ".join(parts) or "row %d" % i)
        bars = values
        what = "per row"
    else:
        by = [c for c in ("gpu", "policy") if t.is_string(c)]
        if not by:
            labels = ["all %d rows" % t.n]
            bars = values.mean(axis=1, keepdims=True)
        else:
            ident = [" ".join(str(t.cols[c][i]) for c in by)
                     for i in range(t.n)]
            labels = sorted(set(ident))
            bars = np.array([[values[k][[j for j in range(t.n)
                                         if ident[j] == lab]].mean()
                              for lab in labels]
                             for k in range(len(cols))])
        what = "mean over configurations"
    fig, ax = plt.subplots(figsize=(9.5, 0.45 * len(labels) + 1.8))
    left = np.zeros(len(labels))
    cmap = plt.get_cmap("tab20")
    for k, (name, _) in enumerate(cols):
        if not np.any(bars[k] > 0):
            continue
        ax.barh(range(len(labels)), bars[k], left=left,
                color=cmap(CLASSES.index(name) % 20), label=name)
        left += bars[k]
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("energy (J)")
    ax.set_title("%s: energy by op class (%s)" % (t.name, what))
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0),
              title="op class", title_fontsize=7)
    ax.grid(True, axis="x", alpha=0.3)
    save(fig, out_dir, "by_class_" + t.name, dpi, written)


def validation_pairs(t):
    pairs = []
    for col in t.cols:
        m = re.match(r"^measured_(.+)$", col) or re.match(r"^(.+)_measured$",
                                                         col) or \
            re.match(r"^meas_(.+)$", col)
        if not m:
            continue
        q = m.group(1)
        for pred in ("predicted_" + q, q + "_predicted", "pred_" + q):
            if pred in t.cols and t.cols[col].dtype.kind == "f" and \
                    t.cols[pred].dtype.kind == "f":
                pairs.append((q, col, pred))
    return pairs


def plot_validation(t, out_dir, dpi, written):
    pairs = validation_pairs(t)
    if not pairs or t.n == 0:
        return
    xcol = t.first(CLOCK_COLS)
    gcol = next((c for c in GROUP_COLS if t.is_string(c)), None)
    groups = sorted(set(t.cols[gcol])) if gcol else [None]
    if len(groups) > 8:
        groups = groups[:8]
    fig, axes = plt.subplots(1, len(pairs), figsize=(5.5 * len(pairs), 4.5),
                             squeeze=False)
    cmap = plt.get_cmap("tab10")
    for ax, (q, mcol, pcol) in zip(axes[0], pairs):
        meas = t.cols[mcol].astype(float)
        pred = t.cols[pcol].astype(float)
        if xcol:
            x = t.cols[xcol].astype(float)
            for k, g in enumerate(groups):
                sel = np.ones(t.n, dtype=bool) if g is None else \
                    np.array([v == g for v in t.cols[gcol]], dtype=bool)
                order = np.argsort(x[sel])
                ax.plot(x[sel][order], meas[sel][order], "o", ms=4,
                        color=cmap(k % 10),
                        label=("%s measured" % g) if g else "measured")
                ax.plot(x[sel][order], pred[sel][order], "-",
                        color=cmap(k % 10),
                        label=("%s predicted" % g) if g else "predicted")
            ax.set_xlabel(xcol)
        else:
            ax.scatter(meas, pred, s=14)
            lo = np.nanmin([meas.min(), pred.min()])
            hi = np.nanmax([meas.max(), pred.max()])
            ax.plot([lo, hi], [lo, hi], color="0.5", lw=0.8)
            ax.set_xlabel("measured " + q)
        ok = np.isfinite(meas) & np.isfinite(pred) & (meas != 0)
        mape = 100 * np.mean(np.abs(pred[ok] / meas[ok] - 1)) if ok.any() \
            else float("nan")
        ax.set_ylabel(q)
        ax.set_title("%s: %s, MAPE %.2f%%" % (t.name, q, mape), fontsize=10)
        ax.grid(True, alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    save(fig, out_dir, "validation_" + t.name, dpi, written)


def binned(t, v, edges, use=None):
    """Time-weighted mean of the step function (t[i], v[i]) (v[i] holds
    until t[i+1]) over each bin of `edges`; NaN where the step function
    says nothing (outside its samples, or only where `use` is False)."""
    dt = np.diff(t)
    w = np.ones(len(dt)) if use is None else use[:-1].astype(float)
    vals = np.where(w > 0, v[:-1], 0.0)
    area = np.concatenate([[0.0], np.cumsum(vals * dt)])
    cover = np.concatenate([[0.0], np.cumsum(w * dt)])
    a = np.diff(np.interp(edges, t, area))
    c = np.diff(np.interp(edges, t, cover))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(c > 0, a / c, np.nan)


def plot_timeline(run, dset, out_dir, dpi, written):
    data = dset[:]
    if len(data) == 0:
        return
    gpus = np.unique(data["gpu"])
    shown = gpus[:8]
    t_end = float(data["time_s"].max())
    dense = max((data["gpu"] == g).sum() for g in shown) > 600 and t_end > 0
    fig, (ax, axf) = plt.subplots(2, 1, figsize=(9, 6), sharex=True,
                                  gridspec_kw={"height_ratios": [3, 1]})
    if dense:
        # Many samples: the mean power in 300 bins (energy-preserving) and
        # the mean SM clock while kernels run, instead of every step.
        edges = np.linspace(float(data["time_s"].min()), t_end, 301)
        mid = 0.5 * (edges[1:] + edges[:-1])
    for g in shown:
        sel = data["gpu"] == g
        t = data["time_s"][sel].astype(float)
        p = data["power_w"][sel].astype(float)
        f = data["sm_mhz"][sel].astype(float)
        running = np.isfinite(f) & (f > 0)
        if dense and len(t) > 1:
            ax.plot(mid, binned(t, p, edges), lw=1.0, label="GPU %d" % g)
            if running.any():
                axf.plot(mid, binned(t, np.where(running, f, 0.0), edges,
                                     running), lw=1.0)
        else:
            ax.step(t, p, where="post", lw=0.9, label="GPU %d" % g)
            if running.any():
                axf.step(t, np.where(running, f, np.nan), where="post",
                         lw=0.9)
    ax.set_ylabel("mean power (W)" if dense else "power (W)")
    more = "" if len(gpus) == len(shown) else \
        ", first %d of %d GPUs" % (len(shown), len(gpus))
    how = " (mean over %.3g ms bins%s)" % ((edges[1] - edges[0]) * 1e3, more) \
        if dense else (" (%s)" % more[2:] if more else "")
    ax.set_title("%s: power over time%s" % (run, how), fontsize=11)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, ncol=4)
    axf.set_ylabel("SM clock (MHz)")
    axf.set_xlabel("time (s)")
    axf.grid(True, alpha=0.3)
    save(fig, out_dir, "power_" + run, dpi, written)


def main(argv):
    ap = argparse.ArgumentParser(
        description="PNG figures from a joulesim results file")
    ap.add_argument("results", help="results file (.h5)")
    ap.add_argument("-o", "--out", default="figures",
                    help="output directory (default: figures)")
    ap.add_argument("--table", action="append",
                    help="only these tables/timelines (repeatable)")
    ap.add_argument("--dpi", type=int, default=120)
    args = ap.parse_args(argv)
    try:
        f = h5py.File(args.results, "r")
    except (OSError, IOError) as e:
        print("plot.py: cannot read %s: %s" % (args.results, e),
              file=sys.stderr)
        return 1
    os.makedirs(args.out, exist_ok=True)
    written = []
    names = []
    with f:
        for name, dset in (f["results"].items() if "results" in f else []):
            if name.startswith(".") or not isinstance(dset, h5py.Dataset):
                continue
            if args.table and name not in args.table:
                continue
            names.append(name)
            t = Table(name, dset)
            plot_saving(t, args.out, args.dpi, written)
            plot_frontier(t, args.out, args.dpi, written)
            plot_by_class(t, args.out, args.dpi, written)
            plot_validation(t, args.out, args.dpi, written)
        for run, dset in (f["timelines"].items() if "timelines" in f else []):
            if run.startswith(".") or not isinstance(dset, h5py.Dataset):
                continue
            if args.table and run not in args.table:
                continue
            names.append("timeline " + run)
            plot_timeline(run, dset, args.out, args.dpi, written)
    for path in written:
        print(path)
    if not written:
        print("plot.py: nothing to plot in %s (%s)" % (
            args.results, ", ".join(names) or "no tables"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
