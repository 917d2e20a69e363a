"""The console's history of rates and lag (broker/console/history.py), with the time passed in."""

from broker.console.history import LagHistory, Rates


def test_rates_are_per_second_between_samples_and_never_negative():
    rates = Rates(keep=3)
    rates.add(100.0, {"messages_in": 0, "bytes_out": 0})
    rates.add(105.0, {"messages_in": 500, "bytes_out": 1000})
    rates.add(110.0, {"messages_in": 400, "bytes_out": 6000})  # a topic deleted: its messages left the total
    assert rates.rates() == [{"t": 105_000, "messages_in": 100.0, "bytes_out": 200.0},
                             {"t": 110_000, "messages_in": 0.0, "bytes_out": 1000.0}]


def test_rates_keep_the_last_samples_only():
    rates = Rates(keep=2)
    for i in range(10):
        rates.add(float(i), {"n": i * 10})
    assert [r["t"] for r in rates.rates()] == [8000, 9000]


def test_lag_history_follows_groups_and_forgets_deleted_ones():
    history = LagHistory(keep=2)
    history.add(1.0, {"a": {("t", 0): 5, ("t", 1): 1}, "b": {}})
    history.add(2.0, {"a": {("t", 0): 2, ("t", 1): 0}})
    history.add(3.0, {"a": {("t", 0): 0, ("t", 1): 0}})
    assert history.samples("a") == [{"t": 2000, "lag": 2, "partitions": {"t-0": 2, "t-1": 0}},
                                    {"t": 3000, "lag": 0, "partitions": {"t-0": 0, "t-1": 0}}]
    assert history.samples("b") == []
