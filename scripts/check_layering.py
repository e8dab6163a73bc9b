#!/usr/bin/env python3
"""Checks the include graph against the layering of services/ (issue 15).

The arrows that may exist (services/*/README.md says the same in words):
  engine   -> common                  (no network, no wire format, no LibTorch)
  learn    -> engine, common          (never a service)
  common   -> nothing in services/
  master, coordinator, worker -> common, engine, learn, and another service
           only through the headers of that service's targets that Bazel lets
           it depend on (its public client library: `bazel query visible`)
  testing  -> anything public; included only by tests (*_test.cc) and other
              test-only folders (*/testing/, operator/envtest/)
  operator -> common                  (it runs the services' binaries, it does
                                       not link them)

Each #include "services/..." in services/ and operator/ is checked. A
violation prints the file, the line and the rule; the exit status is 1 if
there is any. Run from anywhere; it needs `bazel` for the public headers.
"""

import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SERVICES = ("master", "coordinator", "worker")
INCLUDE = re.compile(r'^\s*#\s*include\s+[<"]([^">]+)[">]')

# Folder -> what it must never include (prefixes of include paths).
FORBIDDEN = {
    "services/engine": ["services/learn/", "services/master/", "services/worker/",
                        "services/coordinator/", "proto/", "grpcpp/", "grpc/",
                        "torch/", "ATen/", "c10/"],
    "services/learn": ["services/master/", "services/worker/", "services/coordinator/",
                       "proto/", "grpcpp/"],
    "services/common": ["services/engine/", "services/learn/", "services/master/",
                        "services/worker/", "services/coordinator/"],
    "operator": ["services/engine/", "services/learn/", "services/master/",
                 "services/worker/", "services/coordinator/", "torch/", "ATen/"],
}


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


def main():
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
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
