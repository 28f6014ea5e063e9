"""The ``lastmile`` command line: one module per command group, each command parsing options, calling one module
and printing a result; the options several commands share are in :mod:`gateway.cli.options`, the signal handling
of the long-running ones in :mod:`gateway.cli.signals`, the mapping of errors to exit statuses in
:mod:`gateway.cli.errors`.

Imports inside a command's function are deliberate, and only there: they load a module that pulls in av, numpy,
onnx, matplotlib, torch or kafka, for the one command that needs it, so that ``lastmile --help`` stays fast."""

from gateway.cli.app import main

__all__ = ["main"]
