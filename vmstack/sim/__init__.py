"""The simulations behind ``vmstack simulate``, on simulated time with real stacks.

One node bootstrapping from peers: :mod:`vmstack.sim.run` (the two-node run),
:mod:`vmstack.sim.bootstrap` (the bootstrapper) over :mod:`vmstack.sim.events`, reported by
:mod:`vmstack.sim.report`, the bounds of its options in :mod:`vmstack.sim.bounds`. A
network of nodes: the package :mod:`vmstack.sim.network` (``simulate_network``, its
records, stake, event loop, nodes and the engines that host them, its command line and
report). Both share the message model of :mod:`vmstack.sim.links`, the cost model of
:mod:`vmstack.sim.costs` and the count of a stored chain's transactions of
:mod:`vmstack.sim.chain`.
"""
