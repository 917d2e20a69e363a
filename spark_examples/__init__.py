"""Runnable PySpark applications that read and write Gregor (or any Kafka) through Spark's own
Kafka source and sink, unchanged. See spark_examples/README.md; each module is one application
(`python -m spark_examples.<module> --help`), plus `connector` (where the connector jars come from)
and `events` (the event model the applications share).
"""
