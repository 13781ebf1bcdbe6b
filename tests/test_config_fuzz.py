"""Hypothesis-mutated ring-allreduce files (dropped keys, wrong types, odd units) never give a traceback."""

import copy

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from netsim.cli import app
from tests.test_cli import small_spec

runner = CliRunner()
BASE = small_spec()


def _paths(node, prefix=()):
    if isinstance(node, dict):
        for k, v in node.items():
            yield prefix + (k,)
            yield from _paths(v, prefix + (k,))


PATHS = sorted(_paths(BASE))
ODD_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 3), st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([1e10, 2.0, 10**9, 10**12]),  # huge or integral-float counts: must fail fast, not build
    st.sampled_from(["", "256", "256 MiB", "1e3Gbps", "25gbps", "1.6Tbps", "2us", "-1MiB", "0", "nan", "inf",
                     "1e400GB", "10 furlongs", "μs", "ecmp", "random", "ring", "allreduce", "MiB", "0x10"]),
    st.text(max_size=8), st.lists(st.integers(0, 2), max_size=2), st.dictionaries(st.text(max_size=3),
                                                                                   st.integers(), max_size=2),
)


@st.composite
def mutated(draw):
    spec = copy.deepcopy(BASE)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(PATHS))
        node = spec
        for key in path[:-1]:
            if not isinstance(node, dict) or key not in node:
                break
            node = node[key]
        else:
            if isinstance(node, dict):
                if draw(st.booleans()):
                    node.pop(path[-1], None)
                else:
                    node[path[-1]] = draw(ODD_VALUES)
    return spec


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mutated())
def test_mutated_ring_allreduce_never_tracebacks(tmp_path, spec):
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(spec))
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code in (0, 2), result.output
    if result.exit_code == 2:
        assert str(path) in " ".join(result.output.split())
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
