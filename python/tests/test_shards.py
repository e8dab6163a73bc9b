"""θ over several masters (spec.master.shards): shard_plan.py's cuts against
services/engine/shard_plan_test.cc's; MasterSession over fake shards (a
push one shard refuses sent again to it only, positions per shard and run,
the lowest version reported, while_waiting once every shard's bytes are
out); and two real `gaptrain-master --shard I` processes with a real
coordinator (test_integration.py's Job): a Python trainer declares a
BatchNorm CNN to both and trains it, both shards' versions advance, the
buffers live on shard 0, and a Python evaluator reads both shards; shard 1
SIGKILLed and started again, the trainer goes on with its new run and the
coordinator trains again what it lost."""

import os
import sys
import threading
import time
import types
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

import grpc  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

from gaptrain import master_session  # noqa: E402
from gaptrain.rpc import Error  # noqa: E402
from gaptrain.shard_plan import plan_shards  # noqa: E402
from gaptrain._proto import gaptrain_pb2 as pb  # noqa: E402

# LeNet-5's tensors (61,706 parameters), as shard_plan_test.cc's LeNet5().
LENET5 = [6 * 1 * 5 * 5, 6, 16 * 6 * 5 * 5, 16, 120 * 400, 120, 84 * 120, 84, 10 * 84, 10]


class ShardPlanTest(unittest.TestCase):
    """The cuts of services/engine/shard_plan_test.cc."""

    def test_one_shard_holds_the_whole_model(self):
        self.assertEqual(sum(LENET5), 61706)
        self.assertEqual(plan_shards(LENET5, 1), [(0, 61706)])

    def test_many_equal_tensors_are_kept_whole(self):
        self.assertEqual(plan_shards([1000] * 8, 4),
                         [(0, 2000), (2000, 4000), (4000, 6000), (6000, 8000)])

    def test_a_large_tensor_is_cut_at_the_fair_share(self):
        self.assertEqual(plan_shards(LENET5, 2), [(0, 30853), (30853, 61706)])

    def test_a_nearby_tensor_boundary_is_preferred_to_a_cut(self):
        self.assertEqual(plan_shards([1100, 900], 2), [(0, 1100), (1100, 2000)])
        self.assertEqual(plan_shards([1200, 800], 2), [(0, 1000), (1000, 2000)])

    def test_ranges_tile_the_model_for_every_count(self):
        p = sum(LENET5)
        for s in range(1, 65):
            plan = plan_shards(LENET5, s)
            self.assertEqual(len(plan), s)
            at = 0
            for begin, end in plan:
                self.assertEqual(begin, at, s)
                self.assertGreater(end, begin, s)
                self.assertLessEqual(end - begin, p // s * 5 // 4 + 2, s)
                at = end
            self.assertEqual(at, p)

    def test_more_shards_than_parameters_are_refused(self):
        with self.assertRaisesRegex(ValueError, "3 parameters, fewer than its 4 shards"):
            plan_shards([3], 4)
        with self.assertRaises(ValueError):
            plan_shards([3], 0)
        # An empty tensor moves no cut.
        self.assertEqual(plan_shards([100, 0, 100], 2), [(0, 100), (100, 200)])


class _Coordinator:
    """The coordinator session as MasterSession uses it."""
    worker_id = 5

    def __init__(self):
        self.version = None

    def set_master_version(self, version):
        self.version = version if self.version is None else max(self.version, version)

    def reset_master_version(self, version):
        self.version = version

    def heartbeat_now(self):
        pass

    def heartbeat_period(self):
        return 0.2


class _Metrics:
    def __getattr__(self, name):
        return lambda *args: None


class _Shard:
    """A MasterClient's face to MasterSession: pushes recorded, answered
    from `answers` (a PushResponse, or an Error raised)."""

    def __init__(self, index, begin, end, incarnation):
        self.shard = pb.ShardRange(index=index, count=2, begin=begin, end=end)
        self.name = "master shard %d (fake)" % index
        self.begin, self.end = begin, end
        self.rule = "gap-aware"
        self.incarnation = incarnation
        self.base_version = 10
        self.has_batch = self.pulled_with_push = self.run_changed = False
        self.reply = self.pulled = None
        self.answers = []
        self.pushed = []  # the gradient's range of each push

    def push(self, gradient, loss, while_waiting=None):
        self.pushed.append(gradient[self.begin:self.end].clone())
        if while_waiting is not None:
            while_waiting()
        answer = self.answers.pop(0)
        if isinstance(answer, Error):
            raise answer
        self.reply = answer
        return answer

    def note_outcome(self, code):
        pass

    def note_incarnation(self, incarnation):
        pass

    def close(self):
        pass


class ShardedSessionTest(unittest.TestCase):
    def _session(self):
        torch.manual_seed(1)
        model = nn.Linear(3, 2)  # 8 parameters: shard 0 holds [0, 6), shard 1 [6, 8)
        opts = types.SimpleNamespace(token="", host_name="test", momentum=0.0, weight_decay=0.0)
        coordinator = _Coordinator()
        s = master_session.MasterSession(opts, None, coordinator, _Metrics(),
                                         model.named_parameters())
        s.clients = [_Shard(0, 0, 6, incarnation=101), _Shard(1, 6, 8, incarnation=202)]
        s.addresses = ["a:1", "b:1"]
        s._check_shards()
        import concurrent.futures
        s._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
        self.addCleanup(s.close)
        return s, coordinator

    def test_a_push_one_shard_refuses_is_sent_again_to_it_only(self):
        s, coordinator = self._session()
        first, second = s.clients
        first.answers = [pb.PushResponse(version=11, incarnation=101, staleness=1)]
        second.answers = [Error(grpc.StatusCode.FAILED_PRECONDITION, "too stale"),
                          pb.PushResponse(version=14, incarnation=202, staleness=3)]
        s.new_batch()
        s.begin_task()
        gradient = torch.arange(8, dtype=torch.float32)
        waited = []
        with self.assertRaisesRegex(Error, r"master shard 1 \(fake\): too stale") as caught:
            s.push(gradient, 0.5, while_waiting=lambda: waited.append(1))
        self.assertEqual(s.after_push_failure(caught.exception), master_session.AGAIN)
        self.assertEqual(len(waited), 1)  # once both shards' bytes were out
        self.assertTrue(first.has_batch)
        # The same batch recomputed: only shard 1 gets it.
        reply = s.push(gradient * 2, 0.5, while_waiting=lambda: waited.append(2))
        self.assertEqual(len(first.pushed), 1)
        self.assertEqual(len(second.pushed), 2)
        self.assertTrue(torch.equal(first.pushed[0], gradient[:6]))
        self.assertTrue(torch.equal(second.pushed[1], gradient[6:] * 2))
        self.assertEqual(waited, [1])  # shard 0 sent nothing the second time
        # The lowest version, the largest staleness; positions per shard and run.
        self.assertEqual((reply.version, reply.staleness), (11, 3))
        self.assertEqual(coordinator.version, 11)
        self.assertEqual(s.reached(), {(0, 101): 11, (1, 202): 14})
        # The next batch goes to both.
        first.answers = [pb.PushResponse(version=12, incarnation=101)]
        second.answers = [pb.PushResponse(version=15, incarnation=202)]
        s.new_batch()
        s.push(gradient, 0.5)
        self.assertEqual((len(first.pushed), len(second.pushed)), (2, 3))
        self.assertEqual(s.reached(), {(0, 101): 12, (1, 202): 15})

    def test_while_waiting_runs_after_every_shards_bytes_are_out(self):
        s, _ = self._session()
        first, second = s.clients
        second_out = threading.Event()

        def slow_push(gradient, loss, while_waiting=None):
            second.pushed.append(gradient)
            second_out.set()
            while_waiting()
            second.reply = pb.PushResponse(version=3, incarnation=202)
            return second.reply

        second.push = slow_push
        first.answers = [pb.PushResponse(version=4, incarnation=101)]
        seen = []
        s.new_batch()
        s.push(torch.zeros(8), 0.0, while_waiting=lambda: seen.append(second_out.is_set()))
        self.assertEqual(seen, [True])

    def test_shards_that_do_not_tile_the_model_are_refused(self):
        s, _ = self._session()
        s.clients[1].begin = 5
        with self.assertRaisesRegex(Exception, r"master b:1 holds shard 1 of 2 \[5, 8\); the "
                                               r"registration names it shard 1 of 2, from "
                                               r"parameter 6"):
            s._check_shards()
        s.clients[1].begin, s.clients[1].end = 6, 7
        with self.assertRaisesRegex(Exception, "shards end at parameter 7 of the model's 8"):
            s._check_shards()

    def test_addresses_of_a_registration(self):
        reg = pb.RegisterResponse(master_address="m0:1", master_addresses=["m0:1", "m1:1"])
        self.assertEqual(master_session.master_addresses(reg), ["m0:1", "m1:1"])
        self.assertEqual(master_session.master_addresses(
            pb.RegisterResponse(master_address="m:1")), ["m:1"])


class TwoMasterShardsTest(unittest.TestCase):
    def setUp(self):
        import tempfile
        self.dir = tempfile.TemporaryDirectory(prefix="gaptrain-shards-")
        self.addCleanup(self.dir.cleanup)

    def test_a_python_trainer_and_evaluator_with_two_master_shards(self):
        from test_integration import EXAMPLE, Job, read_result
        sys.path.insert(0, os.path.dirname(EXAMPLE))
        import fashion_mnist_mlp
        module = fashion_mnist_mlp.BatchNormCNN()
        sizes = [p.numel() for p in module.parameters()]
        job = Job(self.dir.name, "fp32", updates=120, model="{fromTrainer: true}",
                  eval_every=60, shards=2)
        try:
            evaluator, eval_result = job.trainer("py-evaluator", role="evaluator", model="bn-cnn")
            trainer, result = job.trainer("py-trainer", model="bn-cnn")
            self.assertEqual(trainer.wait(timeout=240), 0, job.log("py-trainer"))
            self.assertEqual(evaluator.wait(timeout=60), 0, job.log("py-evaluator"))
            r = read_result(result)
            self.assertEqual(r["reason"], "finished")
            self.assertGreater(r["tasks"], 0)
            # Each shard holds PlanShards' range of the declared model and
            # applied every push.
            plan = plan_shards(sizes, 2)
            versions = []
            for i, stub in enumerate(job.master_stubs):
                d = job._call(stub.Describe, pb.DescribeRequest())
                self.assertFalse(d.awaiting_model)
                self.assertEqual((d.shard.index, d.shard.count), (i, 2))
                self.assertEqual((d.shard.begin, d.shard.end), plan[i])
                self.assertEqual([t.name for t in d.layout.tensors],
                                 [n for n, _ in module.named_parameters()])
                versions.append(d.version)
            self.assertGreaterEqual(min(versions), 120, versions)
            self.assertGreaterEqual(r["batches"], 120)
            # The buffers live on shard 0: trained statistics there.
            buffers = job._call(job.master_stubs[0].PullBuffers, pb.PullBuffersRequest())
            self.assertGreaterEqual(buffers.merges, r["batches"] // 16)
            mean = torch.frombuffer(bytearray(buffers.values[:32]), dtype=torch.float32)
            self.assertGreater(mean.abs().max().item(), 0.01)  # bn1.running_mean
            with self.assertRaises(grpc.RpcError) as refused:
                job._call(job.master_stubs[1].PullBuffers, pb.PullBuffersRequest())
            self.assertEqual(refused.exception.code(), grpc.StatusCode.FAILED_PRECONDITION)
            log = job.log("py-trainer", tail=None)
            self.assertIn("shard 1 of 2: parameters [%d, %d)" % plan[1], log)
            self.assertIn("declared the model: the job's model now", log)
            # The evaluator read both shards: versions no shard is short of.
            e = read_result(eval_result)
            self.assertGreaterEqual(e["evaluations"], 1)
            self.assertGreater(e["accuracy"], 0.3)
            self.assertLessEqual(e["version"], min(versions))
            self.assertEqual(job.status().phase, pb.JOB_PHASE_SUCCEEDED)
        finally:
            job.close()

    def test_a_shard_restarted_loses_only_its_own_training(self):
        # master-1 SIGKILLed at version 100 and started again on its address
        # with no checkpoint: the trainer notices the new run, pulls a whole
        # copy of that shard, reports the positions of both runs, and the
        # coordinator trains again what shard 1 lost; the job succeeds.
        from test_integration import Job, read_result
        job = Job(self.dir.name, "fp32", updates=300, shards=2)
        try:
            trainer, result = job.trainer("py-trainer")
            deadline = time.monotonic() + 120
            while job._call(job.master_stubs[1].Describe, pb.DescribeRequest()).version < 100:
                self.assertIsNone(trainer.poll(), job.log("py-trainer"))
                self.assertLess(time.monotonic(), deadline, job.log("py-trainer"))
                time.sleep(0.05)
            job.restart_master_shard(1)
            self.assertEqual(trainer.wait(timeout=240), 0, job.log("py-trainer"))
            self.assertEqual(read_result(result)["reason"], "finished")
            st = job.status()
            self.assertEqual((st.phase, st.reason), (pb.JOB_PHASE_SUCCEEDED, "MaxUpdatesReached"))
            self.assertEqual(st.master_restores, 1)
            self.assertGreater(st.tasks_retrained, 0)
            for stub in job.master_stubs:
                self.assertGreaterEqual(job._call(stub.Describe, pb.DescribeRequest()).version,
                                        300)
            self.assertIn("master shard 1 (%s): a new run" % job.masters[1],
                          job.log("py-trainer", tail=None))
        finally:
            job.close()


if __name__ == "__main__":
    unittest.main()
