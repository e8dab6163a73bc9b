"""gaptrain's Python SDK: a user's PyTorch model, dataset and loss as a
trainer of a gaptrain job, and the user's model, test set and evaluation as
its evaluator (python/README.md, docs/worker.md)."""

from gaptrain.data_errors import store_unavailable
from gaptrain.evaluator import EvalResult, classification, evaluate
from gaptrain.options import Options, OptionsError, parse as parse_options
from gaptrain.options import requested_role as role
from gaptrain.rpc import GaptrainError
from gaptrain.script_main import run_main
from gaptrain.sharded_dataset import ShardedDataset
from gaptrain.trainer import TrainResult, Trainer, train

__all__ = ["train", "Trainer", "evaluate", "role", "classification", "parse_options", "Options",
           "TrainResult", "EvalResult", "GaptrainError", "OptionsError", "ShardedDataset",
           "store_unavailable", "run_main"]
__version__ = "0.1.0"
