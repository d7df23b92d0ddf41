"""slim_resnet: the shipped example golden's port (tools/ports/slim_resnet.py), a Keras resnet_v1
with slim's scopes as layer names, batch norm, slim's L2 weight decay and momentum SGD."""


def port(tf):
    from tools.ports import slim_resnet

    model, step = slim_resnet.make()
    return model, step, {}
