"""The compiled extensions, each the twin of Python code that is kept, used where it cannot be built,
and tested against it on the same inputs: the key index's per-record walk (store/_keywalk.c), a
commitlog entry's framing (store/_entry.c), a produced batch's header checks
(protocol/_record_batch.c), the Fetch and Produce request decoders (protocol/_fetch_request.c,
protocol/_produce_request.c) and their answers' encoders (protocol/_answers.c). Everything else is
in pyproject.toml. Optional: where a C compiler is missing, Gregor runs the Python twins."""

from setuptools import Extension, setup

setup(ext_modules=[
    Extension("store._keywalk", ["store/_keywalk.c"], optional=True),
    Extension("store._entry", ["store/_entry.c"], optional=True),
    Extension("protocol._record_batch", ["protocol/_record_batch.c"], optional=True),
    Extension("protocol._fetch_request", ["protocol/_fetch_request.c"], depends=["protocol/_named_tuple.h"],
              optional=True),
    Extension("protocol._produce_request", ["protocol/_produce_request.c"], depends=["protocol/_named_tuple.h"],
              optional=True),
    Extension("protocol._answers", ["protocol/_answers.c"], optional=True),
])
