"""Stand-in for `torchdata` (not installed on the GPU host): only
torchdata.stateful_dataloader.StatefulDataLoader, which TorchTitan's ParallelAwareDataloader
subclasses (torchtitan/components/dataloader.py)."""
