"""Training-job model (GPT-style, Megatron layout): parameters, FLOPs, compute times, layer partitions, 1F1B.

This module is the compute side of a training iteration, as pure functions: how many FLOPs a
micro-batch costs per layer, how long a GPU takes for it, how layers split across pipeline stages
(evenly, or in proportion to each stage's speed as Holmes's self-adapting partition does), and
the 1F1B pipeline schedule with its bubble. The communication side (TP allreduces, PP activation
sends, DP gradient synchronisation) runs on the Fabric.

FLOP counts follow Narayanan et al. (Megatron-LM, SC'21): a transformer layer's forward pass on a
micro-batch of ``b`` sequences of ``s`` tokens with hidden size ``h`` costs ``24 b s h^2 + 4 b s^2 h``
FLOPs, the logit layer ``2 b s h V``, and a backward pass twice its forward.
"""

from __future__ import annotations

from dataclasses import dataclass

from netsim.errors import ConfigError

#: An iteration's time per stage process, in parts that sum to it (see :mod:`netsim.workload.pipeline`).
BREAKDOWN = ("compute_s", "tp_s", "pp_s", "dp_s", "ep_s", "bubble_s")


@dataclass(frozen=True)
class GPTModel:
    """A GPT-style decoder: ``layers`` transformer layers of hidden size ``hidden``.

    Parameters
    ----------
    layers, hidden, heads:
        Depth, width, attention heads (``hidden`` must be a multiple of ``heads``).
    seq_len, vocab:
        Tokens per sequence and vocabulary size.
    micro_batch, global_batch:
        Sequences per micro-batch and per iteration (over all data-parallel replicas).
    dtype_bytes:
        Bytes per activation and gradient element (2 for bf16/fp16).
    """

    layers: int
    hidden: int
    heads: int
    seq_len: int
    vocab: int
    micro_batch: int = 1
    global_batch: int = 1
    dtype_bytes: int = 2

    def __post_init__(self):
        for name in ("layers", "hidden", "heads", "seq_len", "vocab", "micro_batch", "global_batch", "dtype_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}", f"workload.model.{name}")
        if self.hidden % self.heads:
            raise ConfigError(f"hidden ({self.hidden}) must be a multiple of heads ({self.heads})",
                              "workload.model.heads")

    @property
    def layer_params(self) -> int:
        """Parameters of one transformer layer: ``12 h^2 + 13 h`` (QKV, projection, 4h MLP, biases, 2 layer norms)."""
        h = self.hidden
        return 12 * h * h + 13 * h

    @property
    def embedding_params(self) -> int:
        """Token and position embeddings: ``V h + s h`` (the logit layer shares the token embedding)."""
        return (self.vocab + self.seq_len) * self.hidden

    @property
    def params(self) -> int:
        """All parameters."""
        return self.layers * self.layer_params + self.embedding_params

    def layer_forward_flops(self) -> float:
        """FLOPs of one layer's forward pass on one micro-batch: ``24 b s h^2 + 4 b s^2 h``."""
        b, s, h = self.micro_batch, self.seq_len, self.hidden
        return 24.0 * b * s * h * h + 4.0 * b * s * s * h

    def logits_forward_flops(self) -> float:
        """FLOPs of the logit layer's forward pass on one micro-batch: ``2 b s h V``."""
        return 2.0 * self.micro_batch * self.seq_len * self.hidden * self.vocab

    def activation_bytes(self) -> float:
        """Bytes of one micro-batch's activations between layers (``b s h`` elements): the size of a
        pipeline send and of each tensor-parallel allreduce."""
        return float(self.micro_batch * self.seq_len * self.hidden * self.dtype_bytes)

    def iteration_flops(self) -> float:
        """Model FLOPs of one iteration (forward + backward, no recomputation) over the global batch."""
        per_micro = 3.0 * (self.layers * self.layer_forward_flops() + self.logits_forward_flops())
        return per_micro * self.global_batch / self.micro_batch


@dataclass(frozen=True)
class Parallelism:
    """Tensor, pipeline and data parallel sizes (world size = tp x pp x dp)."""

    tp: int = 1
    pp: int = 1
    dp: int = 1
    sharded_optimizer: bool = False  #: reduce-scatter + allgather of gradients/parameters instead of allreduce
    overlap_dp: bool = False  #: start each stage's gradient synchronisation as soon as its backward ends
    schedule: str = "1f1b"    #: the pipeline order: ``1f1b``, ``interleaved`` or ``gpipe`` (:func:`pipeline_order`)
    virtual_stages: int = 1   #: model chunks per stage (``interleaved``)

    @property
    def world(self) -> int:
        """GPUs the job needs."""
        return self.tp * self.pp * self.dp

    def micro_batches(self, model: GPTModel) -> int:
        """Micro-batches per pipeline per iteration: ``global_batch / (micro_batch x dp)``, which must be whole."""
        per_replica, rest = divmod(model.global_batch, model.micro_batch * self.dp)
        if rest or per_replica < 1:
            raise ConfigError(f"global_batch ({model.global_batch}) must be a multiple of micro_batch x dp "
                              f"({model.micro_batch} x {self.dp})", "workload.model.global_batch")
        return per_replica


@dataclass(frozen=True)
class GPUProfile:
    """A GPU's dense half-precision peak and the fraction of it a training kernel mix achieves."""

    name: str
    peak_flops: float
    efficiency: float = 0.5

    def seconds(self, flops: float) -> float:
        """Time to execute ``flops`` at ``peak x efficiency``."""
        return flops / (self.peak_flops * self.efficiency)


#: Dense bf16 peaks (vendor figures); efficiencies are estimates, override them per experiment.
GPU_PROFILES = {
    "a100": GPUProfile("a100", 312e12, 0.5),
    "h100": GPUProfile("h100", 989e12, 0.45),
    "h800": GPUProfile("h800", 989e12, 0.45),
    "mi250x-gcd": GPUProfile("mi250x-gcd", 191.5e12, 0.35),  # one GCD: half of an MI250X's 383 TFLOPS
}


def partition_layers(layers: int, speeds: list[float]) -> list[int]:
    """Split ``layers`` over pipeline stages in proportion to ``speeds`` (every stage gets at least one).

    Largest-remainder rounding of ``layers x speed / total``, ties to the earlier stage; equal speeds
    give the even split (the first ``layers % p`` stages one more). Holmes's self-adapting partition
    starts here.

    >>> partition_layers(30, [1.0, 1.0]), partition_layers(30, [197.0, 160.0]), partition_layers(7, [1, 1, 1])
    ([15, 15], [17, 13], [3, 2, 2])
    """
    p = len(speeds)
    if p < 1 or layers < p:
        raise ConfigError(f"{layers} layers cannot fill {p} pipeline stages", "workload.parallelism.pp")
    if any(not v > 0 for v in speeds):
        raise ConfigError("stage speeds must be positive", "workload.parallelism")
    total = float(sum(speeds))
    ideal = [layers * v / total for v in speeds]
    counts = [int(x) for x in ideal]
    order = sorted(range(p), key=lambda i: (-(ideal[i] - counts[i]), i))
    for i in order[: layers - sum(counts)]:
        counts[i] += 1
    for i in range(p):  # a very slow stage still holds one layer, taken from the largest
        if counts[i] == 0:
            counts[max(range(p), key=lambda k: (counts[k], -k))] -= 1
            counts[i] = 1
    return counts


def one_f_one_b_order(stages: int, micro_batches: int) -> list[list[tuple[str, int]]]:
    """Per stage, its 1F1B sequence of ``("F"|"B", micro-batch)``: ``min(p - i - 1, m)`` warm-up
    forwards, then one forward and one backward alternately, then the remaining backwards.

    >>> first, last = one_f_one_b_order(2, 3)
    >>> first
    [('F', 0), ('F', 1), ('B', 0), ('F', 2), ('B', 1), ('B', 2)]
    >>> last
    [('F', 0), ('B', 0), ('F', 1), ('B', 1), ('F', 2), ('B', 2)]
    """
    order = []
    for i in range(stages):
        warm = min(stages - i - 1, micro_batches)
        ops = [("F", j) for j in range(warm)]
        f_next, b_next = warm, 0
        while f_next < micro_batches:
            ops.append(("F", f_next))
            f_next += 1
            ops.append(("B", b_next))
            b_next += 1
        ops.extend(("B", j) for j in range(b_next, micro_batches))
        order.append(ops)
    return order


def pipeline_order(schedule: str, stages: int, micro_batches: int, chunks: int = 1) -> list[list[tuple[str, int, int]]]:
    """Per stage, its passes in order as ``("F"|"B", micro-batch, model chunk)``.

    ``1f1b``: :func:`one_f_one_b_order` (one chunk). ``gpipe``: every forward, then every backward in
    reverse (the last micro-batch's backward follows its forward at once). ``interleaved``: Megatron's
    interleaved 1F1B over ``chunks`` model chunks per stage (chunk ``c`` of stage ``s`` is virtual stage
    ``c x stages + s``): ``2 (p - s - 1) + (v - 1) p`` warm-up forwards (all of them when there are only
    ``p`` micro-batches), then one forward and one backward alternately, then the rest; the k-th
    forward runs chunk ``(k mod pv) // p`` on micro-batch ``(k // pv) p + k mod p``, backwards the
    chunks in reverse.

    >>> pipeline_order("gpipe", 2, 2)[0]
    [('F', 0, 0), ('F', 1, 0), ('B', 1, 0), ('B', 0, 0)]
    >>> [f"{op}{j}.{c}" for op, j, c in pipeline_order("interleaved", 2, 2, 2)[1]]
    ['F0.0', 'F1.0', 'F0.1', 'F1.1', 'B0.1', 'B1.1', 'B0.0', 'B1.0']
    """
    if schedule == "1f1b":
        return [[(op, j, 0) for op, j in ops] for ops in one_f_one_b_order(stages, micro_batches)]
    if schedule == "gpipe":
        return [[("F", j, 0) for j in range(micro_batches)] + [("B", j, 0) for j in reversed(range(micro_batches))]
                for _ in range(stages)]
    p, v, m = stages, chunks, micro_batches
    total = m * v

    def virtual(k: int, forward: bool) -> tuple[int, int]:
        chunk = (k % (p * v)) // p
        return (k // (p * v)) * p + k % p, chunk if forward else v - chunk - 1

    order = []
    for s in range(p):
        warm = total if m == p else min(2 * (p - s - 1) + (v - 1) * p, total)
        ops = [("F", *virtual(k, True)) for k in range(warm)]
        for i in range(total - warm):
            ops += [("F", *virtual(i + warm, True)), ("B", *virtual(i, False))]
        ops += [("B", *virtual(k, False)) for k in range(total - warm, total)]
        order.append(ops)
    return order


def one_f_one_b(forward_s: list[float], backward_s: list[float], micro_batches: int,
                send_s: float = 0.0) -> tuple[float, list[list[tuple[str, int, float, float]]]]:
    """The 1F1B (PipeDream-Flush) schedule of one iteration, with a fixed cost per stage-to-stage send.

    Stage ``i`` runs ``min(p - i - 1, m)`` warm-up forwards, then alternates one forward and one
    backward, then drains the remaining backwards. A forward of micro-batch ``j`` on stage ``i``
    waits for stage ``i-1``'s forward of ``j`` (plus ``send_s``); a backward waits for stage
    ``i+1``'s backward of ``j``.

    Returns
    -------
    (iteration time, per stage the list of (op, micro-batch, start, end)).

    With equal stages of forward ``f`` and backward ``b`` and free sends the iteration takes
    ``(m + p - 1)(f + b)``: the bubble is ``(p - 1)/(m + p - 1)`` of it.

    >>> round(one_f_one_b([1.0, 1.0], [2.0, 2.0], 4)[0], 9)
    15.0
    """
    p, m = len(forward_s), micro_batches
    order = one_f_one_b_order(p, m)
    done: dict[tuple[str, int, int], float] = {}
    position = [0] * p
    clock = [0.0] * p
    timeline: list[list[tuple[str, int, float, float]]] = [[] for _ in range(p)]
    remaining = sum(len(o) for o in order)
    while remaining:
        progressed = False
        for i in range(p):
            while position[i] < len(order[i]):
                op, j = order[i][position[i]]
                if op == "F":
                    dep = 0.0 if i == 0 else done.get(("F", i - 1, j))
                    dep = dep if i == 0 or dep is None else dep + send_s
                    cost = forward_s[i]
                else:
                    own = done.get(("F", i, j))
                    nxt = own if i == p - 1 else done.get(("B", i + 1, j))
                    dep = None if own is None or nxt is None else (nxt if i == p - 1 else nxt + send_s)
                    cost = backward_s[i]
                if dep is None:
                    break
                start = max(clock[i], dep)
                clock[i] = start + cost
                done[(op, i, j)] = clock[i]
                timeline[i].append((op, j, start, clock[i]))
                position[i] += 1
                remaining -= 1
                progressed = True
        if not progressed:  # pragma: no cover - the 1F1B order is deadlock-free
            raise RuntimeError("1F1B schedule deadlocked")
    return max(clock), timeline
