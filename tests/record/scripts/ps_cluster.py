"""TF1 parameter-server training in one process: a cluster of 1 ps and 2 workers
(tf.distribute.Server), each worker a thread with its own graph (replica_device_setter), a
MonitoredTrainingSession and SyncReplicasOptimizer aggregating both workers' gradients.
Worker k feeds batches of RandomState(k). argv: --steps N (global steps). Knows nothing about
tracekit."""
import argparse
import socket
import threading

import numpy as np
import tensorflow as tf

v1 = tf.compat.v1
if hasattr(v1, "disable_eager_execution"):
    v1.disable_eager_execution()
parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=4)
args = parser.parse_args()


def free_port():
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


cluster = tf.train.ClusterSpec({"ps": ["localhost:%d" % free_port()],
                                "worker": ["localhost:%d" % free_port() for _ in range(2)]})
servers = {(job, task): tf.distribute.Server(cluster, job_name=job, task_index=task, start=True)
           for job, task in (("ps", 0), ("worker", 0), ("worker", 1))}


def worker(task):
    with tf.Graph().as_default():
        with v1.device(v1.train.replica_device_setter(cluster=cluster, worker_device="/job:worker/task:%d" % task)):
            x = v1.placeholder(tf.float32, [4, 3], name="x")
            w = v1.get_variable("w", [3, 1], initializer=v1.zeros_initializer())
            loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - 1.0))
            global_step = v1.train.get_or_create_global_step()
            optimizer = v1.train.SyncReplicasOptimizer(v1.train.GradientDescentOptimizer(0.1), replicas_to_aggregate=2,
                                                       total_num_replicas=2)
            train = optimizer.minimize(loss, global_step=global_step)
        hooks = [optimizer.make_session_run_hook(task == 0), v1.train.StopAtStepHook(last_step=args.steps)]
        rng = np.random.RandomState(task)
        # the chief's queue runner waits in take_grad for pushes that will not come once the workers
        # stop: a short grace period, then closing the session cancels it
        with v1.train.MonitoredTrainingSession(master=servers["worker", task].target, is_chief=task == 0,
                                               hooks=hooks, stop_grace_period_secs=1) as sess:
            while not sess.should_stop():
                sess.run(train, {x: rng.randn(4, 3).astype(np.float32)})


threads = [threading.Thread(target=worker, args=(task,)) for task in (0, 1)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print("trained", flush=True)
