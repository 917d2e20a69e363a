"""The wrong-node answers of broker/handlers/elsewhere.py at every version Gregor advertises: each
encodes, decodes back with the request's items, and carries the error where Kafka puts it."""

from __future__ import annotations

import pytest

from broker.handlers.elsewhere import REFUSALS, key_of, refusal
from protocol.api_versions import API_SPECS, SPECS_BY_NAME
from protocol.codec import Request, RequestHeaderInfo


def _errors(value, found: list) -> list:
    """Every error code in a decoded response, depth first."""
    for name in getattr(value, "fields", {}) or {}:
        if not value.fields[name].for_version_q(value.version if value.version is not None else 0):
            continue
        item = getattr(value, name)
        if name in ("error_code", "partition_error_code"):
            found.append(item)
        elif isinstance(item, list):
            for element in item:
                if hasattr(element, "fields"):
                    _errors(element, found)
    return found


def _request(api_key: int, version: int) -> Request:
    spec = API_SPECS[api_key]
    cls = spec.request
    fields = cls.fields
    body: dict = {}
    if "group_id" in fields:
        body["group_id"] = "g"
    if "transactional_id" in fields:
        body["transactional_id"] = "t"
    if "member_id" in fields:
        body["member_id"] = "m"
    if api_key == 9:
        Topic = fields["topics"].data_class
        body["topics"] = [Topic(name="a", partition_indexes=[0, 1])]
    if api_key == 24:
        Topic = fields["v3_and_below_topics"].data_class
        body["v3_and_below_transactional_id"] = "t"
        body["v3_and_below_topics"] = [Topic(name="a", partitions=[0, 1])]
    if api_key in (19, 37):
        body["topics"] = [fields["topics"].data_class(name="a"), fields["topics"].data_class(name="b")]
    if api_key == 20:
        if version >= 6:
            body["topics"] = [fields["topics"].data_class(name="a", topic_id=None)]
        else:
            body["topic_names"] = ["a", "b"]
    header = RequestHeaderInfo(api_key, version, 1, "c", spec.flexible(version))
    return Request(header, spec, cls[version](**body))


CASES = [(k, v) for k in sorted(SPECS_BY_NAME[n].api_key for n in REFUSALS)
         for v in range(API_SPECS[k].min_version, API_SPECS[k].max_version + 1)
         if not (k == 9 and v >= 8)]


@pytest.mark.parametrize(("api_key", "version"), CASES, ids=[f"{API_SPECS[k].name}-v{v}" for k, v in CASES])
def test_each_answer_encodes_at_every_version_with_the_error_in_every_place(api_key, version):
    request = _request(api_key, version)
    error = 41 if REFUSALS[API_SPECS[api_key].name][0] is None else 16
    answer = refusal(request, error)
    decoded = request.spec.response.decode(bytes(answer.encode(version=version)), version=version)
    errors = _errors(decoded, [])
    assert errors and set(errors) == {error}
    if api_key in (19, 20, 37):
        assert len(errors) == (1 if api_key == 20 and version >= 6 else 2)  # one per topic
    if api_key in (24,) or (api_key == 9 and version < 2):
        assert len(errors) == 2  # one per partition
    if REFUSALS[API_SPECS[api_key].name][0] is not None:
        assert key_of(request) in ("g", "t")
