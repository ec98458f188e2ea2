"""The simulations behind ``vmstack simulate``, on simulated time with real stacks.

One node bootstrapping from peers: :mod:`vmstack.sim.run` (the two-node run),
:mod:`vmstack.sim.bootstrap` (the bootstrapper) over :mod:`vmstack.sim.events`, reported by
:mod:`vmstack.sim.report`, the bounds of its options in :mod:`vmstack.sim.bounds`. A
network of nodes: :mod:`vmstack.sim.multinode` (``simulate_network``, ``NetworkRun``) over
:mod:`vmstack.sim.network_events` and :mod:`vmstack.sim.network_bootstrap`, its records in
:mod:`vmstack.sim.network_records`, its validators' keys and stake in
:mod:`vmstack.sim.network_stake`, its nodes (:mod:`vmstack.sim.node_server`) hosted by an
engine (:mod:`vmstack.sim.engines`, :mod:`vmstack.sim.ray_engine`), run from the command
line by :mod:`vmstack.sim.network_cli` and reported by :mod:`vmstack.sim.network_report`.
Both share the message model of :mod:`vmstack.sim.network` and the cost model of
:mod:`vmstack.sim.costs`.
"""
