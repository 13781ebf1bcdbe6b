"""The dashboard's opening answer (netsim/report/answer.py): which variants are compared, the time and
bound each gets, the sentence, and the rule that no chart draws a single value."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from netsim.report.answer import answer_sentences, comparisons, sentence
from netsim.report.dashboard import _single_value, build_figures
from tests.conftest import cli_on_file

FABRIC = {"type": "leaf_spine", "leaves": 4, "spines": 2, "hosts_per_leaf": 2, "gpus_per_host": 1,
          "nics_per_host": 1, "nic": {"bandwidth": "100Gbps", "latency": "1us"},
          "uplink": {"bandwidth": "100Gbps", "latency": "1us"}, "intra_host": {"bandwidth": "900GB/s"}}


def _spec(**extra) -> dict:
    return {"name": "answer", "seed": 3, "topology": FABRIC, "placement": {"type": "random", "by": "host"},
            "routing": "ecmp", "workload": {"type": "collective", "op": "allreduce", "algorithm": "ring",
                                            "size": "4MiB"}, **extra}


def _colls(rows):
    cols = ["run_id", "step", "label", "op", "algorithm", "size_bytes", "start_s", "end_s", "duration_s", "bound_s"]
    return pd.DataFrame([dict(zip(cols, r)) for r in rows])


def _runs(rows):
    return pd.DataFrame(rows, columns=["run_id", "variant", "seed", "status", "topology.type", "workload.type",
                                       "routing.type", "placement.type", "n_ranks"])


def test_serial_calls_sum_their_bounds_and_concurrent_calls_take_the_largest():
    runs = _runs([("a", "one", 1, "ok", "ls", "sequence", "ecmp", "random", 8),
                  ("b", "two", 1, "ok", "ls", "sequence", "spray", "random", 8)])
    serial = [("a", 0, "x", "allreduce", "ring", 1, 0.0, 1.0, 1.0, 0.5), ("a", 1, "y", "alltoall", "pairwise", 1, 1.0, 3.0, 2.0, 1.5),
              ("b", 0, "x", "allreduce", "ring", 1, 0.0, 0.6, 0.6, 0.5), ("b", 1, "y", "alltoall", "pairwise", 1, 0.6, 2.2, 1.6, 1.5)]
    (comp,) = comparisons(runs, _colls(serial))
    assert comp.serial and comp.time_s == {"one": 3.0, "two": 2.2} and comp.bound_s == {"one": 2.0, "two": 2.0}
    assert comp.differs == ["routing"] and comp.ranked() == ["two", "one"]
    overlapping = [("a", 0, "x", "allreduce", "ring", 1, 0.0, 1.0, 1.0, 0.5), ("a", 1, "y", "allreduce", "ring", 1, 0.0, 2.0, 2.0, 1.5),
                   ("b", 0, "x", "allreduce", "ring", 1, 0.0, 0.6, 0.6, 0.5), ("b", 1, "y", "allreduce", "ring", 1, 0.0, 1.8, 1.8, 1.5)]
    (comp,) = comparisons(runs, _colls(overlapping))
    assert not comp.serial and comp.bound_s == {"one": 1.5, "two": 1.5} and comp.time_s == {"one": 2.0, "two": 1.8}
    text = sentence(comp, pd.DataFrame(columns=["run_id", "kind", "bytes", "capacity_Bps", "peak_offered", "tier"]))
    assert text.startswith("two was fastest") and "1.1× faster than one (2 s)" in text and "1.2× the lower bound" in text


def test_variants_of_different_work_are_not_compared_and_failed_runs_are_left_out():
    runs = _runs([("a", "one", 1, "ok", "ls", "collective", "ecmp", "random", 8),
                  ("b", "two", 1, "ok", "df", "collective", "ecmp", "random", 8),  # another fabric
                  ("c", "three", 1, "failed", "ls", "collective", "spray", "random", 8)])
    rows = [(r, 0, "x", "allreduce", "ring", 1, 0.0, 1.0, 1.0, 0.5) for r in "abc"]
    assert comparisons(runs, _colls(rows)) == []


def test_a_run_with_comparable_variants_opens_with_the_answer_and_prints_it(tmp_path):
    data = _spec(variants=[{"name": "hashed", "routing": "ecmp"}, {"name": "sprayed", "routing": "spray"}],
                 engine={"link_series": 0})
    result, _, out = cli_on_file(tmp_path, data, "run")
    assert result.exit_code == 0, result.output
    texts = answer_sentences(out)
    assert len(texts) == 1 and ("sprayed" in texts[0] and "hashed" in texts[0])
    assert " ".join(texts[0].split()) in " ".join(result.output.split())
    figs = build_figures(out)
    assert figs[0].layout.meta["sentence"] == texts[0]
    assert figs[0].layout.title.text.startswith("Time per routing against the lower bound")
    assert "per variant" in figs[1].layout.title.text  # the why: per-uplink load side by side
    assert "report.html" in result.output


def test_training_variants_print_no_sentence_against_a_calls_bound(tmp_path):
    """A training job's calls overlap its compute: 'first call to last call' against the calls' bound would
    read as a fabric many times slower than it is. The CLI, like the dashboard, opens without a sentence."""
    training = {"type": "training", "model": {"name": "tiny", "layers": 2, "hidden": 256, "heads": 4, "seq_len": 128,
                                              "vocab": 1000, "micro_batch": 1, "global_batch": 4},
                "parallelism": {"tp": 1, "pp": 1, "dp": 4}, "gpu": "h100"}
    data = {**_spec(variants=[{"name": "hashed", "routing": "ecmp"}, {"name": "sprayed", "routing": "spray"}]),
            "workload": training}
    result, _, out = cli_on_file(tmp_path, data, "run")
    assert result.exit_code == 0, result.output
    assert answer_sentences(out) == [] and "fastest" not in result.output
    assert "fastest" not in " ".join(str(f.layout.meta) for f in build_figures(out))


def test_no_chart_draws_a_single_value(tmp_path):
    """A single run of one collective call: its time is a number in the summary table, not a one-bar chart."""
    result, _, out = cli_on_file(tmp_path, _spec(engine={"link_series": 0}), "run")
    assert result.exit_code == 0, result.output
    figs = build_figures(out)
    assert not any(_single_value(f) for f in figs)
    assert all("per call vs ideal" not in (f.layout.title.text or "") for f in figs)
    assert _single_value(go.Figure([go.Bar(x=["a"], y=[1.0]), go.Scatter(x=["a"], y=[0.5])]))
    assert not _single_value(go.Figure([go.Bar(x=["a", "b"], y=[1.0, 2.0])]))
    assert not _single_value(go.Figure(go.Table(cells={"values": [[1]]})))
