"""A batch of a user's map-style Dataset: the samples at some indices,
collated as a DataLoader collates them (a TensorDataset indexed at once)."""

import torch


def collate(dataset, indices):
    """(inputs, targets) of `dataset` at `indices`."""
    if isinstance(dataset, torch.utils.data.TensorDataset):
        index = torch.tensor(indices, dtype=torch.long)
        return tuple(t[index] for t in dataset.tensors)
    return torch.utils.data.default_collate([dataset[i] for i in indices])


def collate_or_error(dataset, indices):
    """collate()'s batch, or the exception it raised: a batch built ahead
    raises it where the batch is wanted (BatchPrefetch.take)."""
    try:
        return collate(dataset, indices)
    except Exception as e:
        return e
