"""StatefulDataLoader stand-in: torch's DataLoader with the state_dict()/load_state_dict()
pair TorchTitan's checkpointing calls. The state is only the number of batches handed out
(TorchTitan's checkpointing is off in examples/torchtitan; resuming from it replays nothing).
The constructor's parameters are DataLoader's, named, because TorchTitan validates its
dataloader kwargs against this signature."""
from torch.utils.data import DataLoader

__all__ = ["StatefulDataLoader"]


class StatefulDataLoader(DataLoader):
    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor=None, persistent_workers=False, pin_memory_device="",
                 in_order=True, snapshot_every_n_steps=1):
        given = dict(batch_size=batch_size, shuffle=shuffle, sampler=sampler, batch_sampler=batch_sampler,
                     num_workers=num_workers, collate_fn=collate_fn, pin_memory=pin_memory,
                     drop_last=drop_last, timeout=timeout, worker_init_fn=worker_init_fn,
                     multiprocessing_context=multiprocessing_context, generator=generator,
                     prefetch_factor=prefetch_factor, persistent_workers=persistent_workers,
                     pin_memory_device=pin_memory_device, in_order=in_order)
        defaults = dict(shuffle=None, sampler=None, batch_sampler=None, num_workers=0, collate_fn=None,
                        pin_memory=False, drop_last=False, timeout=0, worker_init_fn=None,
                        multiprocessing_context=None, generator=None, prefetch_factor=None,
                        persistent_workers=False, pin_memory_device="", in_order=True)
        # Only what differs from DataLoader's defaults: no parameter this torch may lack is passed.
        kwargs = {k: v for k, v in given.items() if k not in defaults or defaults[k] != v}
        super().__init__(dataset, **kwargs)
        self._batches = 0

    def __iter__(self):
        for batch in super().__iter__():
            self._batches += 1
            yield batch

    def state_dict(self):
        return {"batches": self._batches}

    def load_state_dict(self, state_dict):
        self._batches = int(state_dict.get("batches", 0))
