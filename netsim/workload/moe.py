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

import csv
import io
import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from netsim import inputfile
from netsim.errors import ConfigError, did_you_mean, shorten


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


#: Columns of a routing-matrix file (any order).
PICKS_COLUMNS = ("step", "src", "dst", "tokens")
#: Largest routing-matrix file read (bytes): 64 MiB, some four million CSV rows (a thousand steps of a full
#: 64 x 64 matrix), read in about 1 GiB; a larger file, or the wrong one, fails before it is read.
MAX_PICKS_BYTES = 64 * 2**20
#: Most rows read: a Parquet file compresses, so its size says little about its rows.
MAX_PICKS_ROWS = 4 * 2**20
#: Largest step number and token count: 2**53, the largest integer a float64 holds exactly.
MAX_PICKS_VALUE = 2**53
#: A number in a CSV cell: decimal digits, a point, an exponent (no ``nan``, ``inf``, ``1_000``, ``0x10``).
_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
#: The bytes of a CSV body the fast reader takes: anything else goes through the row-by-row reader.
_PLAIN = np.zeros(256, dtype=bool)
_PLAIN[np.frombuffer(b"0123456789.eE+-, \t\n", dtype=np.uint8)] = True
#: The column pandas writes for a DataFrame index; ignored in a Parquet file.
_PANDAS_INDEX = re.compile(r"__index_level_\d+__")


class PickSteps(Sequence):
    """The picks matrix of every step of a routing file, in step order (what :func:`read_picks` returns).

    The rows are kept sorted by (step, src, dst); a step's ``ep x ep`` matrix (floats) is built when
    asked, so a file of many steps costs its rows, not ``steps x ep^2``.
    """

    def __init__(self, ep: int, steps: np.ndarray, ptr: np.ndarray, rows: np.ndarray, src: np.ndarray,
                 dst: np.ndarray, tokens: np.ndarray, file: str, lines: np.ndarray | None):
        self.ep, self.steps, self.ptr = ep, steps, ptr
        self.rows, self.src, self.dst, self.tokens = rows, src, dst, tokens
        self.file, self.lines = file, lines  #: the file, and the line of each of its rows (None: Parquet)
        self._built: tuple[int, np.ndarray] | None = None

    def __len__(self) -> int:
        return len(self.steps)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        k = range(len(self))[i]
        if self._built is None or self._built[0] != k:
            a, b = self.ptr[k], self.ptr[k + 1]
            m = np.zeros((self.ep, self.ep))
            m[self.src[a:b], self.dst[a:b]] = self.tokens[a:b]
            m.flags.writeable = False  # shared by every call of the step
            self._built = (k, m)
        return self._built[1]

    def check_sent(self, limit: int, where: str) -> None:
        """ConfigError at the first row (in file order) of a step and rank that sends more than ``limit``
        (token, expert) pairs: a rank's micro-batch routes ``micro_batch x seq_len x top_k`` at most."""
        key = np.repeat(np.arange(len(self.steps), dtype=np.int64), np.diff(self.ptr)) * self.ep + self.src
        starts = np.flatnonzero(np.diff(key, prepend=-1))
        sent = np.add.reduceat(self.tokens, starts)
        over = np.flatnonzero(sent > limit)
        if not len(over):
            return
        first = np.minimum.reduceat(self.rows, starts)[over]
        g = int(over[np.argmin(first)])
        step, rank = int(self.steps[key[starts[g]] // self.ep]), int(self.src[starts[g]])
        row = int(first.min())
        place = f"{self.file}:{self.lines[row]}" if self.lines is not None else f"{self.file}: row {row + 1:,}"
        raise ConfigError(f"{place}: step {step}: EP rank {rank} sends {sent[g]:,.0f} (token, "
                          f"expert) pairs; a rank's micro-batch routes at most micro_batch x seq_len x top_k = "
                          f"{limit:,} (was the file written for another model?)", where)


@dataclass
class _Cells:
    """The numbers of a routing file by column, and where each row is, for messages."""

    file: str
    values: dict[str, np.ndarray]
    lines: np.ndarray | None  #: per row, its physical line (CSV); None: rows are counted (Parquet)
    raw: Callable[[int, str], object]  #: the cell of row ``i`` and a column as the file has it

    def place(self, i: int) -> str:
        """``file:line`` or ``file: row N`` (counted from 1) of row ``i``."""
        return f"{self.file}:{self.lines[i]}" if self.lines is not None else f"{self.file}: row {i + 1:,}"

    def label(self, i: int) -> str:
        """``line N`` or ``row N`` of row ``i``, to refer back to it."""
        return f"line {self.lines[i]}" if self.lines is not None else f"row {i + 1:,}"


def read_picks(path: str | Path, ep: int, where: str = "workload.moe.routing.path",
               picks_per_rank: int | None = None) -> PickSteps:
    """Per step, the ``ep x ep`` picks matrix of a routing file (CSV or Parquet: ``step, src, dst, tokens``).

    Everything is checked before a matrix is used: a regular file of at most :data:`MAX_PICKS_BYTES`
    and :data:`MAX_PICKS_ROWS` rows, strict UTF-8 (CSV); the four columns, each once; in every row
    integers (``step`` and ``tokens`` from 0 to 2**53, ``src`` and ``dst`` EP ranks below ``ep``); no
    (step, src, dst) twice; every EP rank in some row; every step sending something between two
    ranks; and, given ``picks_per_rank``, no rank sending more in a step. Raises ConfigError at
    ``where``, its message opening with the file and the line (CSV) or the row counted from 1 (Parquet).

    >>> import tempfile
    >>> with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
    ...     _ = f.write("step,src,dst,tokens\\n0,0,1,10\\n0,1,0,5\\n")
    >>> read_picks(f.name, 2)[0].tolist()
    [[0.0, 10.0], [5.0, 0.0]]
    >>> Path(f.name).unlink()
    """
    file = Path(path)
    cells = _read_parquet(file, ep, where) if file.suffix.lower() == ".parquet" else _read_csv(file, ep, where)
    steps = _picks_steps(cells, ep, where)
    if picks_per_rank is not None:
        steps.check_sent(picks_per_rank, where)
    return steps


def _opened(read, where: str):
    """``read()``, an error of :mod:`netsim.inputfile` restated at ``where`` (the file, and the line if known)."""
    try:
        return read()
    except ConfigError as exc:
        line = f":{exc.line}" if exc.line else ""
        raise ConfigError(f"{exc.file}{line}: {exc.message}", where) from None


def _check_header(names: list[str], place: str, where: str) -> None:
    """The four columns, each once, and nothing else."""
    expected = ", ".join(PICKS_COLUMNS)
    if names and all(_NUMBER.fullmatch(n) for n in names):
        raise ConfigError(f"{place}: no header: the first line must name the columns {expected}", where)
    counts = Counter(names)
    repeated = next((n for n in names if counts[n] > 1), None)
    if repeated is not None:
        raise ConfigError(f"{place}: column {shorten(repeated)} appears {counts[repeated]:,} times; each "
                          "column once", where)
    unknown = [n for n in names if n not in PICKS_COLUMNS]
    missing = [c for c in PICKS_COLUMNS if c not in names]
    if not (unknown or missing):
        return
    parts = [f"missing column{'s' * (len(missing) > 1)} {', '.join(missing)}"] if missing else []
    if unknown:
        parts.append(f"unknown column{'s' * (len(unknown) > 1)} {', '.join(map(shorten, unknown[:4]))}"
                     + (f" (and {len(unknown) - 4} more)" if len(unknown) > 4 else ""))
    hint = did_you_mean(unknown[0], PICKS_COLUMNS) if unknown else ""
    raise ConfigError(f"{place}: {'; '.join(parts)}; a routing matrix file has columns {expected}{hint}", where)


def _records(text: str, file: str, first_line: int, where: str):
    """(line, fields) of each CSV record of ``text`` whose first line is ``first_line`` of ``file``; a
    field past the csv module's limit (131,072 characters) is a ConfigError, not a csv.Error."""
    records = csv.reader(io.StringIO(text))
    start = 1
    while True:
        try:
            record = next(records)
        except StopIteration:
            return
        except csv.Error as exc:
            raise ConfigError(f"{file}:{first_line + records.line_num - 1}: not a valid CSV row ({exc})", where) from None
        yield first_line + start - 1, record
        start = records.line_num + 1


def _read_csv(file: Path, ep: int, where: str) -> _Cells:
    """The cells of a CSV routing file: a fast read when it holds only plain numbers, else row by row."""
    raw = _opened(lambda: inputfile.read_bytes(file, MAX_PICKS_BYTES, "routing matrix file"), where)
    if raw.startswith(b"PAR1"):
        raise ConfigError(f"{file}: a Parquet file, not CSV text: name it .parquet", where)
    text = _opened(lambda data=raw: inputfile.decode(data, str(file), "routing matrix file"), where)
    del raw
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    header, header_line = None, 0
    for line, record in _records(text, str(file), 1, where):
        if any(f.strip() for f in record):
            header, header_line = [f.strip() for f in record], line
            break
    if header is None:
        raise ConfigError(f"{file}: the file is empty; expected a header {','.join(PICKS_COLUMNS)} and a row per "
                          "(step, src, dst)", where)
    _check_header(header, f"{file}:{header_line}", where)
    body = text[_line_offset(text, header_line):]
    del text
    if body.count("\n") >= MAX_PICKS_ROWS and sum(1 for line in body.split("\n") if line.strip()) > MAX_PICKS_ROWS:
        raise ConfigError(f"{file}: more than {MAX_PICKS_ROWS:,} rows; a routing matrix file has at most "
                          f"{MAX_PICKS_ROWS:,}", where)
    values, lines = _fast_csv(body, header, header_line)
    if values is None:
        values, lines = _strict_csv(body, header, header_line, str(file), ep, where)
    return _Cells(str(file), values, lines, lambda i, column: _csv_cell(body, header, i, column))


def _line_offset(text: str, line: int) -> int:
    """Where line ``line + 1`` (1-based) of ``text`` starts."""
    at = 0
    for _ in range(line):
        at = text.find("\n", at) + 1
        if at == 0:
            return len(text)
    return at


def _fast_csv(text: str, header: list[str], header_line: int):
    """(columns, line of each row) of the body ``text`` (the lines after the header), read by pandas when
    it holds only digits, points, signs, exponents, commas and blanks and every row has one field per
    column; (None, None) otherwise (the row-by-row reader then finds what is wrong)."""
    import pandas as pd

    body = np.frombuffer(text.encode(), dtype=np.uint8)
    if not _PLAIN[body].all():
        return None, None
    ends = np.flatnonzero(body == ord("\n"))
    starts = np.concatenate([[0], ends + 1])
    ends = np.append(ends, len(body))
    content = (body != ord(" ")) & (body != ord("\t")) & (body != ord("\n"))
    filled = np.zeros(len(starts), dtype=bool)
    nonempty = np.flatnonzero(ends > starts)
    if len(nonempty):  # each span runs to the next non-empty line: the rest of it is newlines, not content
        filled[nonempty] = np.logical_or.reduceat(content, starts[nonempty])
    del content
    rows = starts[filled]
    commas = np.add.reduceat(body == ord(","), rows, dtype=np.int64) if len(rows) else rows
    if (commas != len(header) - 1).any():  # (each span runs to the next row: blank lines hold no comma)
        return None, None
    try:
        frame = pd.read_csv(io.StringIO(text), header=None, names=header, dtype=np.float64,
                            skipinitialspace=True, index_col=False, skip_blank_lines=True)
    except (ValueError, pd.errors.ParserWarning, csv.Error):
        return None, None
    values = {c: frame[c].to_numpy(dtype=np.float64) for c in PICKS_COLUMNS}
    lines = np.flatnonzero(filled) + header_line + 1
    if len(lines) != len(frame) or not all(np.isfinite(v).all() for v in values.values()):
        return None, None
    return values, lines


def _strict_csv(body: str, header: list[str], header_line: int, file: str, ep: int, where: str):
    """(columns, line of each row) read row by row, or a ConfigError at the first row or cell that is not a
    number in plain decimal notation."""
    allowed = _allowed(ep)
    cells: list[list[float]] = [[] for _ in header]
    lines: list[int] = []
    for line, record in _records(body, file, header_line + 1, where):
        if not any(f.strip() for f in record):
            continue
        if len(record) != len(header):
            raise ConfigError(f"{file}:{line}: a row of {len(record)} field{'s' * (len(record) != 1)}; the header "
                              f"has {len(header)} columns ({', '.join(header)})", where)
        for k, (column, field) in enumerate(zip(header, record)):
            cell = field.strip()
            value = float(cell) if _NUMBER.fullmatch(cell) else math.nan
            if not math.isfinite(value):
                found = "is empty" if not cell else f"is {shorten(cell)}"
                raise ConfigError(f"{file}:{line}: {column} {found}; allowed: {allowed[column]}", where)
            cells[k].append(value)
        lines.append(line)
        if len(lines) > MAX_PICKS_ROWS:
            break
    return {c: np.array(v, dtype=np.float64) for c, v in zip(header, cells)}, np.array(lines, dtype=np.int64)


def _csv_cell(body: str, header: list[str], i: int, column: str) -> str:
    """The text of row ``i`` (non-blank records counted from 0) in ``column``."""
    k = header.index(column)
    seen = -1
    for _, record in _records(body, "", 1, ""):
        if any(f.strip() for f in record):
            seen += 1
            if seen == i:
                return record[k].strip()
    return ""


def _read_parquet(file: Path, ep: int, where: str) -> _Cells:
    """The cells of a Parquet routing file: integer or floating columns, no nulls."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    _opened(lambda: inputfile.regular_file(file, MAX_PICKS_BYTES, "routing matrix file"), where)
    try:
        rows = pq.read_metadata(file).num_rows
    except (pa.ArrowException, OSError, ValueError):
        rows = 0  # damaged: read_parquet says how
    if rows > MAX_PICKS_ROWS:
        raise ConfigError(f"{file}: {rows:,} rows; a routing matrix file has at most {MAX_PICKS_ROWS:,}", where)
    table = _opened(lambda: inputfile.read_parquet(file, MAX_PICKS_BYTES, "routing matrix file"), where)
    names = [n for n in table.column_names if not _PANDAS_INDEX.fullmatch(n)]
    _check_header(names, str(file), where)
    values = {}
    for column in PICKS_COLUMNS:
        array = table.column(column)
        kind = array.type
        if not (pa.types.is_integer(kind) or pa.types.is_floating(kind)):
            raise ConfigError(f"{file}: column {column!r} holds {kind} values; allowed: numbers", where)
        if array.null_count:
            row = int(np.flatnonzero(array.is_null().to_numpy(zero_copy_only=False))[0])
            raise ConfigError(f"{file}: row {row + 1:,}: {column} is empty (null); allowed: {_allowed(ep)[column]}",
                              where)
        values[column] = array.to_numpy().astype(np.float64)
    return _Cells(str(file), values, None, lambda i, column: table.column(column)[i].as_py())


def _allowed(ep: int) -> dict[str, str]:
    """What each column may hold, in words."""
    rank = f"an EP rank from 0 to {ep - 1}"
    return {"step": "an integer from 0 to 2**53", "src": rank, "dst": rank,
            "tokens": "a whole number of (token, expert) pairs from 0 to 2**53"}


def _picks_steps(cells: _Cells, ep: int, where: str) -> PickSteps:
    """The checked rows of ``cells`` as :class:`PickSteps` (see :func:`read_picks` for the checks)."""
    n = len(cells.values["step"])
    if n == 0:
        raise ConfigError(f"{cells.file}: no rows (only a header); give a row per (step, src, dst)", where)
    if n > MAX_PICKS_ROWS:
        raise ConfigError(f"{cells.file}: more than {MAX_PICKS_ROWS:,} rows", where)
    _check_values(cells, ep, where)
    step, src, dst = (cells.values[c].astype(np.int64) for c in ("step", "src", "dst"))
    tokens = cells.values["tokens"]
    ascending = np.diff(step) > 0
    ascending |= (np.diff(step) == 0) & ((np.diff(src) > 0) | ((np.diff(src) == 0) & (np.diff(dst) >= 0)))
    order = np.arange(n) if ascending.all() else np.lexsort((dst, src, step))  # perf: files come sorted
    key = (step[order], src[order], dst[order])
    same = (key[0][1:] == key[0][:-1]) & (key[1][1:] == key[1][:-1]) & (key[2][1:] == key[2][:-1])
    if same.any():
        r = int(order[1:][same].min())
        first = int(np.flatnonzero((step == step[r]) & (src == src[r]) & (dst == dst[r]))[0])
        raise ConfigError(f"{cells.place(r)}: step {step[r]}, src {src[r]}, dst {dst[r]} again (first on "
                          f"{cells.label(first)}); give each (step, src, dst) once", where)
    _check_ranks(cells.file, np.union1d(src, dst), ep, where)
    steps, at = np.unique(key[0], return_index=True)
    ptr = np.append(at, n)
    moves = np.add.reduceat(((src[order] != dst[order]) & (tokens[order] > 0)).astype(np.int64), at)
    idle = np.flatnonzero(moves == 0)
    if len(idle):
        row = int(np.minimum.reduceat(order, at)[idle].min())
        raise ConfigError(f"{cells.place(row)}: step {step[row]} sends no token between two EP ranks (each of its "
                          "rows has tokens 0 or src = dst): its all-to-all would have nothing to send; give it a pair "
                          "with src != dst and tokens > 0, or leave the step out", where)
    return PickSteps(ep, steps, ptr, order, src[order], dst[order], tokens[order], cells.file, cells.lines)


def _check_values(cells: _Cells, ep: int, where: str) -> None:
    """ConfigError at the first row (in file order) holding a value its column does not allow."""
    allowed = _allowed(ep)
    high = {"step": MAX_PICKS_VALUE, "src": ep - 1, "dst": ep - 1, "tokens": MAX_PICKS_VALUE}
    first, column = None, None
    for c in PICKS_COLUMNS:
        v = cells.values[c]
        with np.errstate(invalid="ignore"):
            bad = ~((v >= 0) & (v <= high[c]) & (v == np.floor(v)))
        hit = np.flatnonzero(bad)
        if len(hit) and (first is None or hit[0] < first):
            first, column = int(hit[0]), c
    if first is not None:
        raise ConfigError(f"{cells.place(first)}: {column} is {shorten(cells.raw(first, column))}; allowed: "
                          f"{allowed[column]}", where)


def _check_ranks(file: str, seen: np.ndarray, ep: int, where: str) -> None:
    """Every EP rank is in some row: each holds tokens and experts, so a file that never names some was
    written for a smaller group."""
    if len(seen) == ep:
        return
    absent = np.setdiff1d(np.arange(ep), seen)
    shown = ", ".join(map(str, absent[:6].tolist())) + (f" ... ({len(absent)} ranks)" if len(absent) > 6 else "")
    raise ConfigError(f"{file}: EP rank{'s' * (len(absent) > 1)} {shown} appear{'s' * (len(absent) == 1)} in no row, "
                      f"as src or dst; the file names ranks up to {int(seen.max())} but this job's ep is {ep} (was it "
                      "written for a smaller EP group?)", where)


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
    files: Sequence[np.ndarray] | None = None  #: ``routing: file``: the matrices per step (:class:`PickSteps`)
    _popularity: dict[int, np.ndarray] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.files, PickSteps):  # CORRECTNESS: a rank cannot route more pairs than its tokens make
            self.files.check_sent(self.tokens * self.spec.top_k, "workload.moe.routing.path")

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
