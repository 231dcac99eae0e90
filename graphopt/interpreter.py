"""Placeholder until the reference interpreter lands (being written now)."""


def interpret(module, *arrays, entry="main"):
    raise NotImplementedError
