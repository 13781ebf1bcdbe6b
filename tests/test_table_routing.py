"""The ``table`` routing policy: explicit paths from a CSV, fallback for the rest, errors naming the line."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from netsim.cli import app
from netsim.config import ExperimentSpec
from netsim.engine import Environment, Fabric
from netsim.errors import ConfigError
from netsim.experiment import run_experiment
from netsim.routing import ROUTING, Connection, make_routing
from netsim.routing.table import Table
from tests.conftest import GB, make_leaf_spine

runner = CliRunner()
HEADER = "src,dst,channel,path,path_index,fraction\n"


@pytest.fixture
def topo():
    """2 leaves x 2 spines, 2 single-GPU hosts per leaf (GPUs 0, 1 on leaf0; 2, 3 on leaf1), 1 GB/s."""
    return make_leaf_spine()


def table(topo, tmp_path, text, seed=0, **options):
    """A Table policy over ``text`` written to ``routes.csv``."""
    path = tmp_path / "routes.csv"
    path.write_text(text)
    return Table(topo, np.random.default_rng(seed), file=str(path), **options)


def fabric_with(policy):
    """A fresh environment and a Fabric routed by ``policy``."""
    env = Environment()
    return env, Fabric(env, policy.topology, policy)


def switches(topo, path):
    """The names of the fabric switches a link path crosses, in order."""
    hops = [int(topo.links.src[path[0]])] + [int(topo.links.dst[lk]) for lk in path]
    return [topo.node_name(n) for n in hops if topo.graph.nodes[n]["kind"] in ("leaf", "spine")]


def test_the_table_paths_are_used(topo, tmp_path):
    policy = table(topo, tmp_path, HEADER + "0,2,0,leaf0 spine1 leaf1,,\n"
                                            "0,2,1,leaf0>spine0>leaf1,,\n"
                                            "3,1,0,,1,\n"
                                            "1,0,0,,0,\n")
    assert policy.paths(Connection(0, 2, 0)) == [(topo.paths(0, 2)[1], 1.0)]
    assert switches(topo, policy.paths(Connection(0, 2, 0))[0][0]) == ["leaf0", "spine1", "leaf1"]
    assert switches(topo, policy.paths(Connection(0, 2, 1))[0][0]) == ["leaf0", "spine0", "leaf1"]
    assert policy.paths(Connection(3, 1, 0)) == [(topo.paths(3, 1)[1], 1.0)]
    assert policy.paths(Connection(1, 0, 0)) == [(topo.paths(1, 0)[0], 1.0)]  # same leaf: one path


def test_job_and_comm_columns_select_the_connection(topo, tmp_path):
    policy = table(topo, tmp_path, "src,dst,channel,job,comm,path_index\n0,2,0,1,2,1\n0,2,0,,,0\n")
    assert policy.paths(Connection(0, 2, 0, job=1, comm=2)) == [(topo.paths(0, 2)[1], 1.0)]
    assert policy.paths(Connection(0, 2, 0)) == [(topo.paths(0, 2)[0], 1.0)]


def test_parallel_cables_take_the_first_matching_path(tmp_path):
    topo = make_leaf_spine(uplinks_per_spine=2)
    policy = table(topo, tmp_path, "src,dst,channel,path\n0,2,0,leaf0 spine1 leaf1\n")
    first = next(p for p in topo.paths(0, 2) if switches(topo, p) == ["leaf0", "spine1", "leaf1"])
    assert policy.paths(Connection(0, 2)) == [(first, 1.0)]


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_unlisted_connections_are_routed_as_ecmp_with_the_same_seed_routes_them(topo, tmp_path, seed):
    policy = table(topo, tmp_path, "src,dst,channel,path_index\n0,2,0,1\n", seed=seed)
    ecmp = make_routing("ecmp", topo, np.random.default_rng(seed))
    unlisted = [Connection(s, d, c) for s in range(4) for d in range(4) for c in range(4)
                if s != d and (s, d, c) != (0, 2, 0)]
    assert [policy.paths(c) for c in unlisted] == [ecmp.paths(c) for c in unlisted]


def test_the_fallback_may_be_any_registered_policy(topo, tmp_path):
    policy = table(topo, tmp_path, "src,dst,channel,path_index\n0,2,0,1\n", fallback="spray")
    assert policy.paths(Connection(1, 3)) == [(p, 0.5) for p in topo.paths(1, 3)]
    policy = table(topo, tmp_path, "src,dst,channel,path_index\n0,2,0,1\n", fallback={"type": "spray"})
    assert len(policy.paths(Connection(1, 3))) == 2


def test_every_registered_policy_can_be_the_fallback(topo, tmp_path):
    """Unlisted connections get what the fallback alone gives, and the table keeps its sub-flow flag."""
    unlisted = [Connection(s, d, c) for s in range(4) for d in range(4) for c in range(2)
                if s != d and (s, d, c) != (0, 2, 0)]
    for name in ROUTING.names():
        if name == "table":
            continue
        try:
            alone = make_routing(name, topo, np.random.default_rng(3))
        except ConfigError:
            continue  # a policy for another kind of fabric (dragonfly)
        policy = table(topo, tmp_path, "src,dst,channel,path_index\n0,2,0,1\n", seed=3, fallback=name)
        assert policy.independent == getattr(alone, "independent", False), name
        if not hasattr(alone, "plan"):  # batch policies decide in plan(); their paths depend on the batch
            assert [policy.paths(c) for c in unlisted] == [alone.paths(c) for c in unlisted], name


def test_fractions_split_a_connection_over_several_paths(topo, tmp_path):
    policy = table(topo, tmp_path, "src,dst,channel,path,fraction\n"
                                   "0,2,0,leaf0 spine0 leaf1,0.25\n"
                                   "0,2,0,leaf0 spine1 leaf1,0.75\n")
    a, b = topo.paths(0, 2)
    assert policy.paths(Connection(0, 2)) == [(a, 0.25), (b, 0.75)]
    env, fabric = fabric_with(policy)
    done = fabric.send(0, 2, GB, Connection(0, 2))
    env.run(done)
    assert env.now == pytest.approx(1.0)  # one fluid flow at the NIC rate, 3/4 of it over spine1


def test_pinning_two_flows_to_one_uplink_halves_their_rate(topo, tmp_path):
    """Two 1 GB flows leave leaf0 over 1 GB/s uplinks: 1 s when they use both spines, 2 s on one."""
    conns = [Connection(0, 2), Connection(1, 3)]
    for rows, expected in [("0,2,0,leaf0 spine0 leaf1\n1,3,0,leaf0 spine1 leaf1\n", 1.0),
                           ("0,2,0,leaf0 spine0 leaf1\n1,3,0,leaf0 spine0 leaf1\n", 2.0)]:
        env, fabric = fabric_with(table(topo, tmp_path, "src,dst,channel,path\n" + rows))
        env.run(env.all_of([fabric.send(c.src, c.dst, GB, c) for c in conns]))
        assert env.now == pytest.approx(expected)


def test_paths_keep_their_identity_and_dead_table_paths_fall_back(topo, tmp_path):
    policy = table(topo, tmp_path, "src,dst,channel,path\n"
                                   "0,2,0,leaf0 spine0 leaf1\n1,3,0,leaf0 spine1 leaf1\n")
    pinned, other = policy.paths(Connection(0, 2)), policy.paths(Connection(1, 3))
    assert policy.paths(Connection(0, 2)) is pinned
    assert policy.paths(Connection(2, 0)) is policy.paths(Connection(2, 0))  # the fallback's, cached
    calls = []
    fallback = policy.fallback

    class Spy:
        """The fallback, recording what it is told about links."""

        def paths(self, conn):
            return fallback.paths(conn)

        def links_changed(self, state):
            calls.append(state)

    policy.fallback = Spy()
    up = next(lk for lk in pinned[0][0] if topo.link_name(lk) == "leaf0->spine0")
    policy.links_changed({up: 0.0})
    assert calls == [{up: 0.0}]
    moved = policy.paths(Connection(0, 2))
    assert moved is not pinned and moved == fallback.paths(Connection(0, 2))
    assert policy.paths(Connection(1, 3)) is other  # its table path does not cross the failed link
    policy.links_changed({up: 0.5})  # degraded, not down: the table path stands
    assert policy.paths(Connection(0, 2)) is pinned
    policy.links_changed({up: 0.0})
    policy.links_changed({})
    assert policy.paths(Connection(0, 2)) is pinned


def test_a_flow_on_a_failed_table_path_moves_to_the_fallback_after_reconvergence(topo, tmp_path):
    """1 GB pinned over spine0; its uplink fails at 0.5 s and the table learns it 0.1 s later.

    Half the bytes are through at 0.5 s, nothing moves during the 0.1 s of reconvergence, then ECMP
    (which avoids the dead link) carries the other half over spine1 at 1 GB/s: done at 1.1 s.
    """
    policy = table(topo, tmp_path, "src,dst,channel,path\n0,2,0,leaf0 spine0 leaf1\n", reconvergence="100ms")
    env, fabric = fabric_with(policy)
    up = next(lk for lk in policy.paths(Connection(0, 2))[0][0] if topo.link_name(lk) == "leaf0->spine0")

    def fault():
        yield env.timeout(0.5)
        fabric.set_capacity({up: 0.0})
        yield env.timeout(policy.reaction_s)
        fabric.routing_changed({up: 0.0})

    env.process(fault())
    done = fabric.send(0, 2, GB, Connection(0, 2))
    env.run(done)
    assert env.now == pytest.approx(1.1)
    assert switches(topo, policy.paths(Connection(0, 2))[0][0]) == ["leaf0", "spine1", "leaf1"]


def test_reconvergence_option(topo, tmp_path):
    assert table(topo, tmp_path, "src,dst,channel,path_index\n0,2,0,1\n").reaction_s == pytest.approx(0.01)
    assert table(topo, tmp_path, "src,dst,channel,path_index\n0,2,0,1\n",
                 reconvergence="2ms").reaction_s == pytest.approx(0.002)
    with pytest.raises(ConfigError) as err:
        table(topo, tmp_path, "src,dst,channel,path_index\n0,2,0,1\n", reconvergence="soon")
    assert err.value.path == "routing.reconvergence"


BAD = [  # (case, CSV text, CSV line named in the message or None, words the message must contain)
    ("missing columns", "src,dst,path\n0,2,leaf0 spine0 leaf1\n", 1, "missing column channel"),
    ("no path column", "src,dst,channel\n0,2,0\n", 1, "path or path_index"),
    ("unknown column", "src,dst,channel,path,fracton\n0,2,0,leaf0 spine0 leaf1,1\n", 1,
     "unknown column 'fracton'"),
    ("unknown node", HEADER + "1,3,0,leaf0 spine0 leaf1,,\n0,2,0,leaf0 spine9 leaf1,,\n", 3,
     "unknown node 'spine9'"),
    ("not an equal-cost path", HEADER + "0,2,0,leaf0 spine1 leaf0,,\n", 2,
     "no path leaf0>spine1>leaf0 from GPU 0 to GPU 2; candidates: leaf0>spine0>leaf1, leaf0>spine1>leaf1"),
    ("path inside a host", HEADER + "0,2,0,leaf1 spine1 leaf0,,\n", 2, "no path leaf1>spine1>leaf0"),
    ("path_index out of range", HEADER + "0,2,0,,2,\n", 2, "path_index 2 out of range: GPU 0 to GPU 2 has 2"),
    ("GPU out of range", HEADER + "0,4,0,,0,\n", 2, "dst GPU 4 out of range: the fabric has GPUs 0..3"),
    ("negative GPU", HEADER + "-1,2,0,,0,\n", 2, "src must be a non-negative integer"),
    ("fractions below 1", HEADER + "0,2,0,,0,0.5\n0,2,0,,1,0.4\n", 2, "sum to 0.9 (line 2, line 3)"),
    ("fractions above 1", HEADER + "0,2,0,,0,\n1,3,0,,0,\n0,2,0,,1,\n", 2, "sum to 2"),
    ("bad fraction", HEADER + "0,2,0,,0,half\n", 2, "fraction must be a number in (0, 1]"),
    ("duplicate row", HEADER + "0,2,0,,0,0.5\n0,2,0,leaf0 spine0 leaf1,,0.5\n", 3, "duplicate route"),
    ("both path and index", HEADER + "0,2,0,leaf0 spine0 leaf1,0,\n", 2, "exactly one of path and"),
    ("neither path nor index", HEADER + "0,2,0,,,\n", 2, "exactly one of path and path_index"),
    ("comments and blank lines count",
     "# routes\nsrc,dst,channel,path_index\n\n0,2,0,0\n# bad one next\n0,2,1,5\n", 6, "path_index 5 out of"),
    ("header only", "src,dst,channel,path\n", None, "no routes"),
    ("underscore in a number", HEADER + "0,2,0,,0,\n1_0,2,1,,0,\n", 3, "src must be a non-negative integer"),
    ("a plus sign", HEADER + "0,+2,0,,0,\n", 2, "dst must be a non-negative integer (at most 2,147,483,647), got '+2'"),
    ("Arabic-Indic digits", HEADER + "\u0660,2,0,,0,\n", 2, "src must be a non-negative integer"),
    ("a float channel", HEADER + "0,2,1.0,,0,\n", 2, "channel must be a non-negative integer"),
    ("an exponent index", HEADER + "0,2,0,,1e0,\n", 2, "path_index must be a non-negative integer"),
    ("underscore in a fraction", HEADER + "0,2,0,,0,0.2_5\n0,2,0,,1,0.75\n", 2, "fraction must be a number"),
    ("repeated column", "src,dst,channel,path,path\n0,2,0,leaf0 spine0 leaf1,x\n", 1, "column 'path' appears 2 times"),
    ("a header field past the csv module's limit", "src," + "x" * 200_000 + "\n0,2\n", 1, "not a valid CSV header"),
]


@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_bad_tables_are_config_errors_naming_the_csv_line(topo, tmp_path, case):
    _, text, line, words = case
    with pytest.raises(ConfigError) as err:
        table(topo, tmp_path, text)
    csv = tmp_path / "routes.csv"
    assert err.value.path == "routing.file"
    assert err.value.message.startswith(f"{csv}:{line}: " if line else f"{csv}: "), err.value.message
    assert words in err.value.message, err.value.message


def test_missing_file_and_unknown_fallback_are_config_errors(topo, tmp_path):
    with pytest.raises(ConfigError) as err:
        Table(topo, np.random.default_rng(0), file=str(tmp_path / "nope.csv"))
    assert err.value.path == "routing.file"
    assert f"routes file {tmp_path / 'nope.csv'} not found" in err.value.message
    with pytest.raises(ConfigError) as err:
        Table(topo, np.random.default_rng(0))
    assert "give the routes file" in err.value.message
    with pytest.raises(ConfigError) as err:
        table(topo, tmp_path, "src,dst,channel,path_index\n0,2,0,1\n", fallback="ecmpp")
    assert err.value.path == "routing.fallback" and "unknown routing policy 'ecmpp'" in err.value.message
    with pytest.raises(ConfigError) as err:
        table(topo, tmp_path, "src,dst,channel,path_index\n0,2,0,1\n", fallback="table")
    assert err.value.path == "routing.fallback"


LISTED = "src,dst,channel,path_index\n0,2,0,0\n0,2,1,1\n\n# a comment\n1,3,0,0\n3,1,0,1\n"
#: The table's connections and their lines.
LINES = {Connection(0, 2, 0): 2, Connection(0, 2, 1): 3, Connection(1, 3, 0): 6, Connection(3, 1, 0): 7}


def test_a_row_no_connection_of_the_run_used_is_an_error_naming_its_line(topo, tmp_path):
    policy = table(topo, tmp_path, LISTED)
    policy.routes([Connection(0, 2, 0), Connection(0, 2, 5), Connection(2, 0, 0), Connection(1, 3, 0)])
    with pytest.raises(ConfigError) as err:
        policy.check_used()
    message = err.value.message
    assert err.value.path == "routing.file"
    assert message.startswith(f"{tmp_path / 'routes.csv'}:3: no connection of the run is 0>2#1 "), message
    assert "the run's connections from GPU 0 to GPU 2 include 0>2#5" in message, message
    assert "(2 rows match no connection: line 3, line 7)" in message, message
    policy.routes([Connection(0, 2, 1), Connection(3, 1, 0)])
    policy.check_used()


def test_connections_asked_one_by_one_count_as_used(topo, tmp_path):
    """The reference executor asks ``plan`` and ``paths`` one connection at a time."""
    policy = table(topo, tmp_path, LISTED)
    policy.plan(list(LINES)[:2])
    for conn in list(LINES)[:3]:
        policy.paths(conn)
    with pytest.raises(ConfigError, match=r"routes.csv:7: no connection of the run is 3>1#0 .* the run has no "
                                          r"connection from GPU 3 to GPU 1"):
        policy.check_used()
    policy.paths(Connection(3, 1, 0))
    policy.check_used()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(asked=st.lists(st.sampled_from(list(LINES) + [Connection(0, 2, 7), Connection(2, 0, 0),
                                                       Connection(0, 2, 0, tcp=True)]), max_size=8),
       one_by_one=st.booleans(), down=st.booleans())
def test_check_used_fails_exactly_when_a_listed_connection_was_never_asked(topo, tmp_path, asked, one_by_one, down):
    """Whatever the run asks (in batches or one by one, with the table's paths down or not), the check
    passes iff every listed connection was asked, and otherwise names the first unasked one's line."""
    policy = table(topo, tmp_path, LISTED)
    if down:
        policy.links_changed({int(topo.paths(0, 2)[0][1]): 0.0})
    if one_by_one:
        for conn in asked:
            policy.paths(conn)
    elif asked:
        policy.routes(asked)
    missing = sorted(LINES[c] for c in LINES if c not in asked)
    if not missing:
        policy.check_used()
        return
    with pytest.raises(ConfigError) as err:
        policy.check_used()
    assert err.value.message.startswith(f"{tmp_path / 'routes.csv'}:{missing[0]}: no connection of the run is ")


def test_a_run_leaves_no_unmatched_row_unreported(tmp_path):
    """A ring whose table names a channel the run does not have fails; the same table fixed runs.

    ``run_experiment`` calls ``check_used`` once the run has ended; the explicit call here stands for it."""
    csv = tmp_path / "routes.csv"
    csv.write_text("src,dst,channel,comm,path\n0,2,0,1,leaf0 spine1 leaf1\n2,1,3,1,leaf1 spine0 leaf0\n")
    spec = ExperimentSpec.model_validate(ring_spec(csv, size="1MiB"))
    with pytest.raises(ConfigError) as err:
        run_experiment(spec).fabric.routing.check_used()
    assert f"{csv}:3: no connection of the run is c1:2>1#3" in err.value.message
    assert "include c1:2>1#0" in err.value.message
    csv.write_text("src,dst,channel,comm,path\n0,2,0,1,leaf0 spine1 leaf1\n2,1,0,1,leaf1 spine0 leaf0\n")
    run_experiment(spec).fabric.routing.check_used()


# ---------------------------------------------------------------------------- whole experiments


def ring_spec(csv: Path, size="64MiB") -> dict:
    """A ring allreduce over GPUs [0, 2, 1, 3] (alternating leaves) on 2 leaves x 2 spines, no latency.

    The ring is a sub-communicator (``comm`` 1) selected in a sequence, so its four connections are
    0>2, 2>1, 1>3 and 3>0: two leave each leaf, from different NICs. One channel, one message a step:
    the pure fluid model, whose closed forms the tests below check.
    """
    topology = {"type": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 2, "gpus_per_host": 1,
                "nics_per_host": 1, "nic": {"bandwidth": "8Gbps"}, "uplink": {"bandwidth": "8Gbps"},
                "intra_host": {"bandwidth": "100GB/s"}}
    ring = {"op": "allreduce", "algorithm": "ring", "size": size, "ranks": [0, 2, 1, 3]}
    return {"name": "table-ring", "seed": 0, "model": "fluid", "topology": topology,
            "routing": {"type": "table", "file": str(csv)}, "workload": {"type": "sequence", "steps": [ring]}}


@pytest.mark.parametrize("spines, slowdown", [((0, 0, 0, 0), 2.0), ((0, 0, 1, 1), 1.0)],
                         ids=["pinned-to-spine0", "spread"])
def test_ring_pinned_to_one_spine_takes_twice_as_long(tmp_path, spines, slowdown):
    conns = [(0, 2), (2, 1), (1, 3), (3, 0)]
    csv = tmp_path / "routes.csv"
    csv.write_text("src,dst,channel,comm,path\n" + "".join(
        f"{s},{d},0,1,{'leaf0' if s < 2 else 'leaf1'} spine{k} {'leaf0' if d < 2 else 'leaf1'}\n"
        for (s, d), k in zip(conns, spines)))
    result = run_experiment(ExperimentSpec.model_validate(ring_spec(csv)))
    call = result.collectives[0]
    n, size, bandwidth = 4, 64 * 2**20, 1e9  # 8 Gbps NICs and uplinks: 1 GB/s
    # 2(n-1) steps of size/n per rank. Each step, two flows leave each leaf: both on one uplink when
    # pinned (1/2 GB/s each), one per uplink when spread (the NIC rate, 1 GB/s).
    expected = 2 * (n - 1) * (size / n) / (bandwidth / slowdown)
    assert call.duration_s == pytest.approx(expected, rel=1e-9)
    assert call.duration_s / call.ideal_s == pytest.approx(slowdown, rel=1e-9)


def test_cli_run_with_a_relative_routes_file(tmp_path, monkeypatch):
    exp = tmp_path / "exp"
    exp.mkdir()
    (exp / "routes.csv").write_text("src,dst,channel,comm,path\n0,2,0,1,leaf0 spine1 leaf1\n")
    spec = ring_spec(Path("routes.csv"), size="4MiB")  # relative: found next to the YAML, not in the cwd
    (exp / "exp.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    result = runner.invoke(app, ["run", "exp/exp.yaml", "--out", str(out), "--no-report"])
    assert result.exit_code == 0, result.output
    runs = pd.read_parquet(out / "runs.parquet")
    assert runs.loc[0, "routing.type"] == "table"


def test_cli_bad_routes_file_exits_2_with_the_line_and_no_traceback(tmp_path):
    (tmp_path / "routes.csv").write_text("src,dst,channel,comm,path\n0,2,0,1,leaf0 spine1 leaf1\n"
                                         "1,3,0,1,leaf0 spine7 leaf1\n")
    spec = ring_spec(Path("routes.csv"), size="4MiB")
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    out = tmp_path / "out"
    command = [sys.executable, "-m", "netsim.cli", "run", str(tmp_path / "exp.yaml"), "--out", str(out)]
    proc = subprocess.run(command, capture_output=True, text=True)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    message = " ".join(proc.stderr.split())
    assert f"routing.file: {tmp_path / 'routes.csv'}:3: unknown node 'spine7'" in message, message
    assert not out.exists()
