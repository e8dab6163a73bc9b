"""The committed gaptrain/_proto modules are what generate_protos.sh writes
from proto/gaptrain.proto today."""

import filecmp
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.join(HERE, "..")
sys.path.insert(0, PYTHON_DIR)


@unittest.skipUnless(shutil.which("protoc") and shutil.which("grpc_python_plugin"),
                     "needs protoc and grpc_python_plugin (protobuf-compiler, "
                     "protobuf-compiler-grpc)")
class GeneratedProtosTest(unittest.TestCase):
    def test_regenerating_gives_the_committed_files(self):
        with tempfile.TemporaryDirectory() as out:
            subprocess.run([os.path.join(PYTHON_DIR, "generate_protos.sh"), out], check=True)
            for name in ("gaptrain_pb2.py", "gaptrain_pb2_grpc.py"):
                committed = os.path.join(PYTHON_DIR, "gaptrain", "_proto", name)
                self.assertTrue(filecmp.cmp(os.path.join(out, name), committed, shallow=False),
                                "%s is stale: run python/generate_protos.sh" % name)

    def test_the_modules_import(self):
        from gaptrain._proto import gaptrain_pb2, gaptrain_pb2_grpc
        self.assertTrue(hasattr(gaptrain_pb2_grpc, "MasterStub"))
        self.assertEqual(gaptrain_pb2.BFLOAT16, 1)


if __name__ == "__main__":
    unittest.main()
