#!/usr/bin/env python3
"""Checks the include graph against the layering of services/ (issue 15),
and every folder's README against its files (issue 30).

The arrows that may exist (services/*/README.md says the same in words):
  base     -> nothing in services/    (Status, OS errors, files, processes,
                                       flags; no gRPC, no protobuf, no LibTorch)
  numeric  -> nothing in services/    (bf16, finite scans, wire values; proto/
                                       only for the wire's value types)
  api      -> base                    (the TrainingJob API type: no network,
                                       no wire format)
  net      -> base                    (HTTP, metrics, TLS, tokens, gRPC channels)
  plot     -> base                    (gnuplot)
  engine   -> base, numeric, api      (no network, no wire format, no LibTorch)
  autoscale -> api, base              (a pure policy: no network, no engine)
  jobplan  -> nothing in services/    (the job's decisions for both executors:
                                       pure functions of what they observed)
  learn    -> engine, base, numeric, api   (never a service, no network)
  master, coordinator, worker -> base, numeric, api, net, engine, learn, and
           another service only through the headers of that service's targets
           that Bazel lets it depend on (its public client library: `bazel
           query visible`)
  testing  -> anything public; included only by tests (*_test.cc) and other
              test-only folders (*/testing/, operator/envtest/)
  nothing in services/ or operator/ but tests includes what sits above them:
              bench/, cli/, deploy/, helm/, image/, tests/ (the cluster test
              harness is tests/cluster/)
  operator -> base, api, net, autoscale, jobplan   (it runs the services' binaries, it
                                       does not link them)

Each #include "services/..." in services/ and operator/ is checked. A
violation prints the file, the line and the rule.

It also checks that every folder's README.md lists the folder's files
(issue 30), so a README cannot fall out of step with its folder:
  - The files are those git knows (`git ls-files`: tracked, plus new files
    not ignored) as they stand in the working tree: a file deleted there
    no longer counts, a new one counts before it is committed.
  - Every folder holding such a file has a README.md that names each file
    directly in it, except the README itself and `BUILD` (every Bazel
    package has one; what it holds is the README's subject already).
  - A name counts wherever it appears in the README (a table cell, a
    sentence, a path ending in it), as a whole name: `report.h` is not
    named by `run_report.h`. `name.{h,cc}` names both files.
  - Folders of data or of fixed names are not checked file by file; the
    nearest checked folder above names them instead (as `name/`):
      *_corpus/, testdata/       fuzz seeds and test inputs
      .ci/                       the CI's entry point, named by the tool
      docs/results/, docs/monitoring/   pictures the docs show
      helm/gaptrain/{templates,crds,dashboards,rules}/   the chart's parts,
                                 described by the chart's README
      scripts/test-cluster/*/    Go modules (go.mod, go.sum, tools.go), one
                                 per tool the test cluster builds
      third_party/*/             stand-ins for the repositories Bazel asks
                                 for, their file names fixed by Bazel
  - Each unnamed file (or unlisted folder) prints
    `check_layering: FOLDER/README.md omits NAME`; a missing README prints
    `check_layering: FOLDER/README.md is missing`, then every file it
    would have to name.

The exit status is 1 if there is any violation or omission. Run from
anywhere; it needs `bazel` for the public headers and `git` for the file
list. `--readmes` checks the READMEs alone (no `bazel`).
"""

import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SERVICES = ("master", "coordinator", "worker")
INCLUDE = re.compile(r'^\s*#\s*include\s+[<"]([^">]+)[">]')

# Folder -> what it must never include (prefixes of include paths).
SERVICES_PREFIXES = ["services/engine/", "services/learn/", "services/master/",
                     "services/worker/", "services/coordinator/"]
LIBTORCH = ["torch/", "ATen/", "c10/"]
GRPC = ["grpcpp/", "grpc/"]
FORBIDDEN = {
    "services/base": ["services/autoscale/", "services/api/", "services/net/", "services/numeric/",
                      "services/plot/", "proto/"] + SERVICES_PREFIXES + GRPC + LIBTORCH,
    "services/numeric": ["services/autoscale/", "services/base/", "services/api/", "services/net/",
                         "services/plot/"] + SERVICES_PREFIXES + GRPC + LIBTORCH,
    "services/api": ["services/autoscale/", "services/net/", "services/numeric/", "services/plot/", "proto/",
                     "boost/", "prometheus/"] + SERVICES_PREFIXES + GRPC + LIBTORCH,
    "services/net": ["services/autoscale/", "services/api/", "services/numeric/", "services/plot/",
                     "proto/"] + SERVICES_PREFIXES + LIBTORCH,
    "services/plot": ["services/autoscale/", "services/api/", "services/net/", "services/numeric/",
                      "proto/"] + SERVICES_PREFIXES + GRPC + LIBTORCH,
    "services/engine": ["services/autoscale/", "services/learn/", "services/master/", "services/worker/",
                        "services/coordinator/", "services/net/", "services/plot/",
                        "proto/"] + GRPC + LIBTORCH,
    "services/autoscale": ["services/net/", "services/numeric/", "services/plot/", "proto/",
                           "boost/", "prometheus/"] + SERVICES_PREFIXES + GRPC + LIBTORCH,
    "services/learn": ["services/autoscale/", "services/master/", "services/worker/", "services/coordinator/",
                       "services/net/", "services/plot/", "proto/", "grpcpp/"],
    "services/jobplan": ["services/autoscale/", "services/api/", "services/base/", "services/net/",
                         "services/numeric/", "services/plot/", "proto/", "boost/",
                         "prometheus/"] + SERVICES_PREFIXES + GRPC + LIBTORCH,
    "operator": ["services/numeric/", "services/plot/"] + SERVICES_PREFIXES +
                ["torch/", "ATen/"],
}
# The folders above services/ and operator/: what ships and installs them
# (deploy/, helm/, image/), the CLI, the benchmarks and the tests' own
# harness (tests/, e.g. tests/cluster/). Code that ships in services/ or
# operator/ never includes them; tests there may (issue 40).
ABOVE = ["bench/", "cli/", "deploy/", "helm/", "image/", "tests/"]

# Only the executors decide with services/jobplan; the layers below them
# must not reach up to it.
for _lower in ("services/base", "services/numeric", "services/api", "services/net",
               "services/plot", "services/engine", "services/autoscale", "services/learn"):
    FORBIDDEN[_lower].append("services/jobplan/")


def bazel_query(expression):
    out = subprocess.run(["bazel", "query", expression, "--output=label"], cwd=ROOT,
                         capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit("check_layering: bazel query failed:\n" + out.stderr[-2000:])
    return out.stdout.split()


def label_to_path(label):
    package, name = label.lstrip("/").split(":")
    return package + "/" + name


def public_headers(user, owner):
    """Headers of owner's targets that every target of `user` may depend on."""
    visible = f"visible(//services/{user}:all, //services/{owner}:all)"
    return {label_to_path(l) for l in bazel_query(f"labels(hdrs, {visible})")}


def source_files(folder):
    for dirpath, _, names in os.walk(os.path.join(ROOT, folder)):
        for name in names:
            if name.endswith((".cc", ".h")):
                yield os.path.relpath(os.path.join(dirpath, name), ROOT)


def folder_of(path):
    parts = path.split("/")
    return "/".join(parts[:2]) if parts[0] == "services" else parts[0]


# Folders whose files are not listed one by one (see the docstring): matched
# against the folder's path; the parent README names the folder instead.
UNLISTED_FOLDERS = [
    re.compile(r"(^|.*/)[^/]*_corpus$"),
    re.compile(r"(^|.*/)testdata$"),
    re.compile(r"^\.ci$"),
    re.compile(r"^docs/(results|monitoring)$"),
    re.compile(r"^helm/gaptrain/(templates|crds|dashboards|rules)$"),
    re.compile(r"^third_party/[^/]+$"),
    re.compile(r"^scripts/test-cluster/[^/]+$"),
]
# Files a README need not name.
UNLISTED_FILES = {"README.md", "BUILD"}


def git_files():
    """The files git knows (tracked, or new and not ignored) that exist."""
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                          "--exclude-standard"], cwd=ROOT, capture_output=True)
    if out.returncode != 0:
        sys.exit("check_layering: git ls-files failed:\n" + out.stderr.decode()[-2000:])
    names = sorted(set(out.stdout.decode("utf-8").split("\0")) - {""})
    return [n for n in names if os.path.isfile(os.path.join(ROOT, n))]


def unlisted_folder(folder):
    """The unlisted folder that holds `folder` (itself or above), or None."""
    parts = folder.split("/") if folder else []
    for i in range(1, len(parts) + 1):
        prefix = "/".join(parts[:i])
        if any(p.match(prefix) for p in UNLISTED_FOLDERS):
            return prefix
    return None


BRACES = re.compile(r"([\w./-]*)\{([\w.,-]+)\}([\w./-]*)")


def expand_braces(text):
    """`model.{h,cc}` -> also `model.h model.cc`, so that both count as named."""
    extra = []
    for match in BRACES.finditer(text):
        head, body, tail = match.groups()
        extra.extend(head + part + tail for part in body.split(","))
    return text + "\n" + "\n".join(extra)


def names(text, name):
    """Whether `name` appears in text as a whole name (a path may lead to it)."""
    return re.search(r"(?<![\w.-])" + re.escape(name) + r"(?![\w-]|\.\w)", text) is not None


def check_readmes():
    """Each folder's README.md against its files; returns (folders, omissions)."""
    listed = {}  # checked folder -> names its README must hold
    for path in git_files():
        folder, name = os.path.split(path)
        under = unlisted_folder(folder)
        if under is not None:
            # The nearest checked folder above names the unlisted one.
            parent, child = os.path.split(under)
            while unlisted_folder(parent) is not None:
                parent, child = os.path.split(parent)
            listed.setdefault(parent, set()).add(child + "/")
        elif name not in UNLISTED_FILES:
            listed.setdefault(folder, set()).add(name)
        else:
            listed.setdefault(folder, set())
    omissions = []
    for folder in sorted(listed):
        readme = os.path.join(folder, "README.md") if folder else "README.md"
        try:
            with open(os.path.join(ROOT, readme), encoding="utf-8") as f:
                text = expand_braces(f.read())
        except FileNotFoundError:
            omissions.append(f"check_layering: {readme} is missing")
            text = ""
        for name in sorted(listed[folder]):
            if not names(text, name.rstrip("/")):
                omissions.append(f"check_layering: {readme} omits {name}")
    return len(listed), omissions


def check_includes():
    allowed = {(u, o): public_headers(u, o) for u in SERVICES for o in SERVICES if u != o}
    problems = []
    checked = 0
    for top in ("services", "operator"):
        if not os.path.isdir(os.path.join(ROOT, top)):
            continue
        for path in source_files(top):
            folder = folder_of(path)
            is_test = (path.endswith(("_test.cc", "_fuzzer.cc")) or "/testing/" in path
                       or path.startswith("operator/envtest/"))
            with open(os.path.join(ROOT, path), encoding="utf-8") as f:
                lines = f.readlines()
            for number, line in enumerate(lines, 1):
                match = INCLUDE.match(line)
                if not match:
                    continue
                included = match.group(1)
                checked += 1
                where = f"{path}:{number}: includes {included}"
                for prefix in FORBIDDEN.get(folder, []):
                    if included.startswith(prefix):
                        problems.append(f"{where}: {folder} must not depend on {prefix}")
                for prefix in ABOVE:
                    if included.startswith(prefix) and not is_test:
                        problems.append(f"{where}: runs back up the layers to {prefix} "
                                        "(only tests may)")
                if included.startswith("services/testing/") and not is_test:
                    problems.append(f"{where}: only tests may use services/testing")
                owner = included.split("/")[1] if included.startswith("services/") else None
                user = folder.split("/")[1] if folder.startswith("services/") else None
                if (user in SERVICES and owner in SERVICES and user != owner and
                        included not in allowed[(user, owner)]):
                    problems.append(f"{where}: not in services/{owner}'s public client "
                                    f"library (public: {sorted(allowed[(user, owner)])})")
    for problem in problems:
        print(problem)
    print(f"check_layering: {checked} includes checked, {len(problems)} violations")
    return len(problems)


def main():
    folders, omissions = check_readmes()
    for omission in omissions:
        print(omission)
    print(f"check_layering: {folders} folders' READMEs checked, {len(omissions)} omissions")
    violations = 0 if "--readmes" in sys.argv[1:] else check_includes()
    return 1 if omissions or violations else 0


if __name__ == "__main__":
    sys.exit(main())
