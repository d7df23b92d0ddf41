"""A legacy tf_slim training script, recorded without changing a line of it:

    .venv-legacy/bin/python -m tracekit record -o goldens/slim_resnet.h5 -- tools/goldens/slim_resnet.py

A small tf_slim.nets.resnet_v1 (two bottleneck blocks, 32x32 inputs, 10 classes)
trained by tf_slim.learning.train (a Supervisor loop) with momentum SGD on a
tf.data pipeline of fixed synthetic images. Nothing here knows about tracekit.
"""

from __future__ import print_function

import argparse
import os
import shutil
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf_slim as slim  # noqa: E402
from tf_slim.nets import resnet_v1  # noqa: E402

BATCH, SIZE, CLASSES = 4, 32, 10


def blocks():
    return [resnet_v1.resnet_v1_block("block1", base_depth=8, num_units=1, stride=2),
            resnet_v1.resnet_v1_block("block2", base_depth=16, num_units=1, stride=1)]


def images_and_labels():
    rng = np.random.RandomState(11)
    x = rng.rand(32, SIZE, SIZE, 3).astype(np.float32)
    y = rng.randint(0, CLASSES, size=32).astype(np.int32)
    data = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(BATCH, drop_remainder=True)
    return tf.compat.v1.data.make_one_shot_iterator(data).get_next()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    logdir = tempfile.mkdtemp(prefix="slim-train-")
    try:
        with tf.Graph().as_default():
            tf.compat.v1.set_random_seed(5)
            images, labels = images_and_labels()
            with slim.arg_scope(resnet_v1.resnet_arg_scope()):
                logits, _ = resnet_v1.resnet_v1(images, blocks(), num_classes=CLASSES, is_training=True,
                                                global_pool=True, include_root_block=True, scope="resnet_small")
            logits = tf.reshape(logits, [BATCH, CLASSES])
            tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
            total_loss = tf.compat.v1.losses.get_total_loss()
            optimizer = tf.compat.v1.train.MomentumOptimizer(learning_rate=0.01, momentum=0.9)
            train_op = slim.learning.create_train_op(total_loss, optimizer)
            final = slim.learning.train(train_op, logdir, number_of_steps=args.steps, save_summaries_secs=0,
                                        save_interval_secs=0, log_every_n_steps=1)
            print("final loss %.6f" % final)
    finally:
        shutil.rmtree(logdir, ignore_errors=True)


if __name__ == "__main__":
    main()
