"""gaptrain's Python trainer SDK: a user's PyTorch model, dataset and loss as
a trainer of a gaptrain job (python/README.md, docs/worker.md)."""

from gaptrain.options import Options, OptionsError, parse as parse_options
from gaptrain.rpc import GaptrainError
from gaptrain.trainer import TrainResult, train

__all__ = ["train", "parse_options", "Options", "TrainResult", "GaptrainError", "OptionsError"]
__version__ = "0.1.0"
