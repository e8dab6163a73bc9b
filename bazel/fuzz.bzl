"""gaptrain_fuzz_test: a libFuzzer target and the test that replays its corpus.

A fuzz target is a file <name>.cc next to the decoder it attacks, defining
LLVMFuzzerTestOneInput and asserting the decoder's contract with
services/testing/fuzz_contract.h. Its seed corpus is the folder
<name>_corpus/ beside it. The macro makes

  <name>_test  a cc_test (any build, gcc by default) that feeds every file of
               the corpus to the target: CI keeps each target compiling and
               its corpus (seeds and past crashes) passing, at no extra
               build cost;
  <name>       the fuzzer, tagged manual. Under --config=fuzz (clang,
               libFuzzer, ASan, UBSan) it is a libFuzzer binary; in other
               builds it replays the files and folders named on its command
               line.

Run a fuzzer: bazel run --config=fuzz //pkg:<name> -- -max_total_time=60 \\
  $PWD/pkg/<name>_corpus   (scripts/fuzz.sh does it for every target).
"""

def gaptrain_fuzz_test(name, srcs, deps = [], corpus = None, size = "small", tags = []):
    """Defines <name> (the fuzzer) and <name>_test (the corpus replay).

    Args:
      name: the fuzzer binary, e.g. "chunk_wire_fuzzer".
      srcs: the target's sources (one file defining LLVMFuzzerTestOneInput).
      deps: what they use; never LibTorch.
      corpus: the seed folder in this package; default <name>_corpus.
      size: of the replay test.
      tags: added to both.
    """
    corpus = corpus or name + "_corpus"
    native.cc_library(
        name = name + "_target",
        testonly = True,
        srcs = srcs,
        deps = deps + ["//services/testing:fuzz_contract"],
        alwayslink = True,
    )
    native.cc_binary(
        name = name,
        testonly = True,
        deps = [":" + name + "_target"] + select({
            "//bazel:fuzzing": [],
            "//conditions:default": ["//services/testing:fuzz_replay_main"],
        }),
        linkopts = select({
            "//bazel:fuzzing": ["-fsanitize=fuzzer"],
            "//conditions:default": [],
        }),
        tags = ["manual"] + tags,
    )
    native.cc_test(
        name = name + "_test",
        size = size,
        deps = [
            ":" + name + "_target",
            "//services/testing:fuzz_replay_test",
        ],
        data = native.glob([corpus + "/**"]),
        args = [native.package_name() + "/" + corpus],
        tags = tags,
    )
