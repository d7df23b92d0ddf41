"""One worker of a MultiWorkerMirroredStrategy replay (tests/replay/test_distribute.py):

    python tests/replay/multiworker_child.py INDEX PORT0,PORT1 NAME GOLDEN OUT STEPS INPUT_API

Each worker replays the golden on its share of every global batch; both write an actual
trace (OUT with the worker index appended)."""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

if __name__ == "__main__":
    index, ports, name, golden, out, steps, input_api = sys.argv[1:8]
    os.environ["TF_CONFIG"] = json.dumps({
        "cluster": {"worker": ["localhost:%s" % port for port in ports.split(",")]},
        "task": {"type": "worker", "index": int(index)}})
    import tensorflow as tf

    import tracekit.tf2
    from tools.ports import estimator_model, seed_example

    ports_by_name = {"seed_example": seed_example.make_distributed, "estimator_model": estimator_model.make_distributed}
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    model, step = ports_by_name[name](strategy)
    tracekit.tf2.replay(golden, step, model=model, strategy=strategy, input_api=input_api,
                        out="%s.%s" % (out, index), steps=int(steps)).close()
