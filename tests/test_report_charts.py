"""The report's box and grouped bar charts are plotly express's figures, key for key, without express."""

import numpy as np
import pandas as pd
import plotly.express as px
import pytest

from netsim.report import charts
from netsim.report.dashboard import LABELS


@pytest.mark.parametrize("n_groups", [1, 3, 12])  # 12: the colours cycle
def test_box_is_express_box(n_groups):
    rng = np.random.default_rng(n_groups)
    frame = pd.DataFrame({"tier": rng.choice(["nic", "host", "leaf-spine"], 60), "mean_util": rng.random(60),
                          "group": [f"variant {i % n_groups}" for i in range(60)]})
    want = px.box(frame, x="tier", y="mean_util", color="group", points=False, labels=LABELS, title="T")
    got = charts.box(frame, "tier", "mean_util", "group", LABELS, "T")
    assert got.to_json() == want.to_json()


def test_grouped_bars_are_express_bars():
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"link": [f"leaf{i}→spine{i % 2}" for i in range(25)], "peak utilisation": rng.random(25),
                          "mean utilisation": rng.random(25)})
    labels = {**LABELS, "value": "utilisation", "variable": ""}
    want = px.bar(frame, x="link", y=["peak utilisation", "mean utilisation"], barmode="group", labels=labels,
                  title="B")
    got = charts.grouped_bars(frame, "link", ["peak utilisation", "mean utilisation"], labels, "B")
    assert got.to_json() == want.to_json()
