"""ProduceRequest bodies for the decoder tests: encoded by kafka-python, and a decoded body as plain data."""

from kafka.protocol.producer import ProduceRequest


def encode(version, txn, acks, timeout, topics):
    """The body (no header) of a ProduceRequest of `topics`: [(name, [(index, records or None)])]."""
    T = ProduceRequest.TopicProduceData
    P = T.PartitionProduceData
    req = ProduceRequest[version](transactional_id=txn, acks=acks, timeout_ms=timeout, topic_data=[
        T(name=name, partition_data=[P(index=i, records=r) for i, r in parts]) for name, parts in topics])
    return bytes(req.encode())


def plain(body):
    """A decoded body as (transactional_id, acks, timeout_ms, topics), records as bytes."""
    return (body.transactional_id, body.acks, body.timeout_ms,
            [(t.name, [(p.index, None if p.records is None else bytes(p.records)) for p in t.partition_data])
             for t in body.topic_data])
