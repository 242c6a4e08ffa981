"""datasets.distributed.split_dataset_by_node stand-in: every data-parallel rank reads its
own share of the synthetic samples (a strided slice, as datasets does for map-style data)."""
from . import Dataset


def split_dataset_by_node(dataset, rank, world_size):
    if world_size <= 1 or len(dataset) < world_size:
        return dataset  # fewer samples than ranks: every rank reads them all
    return Dataset(dataset[i] for i in range(rank, len(dataset), world_size))
