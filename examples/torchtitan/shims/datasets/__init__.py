"""Stand-in for Hugging Face `datasets` (not installed on the GPU host; no data can be
downloaded there): the three names TorchTitan's text dataset uses
(torchtitan/hf_datasets/text_datasets.py): ``Dataset``, ``load_dataset`` and
``datasets.distributed.split_dataset_by_node``.

``load_dataset(path, ...)`` returns a map-style ``Dataset`` of synthetic C4-shaped samples
(``{"text": ...}``): deterministic English-like text, enough for TorchTitan's tokenizer and
sequence packing to produce full ``seq_len`` batches. What the model learns is beside the
point: Prism measures the program's communication and compute, which do not depend on the
text. PRISM_TITAN_SAMPLES (default 256, of 2000 words each) sets the number of samples.
"""
import os
import random

__all__ = ["Dataset", "load_dataset"]

_WORDS = (
    "the of and to in a is that for it as was with be by on not he this are or his from at which "
    "but have an they you were her she there one all we their has been if more when will would who "
    "so no out up into do any time about what can some them other than then its only new could "
    "these two may first like over such our most after also made did many before must through back "
    "years where much your way well down should because each just those people how too little state "
    "good very make world still own see men work long get here between both life being under never "
    "day same another know while last might us great old year off come since against go came right "
    "used take three training model data parallel shard tensor gradient layer token sequence batch"
).split()


class Dataset:
    """A map-style dataset of dict samples (the part of datasets.Dataset TorchTitan uses)."""

    def __init__(self, samples):
        self._samples = list(samples)

    def __len__(self):
        return len(self._samples)

    def __getitem__(self, i):
        return self._samples[i]

    def __iter__(self):
        return iter(self._samples)

    def skip(self, n):
        return Dataset(self._samples[n:])


def _synthetic_text(rng, words=2000):
    out = []
    for _ in range(words):
        w = rng.choice(_WORDS)
        out.append(w.capitalize() if rng.random() < 0.05 else w)
    return " ".join(out) + "."


def load_dataset(path=None, name=None, split=None, streaming=False, **_):
    rng = random.Random(f"{path}/{name}/{split}")
    n = int(os.environ.get("PRISM_TITAN_SAMPLES", "256"))
    return Dataset({"text": _synthetic_text(rng)} for _ in range(n))
