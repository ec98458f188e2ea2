"""The proposer windows in a network run: every node validates with a weight drawn from the
seed, the windows pick who builds each block and when, blocks follow the stake, a node
that is down loses its slots to the next slot's proposer, and every node's proposer layer
really enforces the windows."""

from __future__ import annotations

import json
import math
import pickle
from pathlib import Path

import pytest

from vmstack.cli import main
from vmstack.errors import ProposerWindowNotStarted
from vmstack.sim.network import LocalEngine, NetworkRun, NetworkSimulationConfig, simulate_network
from vmstack.sim.network.node import NodeServer, NodeSpec
from vmstack.sim.network.stake import (
    LIVE_PCHAIN_HEIGHT,
    MAX_STAKE,
    MIN_STAKE,
    StakeSchedule,
    draw_weights,
    node_staking_seed,
)
from vmstack.wrappers.proposer.windower import time_to_slot

#: The significance of the stake test over all nodes together (Bonferroni-corrected).
ALPHA = 0.01


def binomial_p_value(successes: int, trials: int, probability: float) -> float:
    """The exact two-sided binomial test's p-value: the probability, under
    Binomial(``trials``, ``probability``), of an outcome no likelier than ``successes``."""

    def pmf(k: int) -> float:
        return math.comb(trials, k) * probability**k * (1 - probability) ** (trials - k)

    observed = pmf(successes)
    return min(1.0, sum(p for p in map(pmf, range(trials + 1)) if p <= observed * (1 + 1e-7)))


def nodes_off_their_share(built: list[int], shares: list[float]) -> list[int]:
    """The nodes whose block count the exact binomial test rejects at ``ALPHA`` divided
    by the number of nodes (Bonferroni): under the hypothesis, the chance that any node
    is listed is at most ``ALPHA``."""
    total = sum(built)
    return [
        node
        for node, (count, share) in enumerate(zip(built, shares, strict=True))
        if binomial_p_value(count, total, share) < ALPHA / len(built)
    ]


def test_weights_are_drawn_from_the_seed_between_the_stake_bounds() -> None:
    assert draw_weights("equal", 5, 1) == [MIN_STAKE] * 5
    skewed = draw_weights("skewed", 400, 7)
    assert skewed == draw_weights("skewed", 400, 7) != draw_weights("skewed", 400, 8)
    assert all(MIN_STAKE <= weight <= MAX_STAKE for weight in skewed)
    # A Pareto tail: the heaviest fifth holds most of the stake.
    heaviest = sorted(skewed, reverse=True)[:80]
    assert sum(heaviest) > 0.5 * sum(skewed)
    with pytest.raises(ValueError, match="stake is one of"):
        draw_weights("flat", 3, 1)
    with pytest.raises(ValueError, match="stake is one of"):
        NetworkSimulationConfig(stake="flat")
    with pytest.raises(ValueError, match="minimum block delay"):
        NetworkSimulationConfig(block_interval=0.5)


def test_the_stake_schedule_names_node_0_alone_before_the_run_and_everyone_after() -> None:
    stake = StakeSchedule.draw(nodes=3, kind="skewed", seed=5, durango_time=0.0)
    assert stake.validators(0) == {stake.node_ids[0]: stake.weights[0]}
    assert stake.validators(LIVE_PCHAIN_HEIGHT) == dict(
        zip(stake.node_ids, stake.weights, strict=True)
    )
    assert stake.with_weights([1, 0, 2]).validators(LIVE_PCHAIN_HEIGHT) == {
        stake.node_ids[0]: 1,
        stake.node_ids[2]: 2,
    }
    assert stake.windower(1) is stake.windower(1)
    with pytest.raises(ValueError, match="node 0's is at least 1"):
        stake.with_weights([0, 1, 1])
    with pytest.raises(ValueError, match="one NodeID"):
        StakeSchedule.of([b"a" * 20, b"a" * 20], [1, 1], durango_time=0.0)


def test_a_drawn_schedule_travels_as_its_recipe_and_others_whole() -> None:
    drawn = StakeSchedule.draw(nodes=40, kind="skewed", seed=9, durango_time=3.0)
    data = pickle.dumps(drawn)
    assert len(data) < 200  # not 40 NodeIDs
    again = pickle.loads(data)
    assert (again.node_ids, again.weights, again.key) == (drawn.node_ids, drawn.weights, drawn.key)
    assert pickle.loads(data) is again  # drawn once per process
    reweighted = drawn.with_weights(range(1, 41))
    whole = pickle.loads(pickle.dumps(reweighted))
    assert whole.weights == tuple(range(1, 41)) and whole.key == reweighted.key


def test_a_node_builds_only_in_its_slot_and_the_others_refuse_a_block_out_of_turn(
    tmp_path: Path,
) -> None:
    """Nodes built as a network run builds them: the slot's expected proposer builds, a
    node out of turn is refused with the time of its slot, and its block (built by a
    stack without windows) fails verify at a windowed node."""
    config = NetworkSimulationConfig(nodes=4, blocks=6, txs_per_block=0)
    stake = StakeSchedule.draw(
        nodes=4, kind="equal", seed=config.seed, durango_time=config.start_time
    )

    def node(index: int, *, windowed: bool = True) -> NodeServer:
        return NodeServer(
            NodeSpec(
                index=index,
                chain_id=config.chain_id,
                start_time=config.start_time,
                fork_time=config.fork_time,
                transition_time=config.transition_time,
                staking_seed=node_staking_seed(config.seed, index),
                stake=stake if windowed else None,
            ),
            tmp_path / f"{index}-{windowed}",
        )

    nodes = [node(index) for index in range(4)]
    try:
        tip = nodes[0].generate(config.blocks, 0, config.seed, config.block_interval)
        assert tip.post_fork and tip.pchain_height == LIVE_PCHAIN_HEIGHT
        chain = nodes[0].export()
        for other in nodes[1:]:
            assert other.import_blocks(chain) == tip
        at = tip.timestamp + config.block_interval
        slot = time_to_slot(tip.timestamp, at)
        expected = stake.node_of(
            stake.windower(config.chain_id).expected_proposer(
                tip.height + 1, tip.pchain_height, slot
            )
        )
        waiting = next(index for index in range(4) if index != expected)
        with pytest.raises(ProposerWindowNotStarted, match="not this node's turn") as refused:
            nodes[waiting].build(at, config.seed, 0, 0)
        assert refused.value.build_time > at
        # The same node without windows builds; its block fails verify at a windowed node.
        rogue = node(waiting, windowed=False)
        try:
            rogue.import_blocks(chain)
            out_of_turn = rogue.build(at, config.seed, 0, 0)
        finally:
            rogue.close()
        delivered = nodes[expected].deliver(out_of_turn.block, at + 0.1)
        assert not delivered.accepted and delivered.refused is not None
        assert f"slot {slot} of height {tip.height + 1} expects" in delivered.refused
        built = nodes[expected].build(at, config.seed, 0, 0)
        assert built.tip.height == tip.height + 1
        assert nodes[waiting].deliver(built.block, at + 0.1).accepted
    finally:
        for server in nodes:
            server.close()


@pytest.mark.slow
def test_32_nodes_with_skewed_stake_build_blocks_in_proportion_to_their_stake() -> None:
    """Each block's builder is its slot's expected proposer, a stake-weighted draw from a
    twister seeded by the height and slot (the next slot's draw when a slot is missed), so
    a node's block count is Binomial(blocks, its stake share). The stated test: the exact
    two-sided binomial test for every node, Bonferroni-corrected over the 32 nodes at
    ALPHA = 1% (under the hypothesis, the run fails with probability at most 1%; the seed
    is fixed, so the outcome is too). The same counts reject equal shares: the test can
    tell stake apart."""
    config = NetworkSimulationConfig(
        nodes=32,
        blocks=6,
        txs_per_block=0,
        live_blocks=96,
        late_fraction=0.0,
        stake="skewed",
        seed=11,
    )
    report = simulate_network(config, LocalEngine())
    totals = report.totals
    assert totals["blocks_built"] == config.live_blocks
    assert totals["crashed"] == 0 and totals["nodes_at_tip"] == config.nodes
    nodes = report.as_dict()["simulated"]["nodes"]  # type: ignore[index]
    built = [node["blocks_built"] for node in nodes]
    weights = [node["weight"] for node in nodes]
    shares = [weight / sum(weights) for weight in weights]
    assert sum(built) == config.live_blocks
    assert max(weights) > 4 * min(weights)  # the stake is skewed
    assert nodes_off_their_share(built, shares) == []
    assert nodes_off_their_share(built, [1 / config.nodes] * config.nodes) != []
    # The slots: most blocks come in their first slot; every missed slot is accounted for.
    slots = report.slots
    assert sum(slots.built_in_slot.values()) == config.live_blocks
    assert slots.built_in_slot[0] > config.live_blocks // 2
    assert (
        len(slots.missed) == totals["missed_slots"] == sum(node["slots_missed"] for node in nodes)
    )


@pytest.mark.slow
def test_killing_the_top_stake_node_mid_run_misses_its_slots_and_the_chain_goes_on() -> None:
    config = NetworkSimulationConfig(
        nodes=8,
        blocks=6,
        txs_per_block=0,
        live_blocks=24,
        late_fraction=0.0,
        stake="skewed",
        seed=4,
    )
    weights = draw_weights(config.stake, config.nodes, config.seed)
    top = weights.index(max(weights))
    killed_at: list[float] = []

    def kill_the_top_node_after_8_blocks(run: NetworkRun) -> None:
        if run.built >= 8 and not killed_at:
            run.engine.crash(top)
            killed_at.append(run.clock() - run.started)

    report = simulate_network(config, LocalEngine(), observe=kill_the_top_node_after_8_blocks)
    totals, slots = report.totals, report.slots
    assert report.nodes[top].crashed and totals["crashed"] == 1
    # The chain went on to every block, without the top node after its death.
    assert totals["blocks_built"] == config.live_blocks
    assert totals["nodes_at_tip"] == config.nodes - 1
    assert totals["tip_height"] == config.blocks + config.live_blocks
    down = [missed for missed in slots.missed if missed.reason == "down"]
    assert down and all(missed.node == top and missed.at >= killed_at[0] for missed in down)
    assert totals["missed_down"] == len(down)
    # Each height whose slots it missed went to a later slot's proposer (with most of the
    # stake, it is often the proposer of several slots in a row): a block built in a slot
    # past the first for each such height, and a tip that rose after each missed slot.
    late = sum(count for slot, count in slots.built_in_slot.items() if slot > 0)
    assert late >= len({missed.height for missed in down})
    for missed in down:
        assert any(at > missed.at and height == missed.height for at, height in slots.tip)
    assert report.nodes[top].blocks_built <= 8


def test_the_cli_takes_the_stake_and_prints_the_proposers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "network.json"
    assert (
        main(
            [
                "simulate",
                "--nodes",
                "3",
                "--blocks",
                "6",
                "--txs-per-block",
                "0",
                "--live-blocks",
                "3",
                "--stake",
                "skewed",
                "--json",
                str(out),
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "stake skewed" in printed and "proposers (simulated" in printed
    assert "slot delays (simulated)" in printed and "missed slots:" in printed
    figures = json.loads(out.read_text())["simulated"]
    assert sum(node["blocks_built"] for node in figures["nodes"]) == 3
    assert all(node["weight"] >= MIN_STAKE for node in figures["nodes"])
    assert sum(int(count) for count in figures["slots"]["built_in_slot"].values()) == 3
    assert main(["simulate", "--blocks", "4", "--stake", "skewed"]) == 2
    assert "--stake applies to a network" in capsys.readouterr().err
