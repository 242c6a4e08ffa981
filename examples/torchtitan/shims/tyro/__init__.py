"""Stand-in for `tyro` (not installed on the GPU host), for TorchTitan's ConfigManager.

TorchTitan (torchtitan/config/manager.py) calls exactly one function of tyro:
``tyro.cli(JobConfig, args=argv, default=<JobConfig from the TOML file>, registry=...)``,
and registers one rule (comma-separated ``list[str]``) on a ConstructorRegistry. This
stand-in applies ``--section.key value`` / ``--section.key=value`` overrides to the default
dataclass, converting each value by the field's annotation; booleans also take the
flag forms ``--section.key`` and ``--section.no-key`` (as tyro's). Dashes in keys are
underscores. An unknown key is an error naming it. Nothing else of tyro is provided.
"""
import dataclasses
import types
import typing

from . import constructors  # noqa: F401  (tyro.constructors.ConstructorRegistry)

__all__ = ["cli", "constructors"]


def _convert(tp, text, key):
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(tp) if a is not type(None)]
        if text in ("None", "none", "null") and len(options) < len(typing.get_args(tp)):
            return None
        errors = []
        for option in options:
            try:
                return _convert(option, text, key)
            except ValueError as e:
                errors.append(str(e))
        raise ValueError(f"--{key}: {text!r} is none of {options}: {'; '.join(errors)}")
    if origin is typing.Literal:
        for choice in typing.get_args(tp):
            if str(choice) == text:
                return choice
        raise ValueError(f"--{key}: {text!r} is not one of {typing.get_args(tp)}")
    if origin is list:
        (item,) = typing.get_args(tp) or (str,)
        return [_convert(item, part, key) for part in text.split(",") if part != ""]
    if tp is bool:
        if text.lower() in ("true", "1", "yes"):
            return True
        if text.lower() in ("false", "0", "no"):
            return False
        raise ValueError(f"--{key}: {text!r} is not a boolean")
    if tp in (int, float, str):
        return tp(text)
    if tp is typing.Any:
        return text
    raise ValueError(f"--{key}: the tyro stand-in cannot parse a {tp} from the command line; "
                     f"set it in the TOML file")


def _field(obj, path, key):
    *parents, name = path
    for p in parents:
        if not dataclasses.is_dataclass(obj) or not hasattr(obj, p):
            raise SystemExit(f"unknown option --{key} (no section {p!r})")
        obj = getattr(obj, p)
    fields = {f.name: f for f in dataclasses.fields(obj)} if dataclasses.is_dataclass(obj) else {}
    return obj, fields.get(name), name


def cli(cls, args=None, default=None, registry=None, **_):
    config = default if default is not None else cls()
    args = list(args or [])
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if not arg.startswith("--"):
            raise SystemExit(f"unexpected argument {arg!r} (options are --section.key value)")
        key, eq, value = arg[2:].partition("=")
        path = key.replace("-", "_").split(".")
        obj, field, name = _field(config, path, key)
        negated = False
        if field is None and name.startswith("no_"):
            obj, field, name = _field(config, path[:-1] + [name[3:]], key)
            negated = field is not None and field.type is bool
            if not negated:
                field = None
        if field is None:
            raise SystemExit(f"unknown option --{key}")
        if field.type is bool and not eq and (i >= len(args) or args[i].startswith("--")
                                               or args[i].lower() not in ("true", "false", "1", "0")):
            setattr(obj, name, not negated)
            continue
        if not eq:
            if i >= len(args):
                raise SystemExit(f"--{key} needs a value")
            value = args[i]
            i += 1
        try:
            setattr(obj, name, _convert(field.type, value, key))
        except ValueError as e:
            raise SystemExit(str(e))
    return config
