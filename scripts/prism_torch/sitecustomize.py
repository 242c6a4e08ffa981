"""Loaded by Python at start-up when `prism capture` puts this folder first on
the real ranks' PYTHONPATH: with PRISM_ANNOUNCE_GROUPS set, tells prismd the
groups of each split_group call (prism_group_announce.py); with
PRISM_TORCH_TRACE set, records what the program asks of torch.distributed
(prism_torch_trace.py; docs/capture.md).
Then runs the sitecustomize this one shadows, if any."""
import os
import sys

if os.environ.get("PRISM_ANNOUNCE_GROUPS"):
    try:
        import prism_group_announce
        prism_group_announce.install()
    except Exception as e:  # never stop the program for the announcements' sake
        print(f"prism: split_group announcements not installed: {e}", file=sys.stderr, flush=True)

if os.environ.get("PRISM_TORCH_TRACE"):
    try:
        import prism_torch_trace
        prism_torch_trace.install(os.environ["PRISM_TORCH_TRACE"])
    except Exception as e:  # never stop the program for the trace's sake
        print(f"prism: torch trace not installed: {e}", file=sys.stderr, flush=True)


def _chain():
    here = os.path.dirname(os.path.abspath(__file__))
    import importlib.util
    for entry in sys.path:
        if not entry or os.path.abspath(entry) == here:
            continue
        path = os.path.join(entry, "sitecustomize.py")
        if os.path.isfile(path):
            spec = importlib.util.spec_from_file_location("_prism_chained_sitecustomize", path)
            spec.loader.exec_module(importlib.util.module_from_spec(spec))
            return


_chain()
