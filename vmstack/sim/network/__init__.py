"""The network run behind ``vmstack simulate --nodes``: validators building in the proposer
windows while others bootstrap from them, every node a full stack of its own.

The run (:mod:`vmstack.sim.network.run`: ``simulate_network``, ``NetworkRun``) stands on
its records (:mod:`~vmstack.sim.network.records`), the validators' keys and stake
(:mod:`~vmstack.sim.network.stake`), the links between every pair of nodes
(:mod:`~vmstack.sim.network.mesh`), the event loop and every node's book
(:mod:`~vmstack.sim.network.events`) and joining and catching up
(:mod:`~vmstack.sim.network.bootstrap`). A node (:mod:`~vmstack.sim.network.node`) lives in
this process or in a Ray actor (:mod:`~vmstack.sim.network.engines`,
:mod:`~vmstack.sim.network.ray_engine`). :mod:`vmstack.cli.network` runs it from the
command line and :mod:`~vmstack.sim.network.report` reports it.

The names a caller of the run needs are exported here.
"""

from vmstack.sim.links import NetworkConfig
from vmstack.sim.network.engines import ENGINES, Engine, LocalEngine, make_engine
from vmstack.sim.network.mesh import Mesh
from vmstack.sim.network.ray_cluster import RayHost
from vmstack.sim.network.ray_engine import RayEngine
from vmstack.sim.network.records import NetworkReport, NetworkSimulationConfig, NodeResult
from vmstack.sim.network.run import NetworkRun, simulate_network

__all__ = [
    "ENGINES",
    "Engine",
    "LocalEngine",
    "Mesh",
    "NetworkConfig",
    "NetworkReport",
    "NetworkRun",
    "NetworkSimulationConfig",
    "NodeResult",
    "RayEngine",
    "RayHost",
    "make_engine",
    "simulate_network",
]
