import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.producer import ProduceResponse

from protocol import produce_response
from protocol.produce_response import encode_produce_response

partition = st.tuples(st.integers(0, 2**31 - 1), st.integers(-1, 120), st.integers(-1, 2**62),
                      st.integers(-1, 2**62), st.integers(-1, 2**62), st.one_of(st.none(), st.text(max_size=30)))
results = st.lists(st.tuples(st.text(min_size=1, max_size=40), st.lists(partition, max_size=4)), max_size=3)


def reference(version, res, throttle):
    T = ProduceResponse.TopicProduceResponse
    P = T.PartitionProduceResponse
    body = ProduceResponse[version](throttle_time_ms=throttle, responses=[
        T(name=name, partition_responses=[P(index=i, error_code=e, base_offset=b, log_append_time_ms=a,
                                            log_start_offset=s, record_errors=[], error_message=m)
                                          for i, e, b, a, s, m in parts]) for name, parts in res])
    return bytes(body.encode())


@pytest.mark.parametrize("version", range(12))
@settings(max_examples=60, deadline=None)
@given(res=results, throttle=st.integers(0, 10_000))
def test_matches_kafka_python_encoder_for_every_version(version, res, throttle):
    assert encode_produce_response(version, res, throttle) == reference(version, res, throttle)


def test_the_setup_built_the_c_encoder():
    assert produce_response._c_produce.__module__ == "protocol._answers", \
        "protocol/_answers.c was not built: bash bin/setup builds it"


@pytest.mark.parametrize("version", range(12))
@settings(max_examples=60, deadline=None)
@given(res=results, throttle=st.integers(0, 10_000))
def test_the_c_encoder_and_its_python_twin_agree(version, res, throttle):
    """The C encoder answers the results without an error message, as its twin does; it leaves the others
    (None) to the twin."""
    by_c = produce_response._c_produce(version, res, throttle)
    has_message = any(p[5] is not None for _, parts in res for p in parts)
    if has_message:
        assert by_c is None
    else:
        assert by_c == produce_response._encode(version, res, throttle)
