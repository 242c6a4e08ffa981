"""Where a rank's host thread is, for a hung run's snapshot (driver.py).

driver.py notes each op it is about to launch (and each group it is about to
create) in a small file beside its result, `r<R>.at`: one line, rewritten in
place through a shared mapping, so a note is a memory write, not a syscall
per op. When a run hangs, run-gpu.sh's hang_watch reads every rank's line
(`# rank R pid P at: ...` in hang-threads.txt) and compare.py prints it with
the rank's Python frames: which op of which iteration each rank sat in, so
the ranks that wait can be told from the one they wait for.

Not thread-safe: one per process, written from the thread that enqueues.
"""
import mmap

SIZE = 128  # bytes: the line and its newline


class Whereabouts:
    def __init__(self, path):
        """`path`: the file to keep (created or overwritten); empty: notes go nowhere."""
        self._map = None
        if not path:
            return
        with open(path, "wb") as f:
            f.write(b" " * (SIZE - 1) + b"\n")
        with open(path, "r+b") as f:
            self._map = mmap.mmap(f.fileno(), SIZE)

    def note(self, text):
        """Replaces the line with `text` (cut to fit, one line)."""
        if self._map is None:
            return
        line = text.replace("\n", " ").encode("utf-8", "replace")[:SIZE - 1]
        self._map[:] = line.ljust(SIZE - 1) + b"\n"

    def close(self):
        if self._map is not None:
            self._map.close()
            self._map = None


def read(path):
    """The line a Whereabouts keeps at `path`, stripped; None when there is none."""
    try:
        with open(path, "rb") as f:
            return f.read(SIZE).decode("utf-8", "replace").strip() or None
    except OSError:
        return None
