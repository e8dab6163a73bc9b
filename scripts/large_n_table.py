#!/usr/bin/env python3
"""Tabulates final test accuracy by candidate and N from `gaptrain simulate` results.

Usage:
  scripts/large_n_table.py [--seed S] LABEL=DIR [LABEL=DIR ...]

Each DIR is a simulation's output directory (its results.csv); a LABEL given
several times gathers its DIRs' runs (seeds or N run separately). A run's final
accuracy is its last evaluation (the most updates); a diverged run counts as
0 and is marked. Prints one Markdown row per LABEL (and per configuration,
rule lr m, when a DIR holds several) with a column per N that any DIR has:
"mean ± std (k seeds)" over seeds (one seed: its accuracy alone), the standard deviation over seeds (n − 1),
empty where that N was not run. With --seed, only that seed's runs count (a
screen of one seed, where some candidates also ran others). docs/results.md ("Large N") shows the tables
it made and the commands behind them. Needs only the standard library.
"""

import csv
import math
import os
import sys


def final_rows(path, only_seed=None):
    """(rule, lr, momentum) -> N -> seed -> (accuracy %, diverged) from results.csv."""
    last = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if only_seed is not None and int(row["seed"]) != only_seed:
                continue
            key = (row["rule"], row["learning_rate"], row["momentum"], int(row["workers"]),
                   int(row["seed"]))
            updates = int(row["updates"])
            if key not in last or updates >= last[key][0]:
                last[key] = (updates, float(row["test_accuracy"]) * 100.0,
                             row["diverged"] not in ("0", "false", ""))
    out = {}
    for (rule, lr, m, n, seed), (_, acc, diverged) in last.items():
        out.setdefault((rule, lr, m), {}).setdefault(n, {})[seed] = (0.0 if diverged else acc,
                                                                     diverged)
    return out


def cell(seeds):
    values = [acc for acc, _ in seeds.values()]
    mean = sum(values) / len(values)
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1)) \
        if len(values) > 1 else 0.0
    diverged = sum(1 for _, d in seeds.values() if d)
    if diverged == len(values):
        return "diverged (%d/%d)" % (diverged, diverged)
    text = "%.2f ± %.2f (%d)" % (mean, std, len(values)) if len(values) > 1 else "%.2f" % mean
    return text + (", diverged %d/%d" % (diverged, len(values)) if diverged else "")


def main(argv):
    args = argv[1:]
    only_seed = None
    if len(args) >= 2 and args[0] == "--seed" and args[1].isdigit():
        only_seed = int(args[1])
        args = args[2:]
    if not args or any("=" not in a for a in args):
        sys.stderr.write(__doc__)
        return 2
    labels = []  # in order of first appearance
    merged = {}  # label -> (rule, lr, m) -> N -> seed -> (accuracy, diverged)
    for arg in args:
        label, directory = arg.split("=", 1)
        path = os.path.join(directory, "results.csv")
        if not os.path.exists(path):
            sys.stderr.write("%s: no results.csv\n" % directory)
            return 1
        if label not in merged:
            labels.append(label)
            merged[label] = {}
        for config, by_n in final_rows(path, only_seed).items():
            for n, seeds in by_n.items():
                merged[label].setdefault(config, {}).setdefault(n, {}).update(seeds)
    rows = []
    ns = set()
    for label in labels:
        configs = merged[label]
        for (rule, lr, m), by_n in sorted(configs.items()):
            name = label if len(configs) == 1 else "%s (%s lr=%s m=%s)" % (label, rule, lr, m)
            rows.append((name, by_n))
            ns.update(by_n)
    columns = sorted(ns)
    print("| candidate | " + " | ".join("N=%d" % n for n in columns) + " |")
    print("|---|" + "---|" * len(columns))
    for name, by_n in rows:
        print("| %s | " % name + " | ".join(cell(by_n[n]) if n in by_n else ""
                                             for n in columns) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
