"""cc_grpc_proto: C++ message and gRPC service code from .proto files.

Uses Debian's protoc and grpc_cpp_plugin (scripts/bootstrap.sh installs them),
so the build needs no downloaded protobuf or gRPC rules.
"""

def cc_grpc_proto(name, srcs, deps = [], visibility = None):
    """Generates <src>.pb.{h,cc} and <src>.grpc.pb.{h,cc}; a cc_library `name` compiles them.

    Args:
      name: the cc_library to create.
      srcs: .proto files in this package; they import each other by workspace path.
      deps: other cc_grpc_proto libraries whose protos these import.
      visibility: of the cc_library.
    """
    outs = []
    for src in srcs:
        stem = src[:-len(".proto")]
        outs += [stem + ".pb.h", stem + ".pb.cc", stem + ".grpc.pb.h", stem + ".grpc.pb.cc"]

    native.genrule(
        name = name + "_codegen",
        srcs = srcs,
        outs = outs,
        cmd = " ".join([
            "protoc",
            "--proto_path=.",
            "--cpp_out=$(GENDIR)",
            "--grpc_out=$(GENDIR)",
            "--plugin=protoc-gen-grpc=$$(command -v grpc_cpp_plugin)",
            "$(SRCS)",
        ]),
    )

    native.cc_library(
        name = name,
        srcs = [o for o in outs if o.endswith(".cc")],
        hdrs = [o for o in outs if o.endswith(".h")],
        deps = deps + ["//third_party:grpc", "//third_party:protobuf"],
        visibility = visibility,
    )
