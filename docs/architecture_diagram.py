"""Draws docs/architecture.svg, the picture in docs/architecture.md: the layers of one Gregor node
and, beside them, what a broker group adds (commitlog shipping, ZooKeeper).

Standard library only; the SVG is written by hand. Redraw with
`.venv/bin/python docs/architecture_diagram.py` (or any python3) after changing the boxes below.
"""

from __future__ import annotations

from pathlib import Path
from xml.sax.saxutils import escape

OUT = Path(__file__).with_name("architecture.svg")
WIDTH, HEIGHT = 1000, 760

# colours by layer
NET, HANDLERS, STATE, SUBSYS, STORE, CLUSTER, OUTSIDE, PROTO = (
    "#dbeafe", "#e0e7ff", "#ede9fe", "#fce7f3", "#dcfce7", "#ffedd5", "#f3f4f6", "#fef9c3")


def box(x: int, y: int, w: int, h: int, title: str, lines: list[str], fill: str,
        dashed: bool = False) -> str:
    dash = ' stroke-dasharray="6 4"' if dashed else ""
    parts = [f'<rect x="{x}" y="{y}" width="{w}" height="{h}" rx="8" fill="{fill}" '
             f'stroke="#374151" stroke-width="1.2"{dash}/>',
             f'<text x="{x + 10}" y="{y + 20}" class="title">{escape(title)}</text>']
    for i, line in enumerate(lines):
        parts.append(f'<text x="{x + 10}" y="{y + 38 + 15 * i}" class="line">{escape(line)}</text>')
    return "\n".join(parts)


def arrow(x1: int, y1: int, x2: int, y2: int, label: str = "", dx: int = 6, dy: int = 0,
          both: bool = False) -> str:
    start = ' marker-start="url(#head)"' if both else ""
    out = (f'<line x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" stroke="#374151" stroke-width="1.5" '
           f'marker-end="url(#head)"{start}/>')
    if label:
        out += (f'\n<text x="{(x1 + x2) // 2 + dx}" y="{(y1 + y2) // 2 + dy + 4}" '
                f'class="label">{escape(label)}</text>')
    return out


def drawing() -> str:
    items = [
        # clients
        box(40, 20, 600, 50, "Kafka clients (any language)  ·  the `gregor` CLI (broker/cli/)",
            ["speak the Kafka wire protocol to a listener"], OUTSIDE),
        arrow(340, 70, 340, 98, "TCP, TLS, SASL"),
        # net
        box(40, 100, 600, 82, "broker/net/: bytes in and out (trio event loop)",
            ["connection.py: frames in, answers out in request order (Deferred answers wait)",
             "listeners.py · peer.py · answers.py · sendmsg.py (scatter-gather, zero-copy fetch)",
             "admin_http.py + metrics.py (--admin-port: lookups, /metrics)"], NET),
        # protocol, beside net
        box(660, 100, 300, 82, "protocol/ (sans-IO wire)",
            ["framing · codec · api_versions (API table)",
             "record_batch · produce_request/response",
             "fetch_response · record_text · down_convert"], PROTO),
        arrow(640, 141, 658, 141, "", both=True),
        arrow(340, 182, 340, 208, "decoded request"),
        # handlers
        box(40, 210, 600, 66, "broker/handlers/: one module per API family",
            ["HANDLERS: API name -> coroutine (produce, fetch, metadata, topics, configs,",
             "groups, txn, acls, sasl, elsewhere = NOT_COORDINATOR answers)"], HANDLERS),
        arrow(340, 276, 340, 302),
        # shared state + topology
        box(40, 304, 290, 82, "broker/broker.py: Broker",
            ["the shared state handlers receive:",
             "config, store, fetch wake-ups,",
             "producer ids, topic rules"], STATE),
        box(350, 304, 290, 82, "broker/topology.py: Topology",
            ["who leads / is in sync / coordinates",
             "SingleNode: a broker alone (cluster of one)",
             "Cluster (cluster/node.py): a broker group"], STATE),
        arrow(340, 386, 340, 412),
        # subsystems
        box(40, 414, 140, 82, "groups/", ["consumer groups:", "state machine,", "coordinator"], SUBSYS),
        box(193, 414, 140, 82, "txn/", ["transactions,", "idempotent", "producers"], SUBSYS),
        box(346, 414, 140, 82, "security/", ["ACLs, SASL,", "login limits,", "dynamic TLS"], SUBSYS),
        box(499, 414, 141, 82, "views/", ["tag-filtered", "views over a", "consume queue"], SUBSYS),
        arrow(340, 496, 340, 526, "append / read / state records"),
        # store
        box(40, 528, 600, 210, "store/ (Store facade, store.py; no network, no trio)", [], STORE),
        box(56, 566, 250, 56, "commitlog.py + segment.py",
            ["one log for every partition, mmap'd", "preallocated segments"], "#bbf7d0"),
        arrow(306, 594, 348, 594),
        box(350, 566, 274, 56, "dispatch.py: the dispatcher",
            ["entry -> queue entries, transactions,", "key index (KeyDispatcher thread)"], "#bbf7d0"),
        box(56, 636, 180, 88, "consume_queue.py",
            ["per partition:", "20-byte entries", "(position, size, tag hash)"], "#bbf7d0"),
        box(250, 636, 180, 88, "key_index.py",
            ["keys -> positions;", "key_worker.py: a", "second process"], "#bbf7d0"),
        box(444, 636, 180, 88, "also",
            ["flush (group commit),", "recovery, state topic,", "compaction, retention"], "#bbf7d0"),
        arrow(487, 622, 146, 634),
        arrow(487, 622, 340, 634),
        # cluster side
        box(680, 200, 280, 120, "broker/cluster/: a broker group",
            ["node.py: the node's role (Cluster)",
             "state.py: sans-IO decisions",
             "zk.py: znodes through kazoo",
             "topics.py, security.py: across groups",
             "tls/sasl/access: the replication port"], CLUSTER),
        arrow(640, 312, 678, 312, "", both=True),
        box(800, 350, 160, 50, "ZooKeeper", ["masters, sync-state sets"], OUTSIDE),
        arrow(880, 320, 880, 348, "", both=True),
        arrow(740, 320, 740, 428, "role", dx=8),
        box(680, 430, 280, 76, "cluster/shipping.py",
            ["the master ships commitlog chunks", "(sendfile) over the replication port;",
             "followers report what they hold"], CLUSTER),
        arrow(640, 545, 678, 500, "commitlog", dx=4, dy=4),
        box(680, 600, 280, 110, "follower nodes (same code)",
            ["store/follower.py: apply shipped", "chunks, truncate, start over,",
             "high watermark; the dispatcher", "derives their queues and index",
             "cluster/inter_broker.py: txn markers"], OUTSIDE, dashed=True),
        arrow(820, 506, 820, 598, "chunks / HOLDS reports", dx=8, both=True),
    ]
    body = "\n".join(items)
    return f"""<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}">
<defs>
<marker id="head" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse">
<path d="M 0 0 L 10 5 L 0 10 z" fill="#374151"/>
</marker>
<style>
text {{ font-family: Helvetica, Arial, sans-serif; fill: #111827; }}
.title {{ font-size: 14px; font-weight: bold; }}
.line {{ font-size: 12.5px; }}
.label {{ font-size: 11.5px; fill: #4b5563; font-style: italic; }}
</style>
</defs>
<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>
{body}
</svg>
"""


def main() -> None:
    OUT.write_text(drawing())
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
