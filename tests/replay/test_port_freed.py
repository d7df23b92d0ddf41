"""A replay lets its port go when it ends: TensorFlow's default graph keeps every py op a traced
step registers for good, and those ops hold the replay's runner, capture and port only weakly
(capture.weakly). A judged check replays a fresh port several times; a test session replays
hundreds."""

from __future__ import annotations

import gc
import weakref

from tools.ports import seed_example

from ..support import golden


def test_a_replayed_port_is_freed_when_the_replay_ends(tf2):
    ports = []

    def made():
        model, step = seed_example.make()
        ports.append(weakref.ref(model))
        return model, step

    model, step = made()
    tf2.replay(golden("seed_example"), step, model=model).close()
    del model, step
    gc.collect()
    assert ports[0]() is None
    result = tf2.check(golden("seed_example"), make_port=made, judge="local")  # fresh ports, one at a time
    assert result.ok, result.report()
    gc.collect()
    assert len(ports) > 2 and not any(port() for port in ports)

