"""Package names imported on first use (PEP 562), so that importing a package for one small
module (``rocketpy.remoting.codes``, ``rocketpy.capture.cli``) does not import all the others:
the capture decoder's console script starts without the frame schema or the reference decoder.
"""
import importlib

__all__ = ["lazy_exports"]


def lazy_exports(namespace: dict, exports: dict):
    """``(__getattr__, __dir__)`` for a package whose ``namespace`` (its globals) offers
    ``exports`` (public name -> the relative module that defines it); a name is imported at its
    first use and kept in the namespace."""
    package = namespace["__name__"]

    def __getattr__(name):
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        namespace[name] = value
        return value

    def __dir__():
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__
