"""The one compiled extension, store/_keywalk.c (the key index's per-record walk); everything else
is in pyproject.toml. Optional: where it cannot be built, Gregor runs the same walk in Python."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("store._keywalk", ["store/_keywalk.c"], optional=True)])
