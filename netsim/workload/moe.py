"""Mixture-of-experts token routing: which expert-parallel rank each token's top-k experts live on.

An MoE layer's dispatch all-to-all-v sends every (token, chosen expert) pair from the rank that
holds the token to the rank that holds the expert; the combine sends the results back. What
decides the traffic is the *picks matrix* ``P``: ``P[i, j]`` the number of (token, expert) pairs
from rank ``i``'s tokens to experts on rank ``j`` of the expert-parallel (EP) group. Experts are
laid out in blocks: expert ``e`` lives on EP rank ``e // (experts / ep)``. A token's pairs with
two experts on one rank are sent twice (Megatron's all-to-all token dispatcher; no de-duplication).

Routing is a distribution, drawn per layer call from a seeded generator:

* ``uniform``: every expert equally likely. Expected ``P[i, j] = T k / ep`` (the closed form).
* ``zipf``: expert popularity ``p_e`` proportional to ``1 / r_e^skew``, the ranks ``r_e`` a
  seeded permutation of ``1..E`` drawn once per job (hot experts sit on random GPUs and stay hot).
* ``node_limited``: each token first picks ``max_nodes`` distinct nodes (hosts) of the EP group,
  weighted by their experts' popularity (Gumbel top-M), then spreads its ``k`` picks over the
  experts of those nodes in proportion to their popularity, as DeepSeek-V3's node-limited routing
  bounds a token's inter-node traffic to M nodes. ``skew`` sets the popularity as for ``zipf``.
* ``file``: the matrix of each step read from a CSV or Parquet file (columns ``step, src, dst,
  tokens``; the ranks are EP ranks). The dispatch of micro-batch ``j`` in layer ``l`` of iteration
  ``i`` uses step ``((i x layers + l) x micro_batches + j) mod steps`` (steps in sorted order).

Picks are drawn with replacement (``k`` is much smaller than the number of experts); each row
sums to exactly ``T k``. With ``sample: false`` the expected matrix is used instead (floats).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from netsim.errors import ConfigError


def popularity(experts: int, skew: float, rng: np.random.Generator) -> np.ndarray:
    """Per expert the probability a pick chooses it: uniform for ``skew == 0``, else Zipf over a
    seeded random ranking of the experts.

    >>> popularity(4, 0.0, np.random.default_rng(0)).tolist()
    [0.25, 0.25, 0.25, 0.25]
    >>> sorted(popularity(3, 1.0, np.random.default_rng(0)).round(4).tolist())
    [0.1818, 0.2727, 0.5455]
    """
    if skew == 0:
        return np.full(experts, 1.0 / experts)
    ranks = rng.permutation(experts) + 1
    weights = ranks.astype(np.float64) ** -float(skew)
    return weights / weights.sum()


def _rounded(amounts: np.ndarray, total: int) -> np.ndarray:
    """Integers summing to ``total`` per row, each within one of ``amounts`` (largest remainder)."""
    base = np.floor(amounts).astype(np.int64)
    short = total - base.sum(axis=-1)
    order = np.argsort(-(amounts - base), axis=-1, kind="stable")
    bump = np.arange(amounts.shape[-1])[None, :] < short[:, None]
    np.put_along_axis(base, order, np.take_along_axis(base, order, -1) + bump, -1)
    return base


@dataclass(frozen=True)
class TokenRouter:
    """Draws picks matrices for one EP group.

    Parameters
    ----------
    tokens:
        Tokens each EP rank routes per call (a micro-batch's ``micro_batch x seq_len``).
    top_k:
        Experts per token.
    expert_popularity:
        Per expert, the probability a pick chooses it (:func:`popularity`).
    ep:
        Ranks of the EP group; ``len(expert_popularity)`` must be a multiple.
    rank_node:
        Per EP rank, its node (host); used by ``max_nodes``.
    max_nodes:
        Node-limited routing: each token reaches at most this many nodes (``None``: no limit).
    """

    tokens: int
    top_k: int
    expert_popularity: np.ndarray
    ep: int
    rank_node: np.ndarray
    max_nodes: int | None = None

    @property
    def rank_popularity(self) -> np.ndarray:
        """Per EP rank, the probability a pick lands on it (its experts' popularity summed)."""
        return self.expert_popularity.reshape(self.ep, -1).sum(axis=1)

    def expected(self) -> np.ndarray:
        """The expected picks matrix (floats); uniform routing: ``T k / ep`` everywhere."""
        total = float(self.tokens * self.top_k)
        if self.max_nodes is None or self.max_nodes >= len(np.unique(self.rank_node)):
            return np.tile(self.rank_popularity * total, (self.ep, 1))
        nodes, node_of_rank = np.unique(self.rank_node, return_inverse=True)
        p_rank = self.rank_popularity
        p_node = np.bincount(node_of_rank, weights=p_rank, minlength=len(nodes))
        sets = node_sets(p_node, self.max_nodes)
        if sets is None:  # too many node sets to list: a large fixed sample estimates the node shares
            rng = np.random.default_rng(0)
            return np.tile(self._node_limited(rng, 1, 65536).astype(np.float64)[0] * total / (65536 * self.top_k),
                           (self.ep, 1))
        chosen, prob = sets
        w = p_node[chosen]
        per_node = np.zeros(len(nodes))
        np.add.at(per_node, chosen.ravel(), (prob[:, None] * w / w.sum(axis=1, keepdims=True)).ravel())
        within = p_rank / p_node[node_of_rank]
        return np.tile(per_node[node_of_rank] * within * total, (self.ep, 1))

    def draw(self, rng: np.random.Generator) -> np.ndarray:
        """One call's picks matrix (integers; every row sums to ``tokens x top_k``)."""
        if self.max_nodes is None or self.max_nodes >= len(np.unique(self.rank_node)):
            return rng.multinomial(self.tokens * self.top_k, self.rank_popularity, size=self.ep)
        return self._node_limited(rng, self.ep, self.tokens)

    def _node_limited(self, rng: np.random.Generator, rows: int, tokens: int) -> np.ndarray:
        nodes, node_of_rank = np.unique(self.rank_node, return_inverse=True)
        p_rank = self.rank_popularity
        p_node = np.bincount(node_of_rank, weights=p_rank, minlength=len(nodes))
        sets = node_sets(p_node, self.max_nodes)
        if sets is not None:  # tokens per node set: one multinomial per row over the sets' probabilities
            chosen, prob = sets
            per_set = rng.multinomial(tokens, prob, size=rows)                        # (rows, sets)
            w = p_node[chosen]
            share = np.zeros((len(chosen), len(nodes)))
            np.put_along_axis(share, chosen, w / w.sum(axis=1, keepdims=True) * self.top_k, axis=1)
            per_node = per_set @ share                                                 # (rows, nodes)
        else:  # too many sets to list: each token draws its nodes (Gumbel top-M)
            with np.errstate(divide="ignore"):
                keys = np.log(p_node) + rng.gumbel(size=(rows, tokens, len(nodes)))
            picked = np.argpartition(-keys, self.max_nodes - 1, axis=2)[:, :, :self.max_nodes]
            w = p_node[picked]
            flat = (picked + len(nodes) * np.arange(rows)[:, None, None]).ravel()
            per_node = np.bincount(flat, weights=(w / w.sum(axis=2, keepdims=True) * self.top_k).ravel(),
                                   minlength=rows * len(nodes)).reshape(rows, len(nodes))
        counts = _rounded(per_node, tokens * self.top_k)
        out = np.zeros((rows, self.ep), dtype=np.int64)
        for n in range(len(nodes)):
            members = np.flatnonzero(node_of_rank == n)
            out[:, members] = rng.multinomial(counts[:, n], p_rank[members] / p_rank[members].sum())
        return out


#: Node sets listed exactly up to this many (set, order) pairs; beyond, tokens draw their nodes one by one.
MAX_NODE_ORDERINGS = 200_000


def node_sets(p_node: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Every set of ``m`` distinct nodes a token may pick, and its probability when nodes are drawn
    in turn in proportion to ``p_node`` without replacement (the law of Gumbel top-M): the sum over
    the set's orderings of ``prod p_i / (1 - p_before)``. ``None`` when there are too many.

    >>> sets, prob = node_sets(np.array([0.5, 0.25, 0.25]), 2)
    >>> sets.tolist(), prob.round(4).tolist()
    ([[0, 1], [0, 2], [1, 2]], [0.4167, 0.4167, 0.1667])
    """
    from itertools import combinations, permutations
    from math import comb, factorial
    n = len(p_node)
    if comb(n, m) * factorial(m) > MAX_NODE_ORDERINGS:
        return None
    chosen = np.array(list(combinations(range(n), m)), dtype=np.int64).reshape(-1, m)
    orders = np.array(list(permutations(range(m))), dtype=np.int64)
    w = p_node[chosen][:, orders]                                    # (sets, orderings, m)
    before = np.cumsum(w, axis=2) - w
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(w > 0, w / (1.0 - before), 0.0)
    prob = terms.prod(axis=2).sum(axis=1)
    return chosen, prob / prob.sum()


def read_picks(path: str | Path, ep: int, where: str = "workload.moe.routing.path") -> list[np.ndarray]:
    """Per step, the ``ep x ep`` picks matrix of a routing file (CSV or Parquet: ``step, src, dst, tokens``)."""
    import pandas as pd
    file = Path(path)
    try:
        frame = pd.read_parquet(file) if file.suffix == ".parquet" else pd.read_csv(file)
    except FileNotFoundError:
        raise ConfigError(f"routing matrix file {str(file)!r} not found", where) from None
    except Exception as exc:  # noqa: BLE001 - any parse failure is the file's fault
        raise ConfigError(f"cannot read routing matrix file {str(file)!r}: {exc}", where) from None
    missing = [c for c in ("step", "src", "dst", "tokens") if c not in frame.columns]
    if missing:
        raise ConfigError(f"{file}: missing column(s) {', '.join(missing)}; a routing matrix file has columns "
                          "step, src, dst, tokens", where)
    for col in ("step", "src", "dst", "tokens"):
        values = pd.to_numeric(frame[col], errors="coerce")
        bad = ~np.isfinite(values) | (values < 0)
        if col != "tokens":
            bad |= values != np.floor(values)
        if col in ("src", "dst"):
            bad |= values >= ep
        if bad.any():
            row = int(np.flatnonzero(bad.to_numpy())[0])
            allowed = f"an EP rank from 0 to {ep - 1}" if col in ("src", "dst") else \
                "a number >= 0" if col == "tokens" else "an integer >= 0"
            raise ConfigError(f"{file}:{row + 2}: {col} is {str(frame[col].iloc[row])!r}; allowed: {allowed}", where)
        frame[col] = values
    steps = sorted(int(s) for s in frame["step"].unique())
    if not steps:
        raise ConfigError(f"{file}: no rows", where)
    out = []
    for s in steps:
        part = frame[frame["step"] == s]
        m = np.zeros((ep, ep))
        np.add.at(m, (part["src"].astype(int).to_numpy(), part["dst"].astype(int).to_numpy()),
                  part["tokens"].to_numpy(dtype=np.float64))
        out.append(m)
    return out


@dataclass
class MoEPlan:
    """A training job's MoE layers: their costs and token routing.

    Costs per micro-batch of ``T = micro_batch x seq_len`` tokens, hidden ``h``, expert FFN width
    ``f`` (SwiGLU: three ``h x f`` matrices): a routed expert costs ``6 h f`` FLOPs per token it
    receives (forward); an MoE layer's other work is attention ``8 T h^2 + 4 T s h``, the router
    ``2 T h E`` and the shared experts ``6 T h f`` each. Dense layers keep the GPT formula.
    """

    spec: object           #: the :class:`netsim.config.MoESpec`
    model: object          #: the :class:`netsim.workload.training.GPTModel`
    seed: int
    micro_batches: int = 1
    files: list[np.ndarray] | None = None  #: ``routing: file``: the matrices per step
    _popularity: dict[int, np.ndarray] | None = None

    @property
    def tokens(self) -> int:
        """Tokens per micro-batch of one data-parallel replica."""
        return self.model.micro_batch * self.model.seq_len

    def is_moe(self, layer: int) -> bool:
        """Whether ``layer`` (0-based) has routed experts."""
        return layer >= self.spec.dense_layers

    def pick_flops(self) -> float:
        """Forward FLOPs of one token through one routed expert: ``6 h f``."""
        return 6.0 * self.model.hidden * self.spec.expert_hidden

    def layer_flops(self, layer: int) -> float:
        """Forward FLOPs of ``layer`` on one micro-batch, routed experts excluded."""
        m = self.model
        if not self.is_moe(layer):
            return m.layer_forward_flops()
        t, h = self.tokens, m.hidden
        return (8.0 * t * h * h + 4.0 * t * m.seq_len * h + 2.0 * t * h * self.spec.experts
                + self.spec.shared_experts * t * self.pick_flops())

    def expected_expert_flops(self, layer: int) -> float:
        """Forward FLOPs of the routed experts of ``layer`` per micro-batch, at the expected load."""
        return self.tokens * self.spec.top_k * self.pick_flops() if self.is_moe(layer) else 0.0

    def layer_params(self, layer: int) -> float:
        """Parameters of ``layer`` every data-parallel replica holds (routed experts excluded)."""
        m = self.model
        if not self.is_moe(layer):
            return float(m.layer_params)
        h, f = m.hidden, self.spec.expert_hidden
        return 4.0 * h * h + 8.0 * h + h * self.spec.experts + self.spec.shared_experts * 3.0 * h * f

    def expert_params(self, layer: int) -> float:
        """Routed-expert parameters of ``layer`` on one rank of an EP group (``experts / ep`` experts)."""
        if not self.is_moe(layer):
            return 0.0
        return self.spec.experts // self.spec.ep * 3.0 * self.model.hidden * self.spec.expert_hidden

    def popularity(self, layer: int) -> np.ndarray:
        """Expert popularity of ``layer`` (seeded per job and layer; uniform without skew)."""
        if self._popularity is None:
            self._popularity = {}
        hit = self._popularity.get(layer)
        if hit is None:
            rng = np.random.default_rng([self.seed, 1, layer])
            hit = self._popularity[layer] = popularity(self.spec.experts, self.spec.routing.zipf_skew, rng)
        return hit

    def picks(self, layer: int, rank_node: np.ndarray, call: tuple[int, ...]) -> np.ndarray:
        """The picks matrix of one dispatch: ``call`` identifies it (iteration, stage, group, tp index,
        micro-batch), so draws do not depend on the order the simulation reaches them."""
        routing = self.spec.routing
        if routing.type == "file":
            iteration, micro = call[0], call[-1]
            step = (iteration * self.model.layers + layer) * self.micro_batches + micro
            return self.files[step % len(self.files)]
        router = TokenRouter(self.tokens, self.spec.top_k, self.popularity(layer), self.spec.ep,
                             np.asarray(rank_node), routing.max_nodes)
        if not routing.sample:
            return router.expected()
        return router.draw(np.random.default_rng([self.seed, 2, layer, *call]))
