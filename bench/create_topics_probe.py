"""CreateTopics and the event loop: the longest ApiVersions round trip on one connection while
another creates three 1,000-partition topics.

Run: .venv/bin/python bench/create_topics_probe.py [SOURCE_TREE]   (default: this checkout)
Starts a broker from SOURCE_TREE (for before/after, a `git archive` of an older commit), pings
it every 2 ms, and prints the longest round trip and how long the creations took.
"""
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
src = Path(sys.argv[1] if len(sys.argv) > 1 else ROOT).resolve()
sys.path.insert(0, str(ROOT / "bench")); sys.path.insert(0, str(ROOT))
from broker_process import BrokerProcess
from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.metadata import ApiVersionsRequest

from tests.kit.wire import WireClient

BrokerProcess.source = src
tmp = Path(tempfile.mkdtemp(prefix="gregor-create-probe-"))
b = BrokerProcess(tmp / "data", {"commitlog.segment.bytes": str(64 << 20)})
b.start(); b.wait_idle()
try:
    stop = threading.Event(); worst = [0.0]; count = [0]
    def ping():
        c = WireClient(b.bootstrap)
        while not stop.is_set():
            t = time.perf_counter()
            c.request(ApiVersionsRequest[3](client_software_name="p", client_software_version="1"))
            worst[0] = max(worst[0], time.perf_counter() - t); count[0] += 1
            time.sleep(0.002)
    th = threading.Thread(target=ping); th.start()
    time.sleep(0.5)
    admin = WireClient(b.bootstrap, timeout=120)
    T = CreateTopicsRequest.CreatableTopic
    t = time.perf_counter()
    for i in range(3):
        r = admin.request(CreateTopicsRequest[5](topics=[T(name=f"wide{i}", num_partitions=1000, replication_factor=1,
                                              assignments=[], configs=[])], timeout_ms=60000, validate_only=False))
        assert r.topics[0].error_code == 0, r
    took = time.perf_counter() - t
    time.sleep(0.2); stop.set(); th.join()
    print(f"{src}: 3 x CreateTopics(1,000 partitions) took {took:.2f} s; longest ApiVersions round trip meanwhile "
          f"{worst[0]*1000:.1f} ms over {count[0]} requests")
finally:
    b.stop(); shutil.rmtree(tmp)
