"""A network run on a two-host Ray cluster made on this machine, against the local engine.

Run as root on Linux (``ip netns``): ``python examples/two_hosts.py [--nodes 8]
[--workers 4] [--subnet 10.231.47] [--json FILE]``.

The script makes two test hosts, network namespaces joined by a veth pair on a /24 of their
own (``SUBNET.1`` and ``SUBNET.2``; each namespace holds only its loopback and its end of
the pair, and no route, so no other address can be reached from them), starts a Ray head
on the first and a Ray worker on the second (token authentication on, Ray's usage reports
off), and runs ``vmstack simulate --engine ray --ray-address SUBNET.1:6379`` from the first.
It then checks that a driver without the cluster's token is refused in one line, that the
simulated figures equal those of ``vmstack simulate`` on the local engine, and that both
hosts held actors. Whatever happens, it stops every process it started in the namespaces
(by their process IDs, which ``ip netns pids`` lists), deletes the namespaces (and with
them the veth pair) and removes its temporary folders. Every wait is bounded.

Exit status: 0 when every check holds, 1 when one fails, 77 when this machine cannot make
network namespaces (not root, no ``ip``), with the reason.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from types import FrameType
from typing import Any

REPOSITORY = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
RAY_PORT = 6379
#: Seconds any one command may take (Ray's start on a busy machine is the slowest).
COMMAND_TIMEOUT = 300.0
SKIPPED = 77


class Unavailable(Exception):
    """This machine cannot make the test hosts (the reason is the message)."""


def run(
    command: Sequence[str],
    *,
    env: dict[str, str] | None = None,
    timeout: float = COMMAND_TIMEOUT,
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    """Run ``command`` with a bounded wait; a failure raises with its output."""
    result = subprocess.run(
        list(command), capture_output=True, text=True, env=env, timeout=timeout, check=False
    )
    if check and result.returncode != 0:
        raise RuntimeError(
            f"{' '.join(command)} exited with {result.returncode}:\n{result.stdout}{result.stderr}"
        )
    return result


def check_namespaces_available() -> None:
    if sys.platform != "linux":
        raise Unavailable("network namespaces are a Linux feature")
    if os.geteuid() != 0:
        raise Unavailable("making network namespaces needs root")
    if shutil.which("ip") is None:
        raise Unavailable("the ip command (iproute2) is not installed")
    if not (BIN / "ray").exists():
        raise Unavailable(f"Ray's command is not in {BIN} (pip install 'vmstack[ray]')")


class TwoHosts:
    """Two network namespaces joined by a veth pair on ``subnet``.0/24, and what the
    script started in them; :meth:`remove` takes all of it away again."""

    def __init__(self, subnet: str) -> None:
        tag = f"{os.getpid() % 100000}"
        self.namespaces = (f"vmstack-a-{tag}", f"vmstack-b-{tag}")
        self.links = (f"vmsa{tag}", f"vmsb{tag}")
        self.addresses = (f"{subnet}.1", f"{subnet}.2")
        self.folder = Path(tempfile.mkdtemp(prefix="vms2h-"))
        self.made: list[str] = []

    def make(self) -> None:
        for namespace in self.namespaces:
            result = run(["ip", "netns", "add", namespace], check=False)
            if result.returncode != 0:
                raise Unavailable(f"ip netns add failed: {result.stderr.strip()}")
            self.made.append(namespace)
            run(["ip", "-n", namespace, "link", "set", "lo", "up"])
        run(["ip", "link", "add", self.links[0], "type", "veth", "peer", "name", self.links[1]])
        for namespace, link, address in zip(
            self.namespaces, self.links, self.addresses, strict=True
        ):
            run(["ip", "link", "set", link, "netns", namespace])
            run(["ip", "-n", namespace, "addr", "add", f"{address}/24", "dev", link])
            run(["ip", "-n", namespace, "link", "set", link, "up"])

    def exec(
        self,
        host: int,
        command: Sequence[str],
        env: dict[str, str],
        timeout: float = COMMAND_TIMEOUT,
        check: bool = True,
    ) -> subprocess.CompletedProcess[str]:
        """Run ``command`` on test host ``host`` (0 or 1) with exactly ``env``."""
        return run(
            [
                "ip",
                "netns",
                "exec",
                self.namespaces[host],
                "env",
                "-i",
                *(f"{key}={value}" for key, value in env.items()),
                *command,
            ],
            timeout=timeout,
            check=check,
        )

    def remove(self) -> None:
        """Stop every process in the namespaces (TERM, then KILL after 15 s), delete the
        namespaces (the veth pair goes with them) and the temporary folder."""
        for namespace in self.made:
            for sig, grace in ((signal.SIGTERM, 15.0), (signal.SIGKILL, 5.0)):
                pids = self._pids(namespace)
                for pid in pids:
                    with suppress(ProcessLookupError):
                        os.kill(pid, sig)
                deadline = time.monotonic() + grace
                while pids and time.monotonic() < deadline:
                    time.sleep(0.2)
                    pids = self._pids(namespace)
                if not pids:
                    break
            run(["ip", "netns", "delete", namespace], check=False, timeout=30)
        self.made = []
        shutil.rmtree(self.folder, ignore_errors=True)

    @staticmethod
    def _pids(namespace: str) -> list[int]:
        result = run(["ip", "netns", "pids", namespace], check=False, timeout=30)
        return [int(pid) for pid in result.stdout.split()]


@contextmanager
def signals_end_the_run() -> Iterator[None]:
    """SIGTERM (and SIGHUP) end the run as Ctrl-C does, so the hosts are removed."""

    def stop(signum: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def ray_environment(hosts: TwoHosts, host: int, token: str | None) -> dict[str, str]:
    """What a process on test host ``host`` runs with: this repository on the path, Ray's
    temporary files in the script's folder, usage reports off, the cluster's token."""
    environment = {
        "PATH": f"{BIN}:/usr/sbin:/usr/bin:/sbin:/bin",
        "PYTHONPATH": str(REPOSITORY),
        "HOME": str(hosts.folder),
        "RAY_USAGE_STATS_ENABLED": "0",
        "TMPDIR": str(hosts.folder / f"tmp{host}"),
        "LANG": "C.UTF-8",
        "COLUMNS": "160",
    }
    Path(environment["TMPDIR"]).mkdir(exist_ok=True)
    if token is None:
        environment["RAY_AUTH_MODE"] = "disabled"
    else:
        environment.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=token)
    return environment


def simulate_options(args: argparse.Namespace) -> list[str]:
    return [
        "--nodes",
        str(args.nodes),
        "--blocks",
        str(args.blocks),
        "--txs-per-block",
        str(args.txs_per_block),
        "--live-blocks",
        str(args.live_blocks),
        "--seed",
        str(args.seed),
        "--consensus",
        "coordinator",
    ]


def two_host_run(args: argparse.Namespace, hosts: TwoHosts) -> dict[str, Any]:
    token = secrets.token_hex(32)
    head = hosts.addresses[0]
    cluster = f"{head}:{RAY_PORT}"
    print(
        f"test hosts: {hosts.namespaces[0]} at {hosts.addresses[0]}, "
        f"{hosts.namespaces[1]} at {hosts.addresses[1]} (veth pair, {head[:-2]}.0/24)"
    )
    started = time.monotonic()
    hosts.exec(
        0,
        [
            "ray",
            "start",
            "--head",
            "--node-ip-address",
            head,
            "--port",
            str(RAY_PORT),
            "--num-cpus",
            "1",
            "--include-dashboard",
            "false",
            "--disable-usage-stats",
            "--temp-dir",
            str(hosts.folder / "ray-a"),
        ],
        ray_environment(hosts, 0, token),
    )
    hosts.exec(
        1,
        [
            "ray",
            "start",
            "--address",
            cluster,
            "--node-ip-address",
            hosts.addresses[1],
            "--num-cpus",
            "1",
            "--disable-usage-stats",
            "--temp-dir",
            str(hosts.folder / "ray-b"),
        ],
        ray_environment(hosts, 1, token),
    )
    wait_for_nodes(hosts, cluster, token, 2)
    print(
        f"Ray head on {head}, worker on {hosts.addresses[1]}: up in "
        f"{time.monotonic() - started:.1f} s"
    )

    refused_at = time.monotonic()
    refused = hosts.exec(
        0,
        [
            "vmstack",
            "simulate",
            "--nodes",
            "3",
            "--blocks",
            "4",
            "--engine",
            "ray",
            "--ray-address",
            cluster,
        ],
        ray_environment(hosts, 0, None),
        timeout=120,
        check=False,
    )
    refusal = refused.stderr.strip().splitlines()[-1] if refused.stderr.strip() else ""
    print(
        f"a driver without the token: exit {refused.returncode} after "
        f"{time.monotonic() - refused_at:.1f} s: {refusal}"
    )

    ray_json = hosts.folder / "ray.json"
    result = hosts.exec(
        0,
        [
            "vmstack",
            "simulate",
            *simulate_options(args),
            "--engine",
            "ray",
            "--workers",
            str(args.workers),
            "--ray-address",
            cluster,
            "--json",
            str(ray_json),
        ],
        ray_environment(hosts, 0, token),
        timeout=1800,
    )
    placement = next(
        (line for line in result.stdout.splitlines() if line.startswith("placement:")),
        "(no placement line)",
    )
    print(placement)
    report: dict[str, Any] = json.loads(ray_json.read_text())
    report["refusal"] = {"returncode": refused.returncode, "line": refusal}
    return report


def wait_for_nodes(
    hosts: TwoHosts, cluster: str, token: str, count: int, timeout: float = 120.0
) -> None:
    """Wait (at most ``timeout`` seconds) until the cluster lists ``count`` alive nodes."""
    deadline = time.monotonic() + timeout
    probe = (
        f"import ray; ray.init(address={cluster!r}, "
        f"_node_ip_address={hosts.addresses[0]!r}, log_to_driver=False); "
        "print(sum(1 for n in ray.nodes() if n['Alive']))"
    )
    while True:
        result = hosts.exec(
            0,
            [sys.executable, "-c", probe],
            ray_environment(hosts, 0, token),
            timeout=120,
            check=False,
        )
        alive = result.stdout.strip().splitlines()[-1:] if result.returncode == 0 else []
        if alive == [str(count)]:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"the cluster did not list {count} alive nodes within "
                f"{timeout:g} s:\n{result.stdout}{result.stderr}"
            )
        time.sleep(2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=8)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--blocks", type=int, default=60)
    parser.add_argument("--txs-per-block", type=int, default=2)
    parser.add_argument("--live-blocks", type=int, default=6)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--subnet", default="10.231.47", help="the first three numbers of the test hosts' /24"
    )
    parser.add_argument("--json", type=Path, help="write the two runs' checks here")
    args = parser.parse_args(argv)
    if not re.fullmatch(r"(\d{1,3})\.(\d{1,3})\.(\d{1,3})", args.subnet):
        parser.error(f"--subnet takes three numbers such as 10.231.47, not {args.subnet!r}")
    try:
        check_namespaces_available()
    except Unavailable as reason:
        print(f"skipped: {reason}")
        return SKIPPED
    hosts = TwoHosts(args.subnet)
    try:
        with signals_end_the_run():
            try:
                hosts.make()
            except Unavailable as reason:
                print(f"skipped: {reason}")
                return SKIPPED
            report = two_host_run(args, hosts)
            local_json = hosts.folder / "local.json"
            run(
                [
                    str(BIN / "vmstack"),
                    "simulate",
                    *simulate_options(args),
                    "--json",
                    str(local_json),
                ],
                env={**os.environ, "PYTHONPATH": str(REPOSITORY)},
                timeout=1800,
            )
            local = json.loads(local_json.read_text())
    except KeyboardInterrupt:
        print("interrupted: removing the test hosts")
        return 130
    except (RuntimeError, subprocess.TimeoutExpired) as error:
        print(f"failed: {error}")
        return 1
    finally:
        hosts.remove()
        left = [
            name
            for name in hosts.namespaces
            if name in run(["ip", "netns", "list"], check=False).stdout
        ]
        print("test hosts removed" if not left else f"left behind: {left}")
    return report_checks(report, local, args)


def report_checks(report: dict[str, Any], local: dict[str, Any], args: argparse.Namespace) -> int:
    engine = report["engine"]
    hosts = engine["hosts"]
    by_host = {host["address"]: host for host in report["measured"]["peak_memory_bytes_by_host"]}
    for host in hosts:
        nodes = sorted(
            node
            for actor in engine["actors"]
            if actor["actor"] in host["actors"]
            for node in actor["nodes"]
        )
        peak = by_host.get(host["address"], {}).get("bytes", 0) / 2**20
        print(
            f"host {host['address']} (node {host['node_id'][:8]}): actors {host['actors']}, "
            f"simulated nodes {nodes}, peak {peak:.0f} MB over its actors"
        )
    same = report["simulated"] == local["simulated"]
    both = len(hosts) == 2 and all(host["actors"] for host in hosts)
    refused = (
        report["refusal"]["returncode"] == 2
        and "needs Ray's authentication token" in report["refusal"]["line"]
    )
    totals = report["simulated"]["totals"]
    print(
        f"simulated: {totals['tip_height']} blocks at the tip on {totals['nodes_at_tip']} "
        f"of {args.nodes} nodes, {totals['messages']} messages, {totals['events']} events"
    )
    print(f"same simulated figures as the local engine: {'yes' if same else 'NO'}")
    print(f"both hosts held actors: {'yes' if both else 'NO'}")
    print(f"a driver without the token refused in one line: {'yes' if refused else 'NO'}")
    if args.json is not None:
        args.json.write_text(
            json.dumps(
                {
                    "same_figures": same,
                    "both_hosts": both,
                    "refused_without_token": refused,
                    "engine": engine,
                    "measured": report["measured"],
                },
                indent=2,
            )
            + "\n"
        )
    return 0 if same and both and refused else 1


if __name__ == "__main__":
    sys.exit(main())
