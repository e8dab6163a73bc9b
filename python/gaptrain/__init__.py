"""gaptrain's Python trainer SDK: a user's PyTorch model, dataset and loss as
a trainer of a gaptrain job (python/README.md, docs/worker.md)."""

from gaptrain.options import OptionsError
from gaptrain.trainer import GaptrainError, TrainResult, train

__all__ = ["train", "TrainResult", "GaptrainError", "OptionsError"]
__version__ = "0.1.0"
