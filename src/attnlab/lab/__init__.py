"""The lab: tasks on real data, the trainer and the command line, built on the library above.

The library (``attnlab.masks``, ``functional``, ``positional``, ``backends``, ``kernels``,
``efficient``, ``attention``, ``blocks``, ``graph``, ``convert``) is what a user imports into
their own model; the lab is what ``attnlab train / eval / predict / show / report`` run:

* :mod:`.models`: input encoders, sequence encoders, heads, encoder-decoders;
* :mod:`.tasks`: the tasks (one per dataset and output shape) and their registry;
* :mod:`.train`: the trainer, its config, checkpoints, resume, DDP;
* :mod:`.data`: the dataset registry, mirror / cache / download, readers;
* :mod:`.audio`, :mod:`.images`, :mod:`.chem`, :mod:`.speechgen`: each modality's I/O;
* :mod:`.commands`, :mod:`.cli`, :mod:`.demo`, :mod:`.bench`, :mod:`.viz`: the entry points.

Nothing outside this package imports it (``tests/test_layers.py`` checks), so the library
never depends on the lab.
"""
