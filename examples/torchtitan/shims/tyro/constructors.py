"""The part of `tyro.constructors` TorchTitan's ConfigManager touches: a registry that
accepts primitive rules (the stand-in's cli() parses list[str] as comma-separated itself)."""


class PrimitiveTypeInfo:
    def __init__(self, type=None, **kwargs):
        self.type = type
        self.__dict__.update(kwargs)


class PrimitiveConstructorSpec:
    def __init__(self, **kwargs):
        self.__dict__.update(kwargs)


class ConstructorRegistry:
    def __init__(self):
        self.rules = []

    def primitive_rule(self, rule):
        self.rules.append(rule)
        return rule
