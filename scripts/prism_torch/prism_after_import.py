"""Runs a function on a module as soon as Python has imported it, for the hooks
`prism capture` puts on the real ranks' path (prism_torch_trace.py,
prism_group_announce.py): a sys.meta_path finder that wraps the module's loader,
then steps aside. Never raises into the program: a failing function is printed
with `what` and the import goes on."""
import importlib.abc
import importlib.util
import sys


class _AfterImport(importlib.abc.MetaPathFinder):
    def __init__(self, name, then, what):
        self.name, self.then, self.what = name, then, what

    def find_spec(self, name, path, target=None):
        if name != self.name:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        except Exception:  # let the import go on as if this finder were not there
            return None
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader_exec = spec.loader.exec_module

        def exec_module(module):
            loader_exec(module)
            try:
                if self in sys.meta_path:
                    sys.meta_path.remove(self)
                self.then(module)
            except Exception as e:
                print(f"prism: {self.what} not installed: {type(e).__name__}: {e}", file=sys.stderr, flush=True)

        spec.loader.exec_module = exec_module
        return spec


def call_after_import(name, then, what):
    """then(module) now if `name` is imported, else as soon as it is."""
    if name in sys.modules:
        then(sys.modules[name])
    else:
        sys.meta_path.insert(0, _AfterImport(name, then, what))
