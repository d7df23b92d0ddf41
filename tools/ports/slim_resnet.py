"""Native Keras port of the tf_slim network in goldens/slim_resnet.h5 (tf_slim does not run
on TF 2.21): resnet_v1 with a root block and two bottleneck blocks, as
tf_slim.nets.resnet_v1 builds it, trained with SGD + momentum.

Layer names follow slim's scopes with "/" flattened to "_", so tracekit matches the
variables by name (resnet_small/block1/unit_1/bottleneck_v1/conv1/weights ->
resnet_small/block1_unit_1_bottleneck_v1_conv1/kernel).
"""

import tensorflow as tf

# slim's resnet_arg_scope: l2_regularizer(1e-4) = 1e-4 * sum(w**2) / 2; batch norm decay
# 0.997, epsilon 1e-5, with scale; conv layers without biases when batch norm follows.
L2 = tf.keras.regularizers.l2(0.5e-4)
BN = dict(momentum=0.997, epsilon=1e-5)


class ConvBN(tf.keras.layers.Layer):
    """slim.conv2d with batch_norm: conv (no bias) -> batch norm -> optional relu.
    stride > 1 pads explicitly then convolves VALID, as resnet_utils.conv2d_same does."""

    def __init__(self, filters, kernel, stride, name, relu=True):
        super().__init__(name=name + "_block")
        pad = kernel - 1
        self.pad = tf.keras.layers.ZeroPadding2D(((pad // 2, pad - pad // 2),) * 2) if stride > 1 and kernel > 1 \
            else None
        self.conv = tf.keras.layers.Conv2D(filters, kernel, stride, padding="valid" if self.pad else "same",
                                           use_bias=False, kernel_regularizer=L2, name=name)
        self.bn = tf.keras.layers.BatchNormalization(name=name + "_BatchNorm", **BN)
        self.relu = relu

    def call(self, x, training=False):
        if self.pad is not None:
            x = self.pad(x)
        x = self.bn(self.conv(x), training=training)
        return tf.nn.relu(x) if self.relu else x


class Bottleneck(tf.keras.layers.Layer):
    """resnet_v1 bottleneck unit: relu(shortcut + conv1x1 -> conv3x3(stride) -> conv1x1)."""

    def __init__(self, scope, depth, depth_in, bottleneck, stride):
        super().__init__(name=scope)
        self.shortcut = None if depth == depth_in else ConvBN(depth, 1, stride, scope + "_shortcut", relu=False)
        self.stride = stride
        self.conv1 = ConvBN(bottleneck, 1, 1, scope + "_conv1")
        self.conv2 = ConvBN(bottleneck, 3, stride, scope + "_conv2")
        self.conv3 = ConvBN(depth, 1, 1, scope + "_conv3", relu=False)

    def call(self, x, training=False):
        if self.shortcut is not None:
            shortcut = self.shortcut(x, training=training)
        else:
            shortcut = x[:, ::self.stride, ::self.stride, :] if self.stride > 1 else x
        residual = self.conv3(self.conv2(self.conv1(x, training=training), training=training), training=training)
        return tf.nn.relu(shortcut + residual)


class ResNetSmall(tf.keras.Model):
    def __init__(self, classes=10):
        super().__init__(name="resnet_small")
        self.conv1 = ConvBN(64, 7, 2, "conv1")
        self.pool = tf.keras.layers.MaxPool2D(3, 2, padding="same")
        self.block1 = Bottleneck("block1_unit_1_bottleneck_v1", 32, 64, 8, 2)
        self.block2 = Bottleneck("block2_unit_1_bottleneck_v1", 64, 32, 16, 1)
        self.logits = tf.keras.layers.Conv2D(classes, 1, kernel_regularizer=L2, name="logits")

    def call(self, x, training=False):
        x = self.pool(self.conv1(x, training=training))
        x = self.block2(self.block1(x, training=training), training=training)
        x = tf.reduce_mean(x, [1, 2], keepdims=True)
        return tf.squeeze(self.logits(x), [1, 2])


def make():
    model = ResNetSmall()
    model(tf.zeros((4, 32, 32, 3)))
    optimizer = tf.keras.optimizers.SGD(0.01, momentum=0.9)
    cross_entropy = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def step(inputs):
        images, labels = inputs["IteratorGetNext:0"], inputs["IteratorGetNext:1"]
        with tf.GradientTape() as tape:
            loss = cross_entropy(labels, model(images, training=True)) + tf.add_n(model.losses)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return {"loss": loss}

    return model, step
