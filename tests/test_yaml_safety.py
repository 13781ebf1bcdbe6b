"""Hostile and broken YAML files give one short ConfigError each: no traceback, no hang, no memory blow-up."""

import doctest
import os
import textwrap
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from netsim import config, errors
from netsim.config import yamlread
from netsim.cli import app
from netsim.config import (SWEEP_KEYS, MAX_YAML_BYTES, MAX_YAML_DEPTH, MAX_YAML_NODES, load_experiment, load_spec, locate,
                           parse_assignment, parse_spec)
from netsim.errors import ConfigError, shorten
from tests.test_cli import small_spec

runner = CliRunner()


@pytest.fixture(params=["libyaml", "python"])
def parser(request, monkeypatch):
    """Every limit holds with the pure-Python parser as well as with libyaml (used when PyYAML has it)."""
    if request.param == "python":
        monkeypatch.setattr(yamlread, "_PARSER", yaml.SafeLoader)
    elif not getattr(yaml, "__with_libyaml__", False):
        pytest.skip("PyYAML built without libyaml")
    return request.param


def write(tmp_path: Path, text: str | bytes, name: str = "exp.yaml") -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def refused(path: Path) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_experiment(path)
    assert info.value.file == str(path)
    assert len(str(info.value)) < 2048
    return info.value


def laughs(levels: int = 9) -> str:
    """The classic alias bomb: 10**levels strings from a few hundred bytes."""
    text = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    names = "abcdefghijklmnopqrstuvwxyz"
    for i in range(1, levels):
        text += f"{names[i]}: &{names[i]} [" + ", ".join([f"*{names[i - 1]}"] * 10) + "]\n"
    return text


# ---------------------------------------------------------------------------- structure limits


def test_billion_laughs_is_refused_in_milliseconds(tmp_path, parser):
    path = write(tmp_path, laughs())
    start = time.perf_counter()
    error = refused(path)
    assert time.perf_counter() - start < 0.5
    assert f"aliases expand past the limit of {MAX_YAML_NODES:,} YAML nodes" in error.message
    # e: &e [*d, ...] on line 5: d stands for 11,111 nodes, the eighth use of it crosses 100,000
    assert error.line == 5 and error.message.endswith("alias *d alone stands for 11,111")


@pytest.mark.parametrize("opening, closing", [("[", "]"), ("{k: ", "}")], ids=["lists", "mappings"])
def test_nesting_is_refused_one_level_past_the_limit(tmp_path, parser, opening, closing):
    def doc(levels):  # the top-level mapping is level 1
        return "x: " + opening * (levels - 1) + "1" * (opening == "{k: ") + closing * (levels - 1) + "\n"
    assert load_experiment(write(tmp_path, doc(MAX_YAML_DEPTH))).base["x"]
    error = refused(write(tmp_path, doc(MAX_YAML_DEPTH + 1)))
    assert error.message == f"mappings and lists nested deeper than {MAX_YAML_DEPTH} levels"
    assert error.line == 1


def test_block_nesting_names_the_line_where_it_goes_too_deep(tmp_path, parser):
    text = "".join("  " * i + f"k{i}:\n" for i in range(MAX_YAML_DEPTH + 5))
    error = refused(write(tmp_path, text))
    assert "nested deeper than 64 levels" in error.message and error.line == MAX_YAML_DEPTH + 1


def test_a_million_open_brackets_are_refused_fast(tmp_path, parser):
    path = write(tmp_path, "x: " + "[" * 1_000_000)
    start = time.perf_counter()
    error = refused(path)
    assert time.perf_counter() - start < 5
    assert error.message == f"mappings and lists nested deeper than {MAX_YAML_DEPTH} levels"


def test_an_alias_counts_the_nesting_it_stands_for(tmp_path, parser):
    anchor = "a: &a " + "[" * 40 + "]" * 40 + "\n"  # 40 levels below the top-level mapping
    ok = anchor + "b: " + "[" * 23 + "*a" + "]" * 23 + "\n"  # 1 + 23 + 40 = 64
    assert load_experiment(write(tmp_path, ok)).base["b"]
    error = refused(write(tmp_path, anchor + "b: " + "[" * 24 + "*a" + "]" * 24 + "\n"))
    assert error.message == "mappings and lists nested deeper than 64 levels once alias *a is expanded"
    assert error.line == 2


@pytest.mark.parametrize("text", ["x: &a [1, *a]\n", "x: &a {b: *a}\n", "x: &a [[[*a]]]\n"],
                         ids=["list", "mapping", "deep"])
def test_a_recursive_alias_is_refused(tmp_path, parser, text):
    error = refused(write(tmp_path, text))
    assert error.message == "recursive alias *a: it stands for a mapping or list that contains it"
    assert error.line == 1


def test_the_node_limit_is_exact_and_counts_aliases_as_copies(tmp_path, parser, monkeypatch):
    monkeypatch.setattr(yamlread, "MAX_YAML_NODES", 20)
    # nodes: the top mapping, key x, the list, n items
    assert load_experiment(write(tmp_path, "x: [" + ", ".join(["1"] * 17) + "]\n")).base["x"] == [1] * 17
    error = refused(write(tmp_path, "x: [" + ", ".join(["1"] * 18) + "]\n"))
    assert error.message == "more than 20 YAML nodes (keys, values, mappings and lists)"
    # the mapping, keys a and b, the anchored list (4 nodes) and b's list: 8; each alias of l adds 4
    assert load_experiment(write(tmp_path, "a: &l [1, 2, 3]\nb: [*l, *l, *l]\n")).base["b"] == [[1, 2, 3]] * 3
    error = refused(write(tmp_path, "a: &l [1, 2, 3]\nb: [*l, *l, *l,\n  *l]\n"))
    assert error.message == ("aliases expand past the limit of 20 YAML nodes (keys, values, mappings and "
                             "lists): alias *l alone stands for 4") and error.line == 3
    assert load_experiment(write(tmp_path, "a: &l [1, 2, 3]\nb: [*l, *l]\nc: 1\nd: 2\n")).base["d"] == 2
    error = refused(write(tmp_path, "a: &l [1, 2, 3]\nb: [*l, *l]\nc: 1\nd: 2\ne: 3\n"))
    assert error.message == ("more than 20 YAML nodes (keys, values, mappings and lists) once its aliases "
                             "are expanded")
    assert error.line == 5


# ---------------------------------------------------------------------------- keys, aliases, merges


def test_a_duplicate_key_names_both_lines(tmp_path, parser):
    error = refused(write(tmp_path, "name: a\nseed: 1\nname: b\n"))
    assert (error.message, error.path, error.line) == ("duplicate key 'name' (first at line 1)", "name", 3)
    error = refused(write(tmp_path, "topology:\n  spines: 4\n  leaves: 2\n  spines: 8\n"))
    assert (error.message, error.path, error.line) == ("duplicate key 'spines' (first at line 2)",
                                                       "topology.spines", 4)
    error = refused(write(tmp_path, "jobs:\n  - {name: a, start: 1, start: 2}\n"))
    assert error.path == "jobs.0.start" and error.line == 2


def test_merge_keys_work_and_an_explicit_key_overrides_a_merged_one(tmp_path, parser):
    text = ("base: &base {leaves: 2, spines: 4}\n"
            "topology:\n  <<: *base\n  spines: 8\n"
            "other: {<<: [*base, {hosts: 1}], leaves: 3}\n")
    data = load_experiment(write(tmp_path, text)).base
    assert data["topology"] == {"leaves": 2, "spines": 8}
    assert data["other"] == {"leaves": 3, "spines": 4, "hosts": 1}
    error = refused(write(tmp_path, "base: &b {x: 1}\nt: {<<: *b, <<: *b}\n"))
    assert error.message.startswith("duplicate key '<<'")


def test_every_mapping_and_list_is_its_own_object(tmp_path, parser):
    text = "w: &w {type: collective, sizes: [1, 2]}\njobs: [{workload: *w}, {workload: *w}, *w]\n"
    data = load_experiment(write(tmp_path, text)).base
    first, second, third = (j.get("workload", j) for j in data["jobs"])
    assert first == second == third == data["w"]
    assert len({id(first), id(second), id(third), id(data["w"])}) == 4
    assert len({id(first["sizes"]), id(second["sizes"]), id(third["sizes"])}) == 3


@pytest.mark.parametrize("merged, explicit, line", [("4", "four", 3), ("four", "8", 3), ("four", None, 2)],
                         ids=["override is bad", "override hides a bad merged value", "merged value is bad"])
def test_errors_point_at_the_value_that_is_used(tmp_path, parser, merged, explicit, line):
    spec = small_spec()
    topology = spec.pop("topology")
    del topology["spines"]
    text = (f"topology:\n  <<: &base {{spines: {merged}}}\n"
            + (f"  spines: {explicit}\n" if explicit else "  # merged only\n")
            + textwrap.indent(yaml.safe_dump(topology, sort_keys=False), "  ")
            + yaml.safe_dump(spec, sort_keys=False))
    path = write(tmp_path, text)
    if explicit == "8":
        assert load_spec(path).topology.spines == 8
        return
    with pytest.raises(ConfigError) as info:
        load_spec(path)
    assert info.value.path == "topology.spines" and info.value.line == line, str(info.value)


# ---------------------------------------------------------------------------- bytes and files


def test_not_utf8_names_the_line_and_byte(tmp_path):
    error = refused(write(tmp_path, b"name: a\nseed: 1\ndescription: caf\xe9\n"))
    assert error.message == "not UTF-8 text: byte 0xe9 at line 3 (byte 33 of the file); save it as UTF-8"
    assert error.line == 3
    error = refused(write(tmp_path, b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"))
    assert error.message.startswith("not UTF-8 text: byte 0x89 at line 1 (byte 1 of the file)")


def test_a_bom_is_fine_and_a_nul_is_binary(tmp_path):
    assert load_experiment(write(tmp_path, b"\xef\xbb\xbfname: a\n")).base == {"name": "a"}
    error = refused(write(tmp_path, b"name: a\nseed: 1\x00\x00\n"))
    assert error.message == "a NUL character at line 2: binary data, not text" and error.line == 2


def test_control_characters_are_refused_with_their_line(tmp_path, parser):
    error = refused(write(tmp_path, "name: a\ndescription: x\x07y\n"))
    assert error.message == "control character U+0007 at line 2: not YAML text" and error.line == 2


EMPTY = ["", "   \n\n\t\n", "# only a comment\n", "---\n", "null\n"]


@pytest.mark.parametrize("text", EMPTY, ids=["empty", "whitespace", "comment", "document marker", "null"])
def test_an_empty_file_is_one_error(tmp_path, parser, text):
    error = refused(write(tmp_path, text))
    assert error.message == ("the file is empty (no YAML data): expected a mapping of experiment keys "
                             "(name, topology, workload, ...)")


@pytest.mark.parametrize("text, got", [("hello\n", "a str ('hello')"), ("- 1\n- 2\n", "a list ([1, 2])"),
                                       ("42\n", "a int (42)"),
                                       ("\n\n[" + "1, " * 100 + "1]\n", "a list ([1, 1,")])
def test_a_file_that_is_not_a_mapping_says_what_it_holds(tmp_path, parser, text, got):
    error = refused(write(tmp_path, text))
    assert error.message.startswith("expected a mapping of experiment keys (name, topology, workload, ...) "
                                    f"at the top level, got {got}")
    assert error.line == text.count("\n", 0, len(text) - len(text.lstrip("\n"))) + 1


def test_file_size_limit(tmp_path):
    error = refused(write(tmp_path, "#" * MAX_YAML_BYTES + "\n"))
    assert error.message == f"file too large: {MAX_YAML_BYTES + 1:,} bytes (limit {MAX_YAML_BYTES:,} bytes)"


def test_missing_directory_and_fifo(tmp_path):
    assert refused(tmp_path / "nope.yaml").message == "file not found"
    (tmp_path / "dir.yaml").mkdir()
    assert refused(tmp_path / "dir.yaml").message == "a directory, not a file"
    os.mkfifo(tmp_path / "fifo.yaml")  # opening a FIFO for reading would wait for a writer forever
    assert refused(tmp_path / "fifo.yaml").message == "not a regular file (a device, pipe or socket)"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_unreadable_file(tmp_path):
    path = write(tmp_path, "name: a\n")
    path.chmod(0)
    assert refused(path).message == "cannot read: Permission denied"


@pytest.mark.parametrize("text, words", [
    ("seed: " + "9" * 5000 + "\n", "cannot read '99999"),
    ("seed: 2024-13-45\n", "cannot read '2024-13-45': month must be in 1..12"),
    ("x: !!python/object/apply:os.system [ls]\n", "could not determine a constructor for the tag"),
    ("a: 1\n---\nb: 2\n", "expected a single document in the stream but found another document"),
    ("a: *nope\n", "found undefined alias 'nope'"),
    ("name: x\ntopology: [1, 2\n", "YAML syntax error"),
])
def test_malformed_yaml_is_one_located_error(tmp_path, parser, text, words):
    error = refused(write(tmp_path, text))
    assert words in error.message and error.line is not None and len(error.message) < 300


# ---------------------------------------------------------------------------- referenced files


@pytest.mark.parametrize("key", ["topology", "workload"])
def test_referenced_files_are_read_with_the_same_care(tmp_path, key):
    spec = small_spec(**{key: "part.yaml"})
    exp = write(tmp_path, yaml.safe_dump(spec))
    part = tmp_path / "part.yaml"
    cases = [(b"type: x\n\xff\n", "not UTF-8 text: byte 0xff at line 2", str(part)),
             (laughs().encode(), "aliases expand past the limit", str(part)),
             (b"", "the file is empty (no YAML data): expected a mapping with a 'type'", str(part)),
             (b"- 1\n", "at the top level, got a list", str(part)),
             (f"{key}: [1]\n".encode(), f"expected a mapping with a 'type' (a {key}) under '{key}'",
              str(part))]
    for content, words, file in cases:
        part.write_bytes(content)
        with pytest.raises(ConfigError) as info:
            load_spec(exp)
        assert words in info.value.message and info.value.file == file, str(info.value)
    part.unlink()
    part.mkdir()
    with pytest.raises(ConfigError) as info:
        load_spec(exp)
    assert f"{key} file 'part.yaml' is a directory" in info.value.message and info.value.file == str(exp)
    for name in ("", " ", "a\0b", "x" * 5000):
        exp.write_text(yaml.safe_dump(small_spec(**{key: name})))
        with pytest.raises(ConfigError) as info:
            load_spec(exp)
        assert info.value.path == key and len(str(info.value)) < 2048


# ---------------------------------------------------------------------------- command-line values


def test_set_and_param_values_go_through_the_same_limits(tmp_path):
    assert parse_assignment("workload.size=[1, 2]", "--set") == ("workload.size", [1, 2])
    assert parse_assignment("routing=ecmp", "--set") == ("routing", "ecmp")
    assert parse_assignment("x=[1, 2", "--set") == ("x", "[1, 2")  # not YAML: stays text
    assert parse_assignment("x=", "--set") == ("x", "")
    for value, words in [(laughs().replace("\n", ", ").join("{}"), "aliases expand past the limit"),
                         ("[" * 100 + "]" * 100, "nested deeper than 64 levels"),
                         ("&a [*a]", "recursive alias *a"),
                         ("{a: 1, a: 2}", "duplicate key 'a' (first at line 1)"),
                         ("x" * (MAX_YAML_BYTES + 1), "value too long")]:
        with pytest.raises(ConfigError) as info:
            parse_assignment(f"workload.size={value}", "--set")
        assert info.value.message.startswith("--set workload.size: ") and words in info.value.message
    exp = write(tmp_path, yaml.safe_dump(small_spec()))
    with pytest.raises(ConfigError) as info:
        load_experiment(exp, params=["workload.size=[1MiB, &a [*a]]"])
    assert info.value.message.startswith("--param workload.size: recursive alias")


def test_locate_survives_any_file(tmp_path):
    error = ConfigError("bad", "topology.spines")
    for content in (laughs(), "x: " + "[" * 100, b"\xff", "a: 1\na: 2\n", ""):
        path = write(tmp_path, content)
        located = locate(error, path)
        assert (located.file, located.line, located.message) == (str(path), None, "bad")
    located = locate(error, write(tmp_path, "x: 1\ntopology:\n  spines: 4\n"))
    assert located.line == 3


def test_the_cli_prints_one_short_line(tmp_path):
    for text in (laughs(), "name: a\nname: b\n", "x: " + "[" * 1000):
        path = write(tmp_path, text)
        result = runner.invoke(app, ["validate", str(path)])
        assert result.exit_code == 2 and "Traceback" not in result.output
        assert len(result.output.encode()) < 2048, result.output
        assert len(result.output.strip().splitlines()) <= 2, result.output


# ---------------------------------------------------------------------------- properties


SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8)
JSONISH = st.recursive(SCALARS, lambda children: st.lists(children, max_size=4)
                       | st.dictionaries(st.text(max_size=6), children, max_size=4), max_leaves=30)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.dictionaries(st.text(max_size=6).filter(lambda k: k not in SWEEP_KEYS), JSONISH, min_size=1, max_size=5))
def test_reading_agrees_with_safe_load(tmp_path, data):
    """Any mapping reads as YAML itself reads it (keys that declare a sweep are checked as sweeps)."""
    text = yaml.safe_dump(data, allow_unicode=True)
    path = write(tmp_path, text)
    assert load_experiment(path).base == {k: v for k, v in yaml.safe_load(text).items()}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=st.binary(max_size=200) | st.text(st.sampled_from("ab:-[]{}&*!<>|'\"#\n \t,?%@`\x00\x85\u2028é"),
                                              max_size=80).map(str.encode))
def test_any_bytes_give_data_or_one_config_error(tmp_path, raw):
    path = write(tmp_path, raw)
    try:
        load_experiment(path)
    except ConfigError as exc:
        assert exc.file == str(path) and len(str(exc)) < 2048


# ---------------------------------------------------------------------------- messages


def test_shorten_elides_long_values():
    assert shorten("x" * 60) == repr("x" * 60)
    assert shorten("x" * 61) == "'" + "x" * 60 + "...' (1 more characters)"
    assert shorten("y" * 12_000_000).endswith("...' (11,999,940 more characters)")
    text = repr(list(range(100)))
    assert shorten(list(range(100))) == text[:60] + f"... ({len(text) - 60:,} more characters)"
    assert shorten(10**10_000) == "an integer of 10,001 digits"
    assert shorten(-(10**99)) == "an integer of 100 digits"
    assert doctest.testmod(errors).failed == 0


def test_config_error_text_is_capped():
    error = ConfigError("m" * 12_000_000, "a.b", "f.yaml", 3)
    text = str(error)
    assert len(text) <= errors.MAX_MESSAGE_CHARS and text.startswith("f.yaml:3: a.b: mmm")
    elided = 12_000_000 + len("f.yaml:3: a.b: ") - (errors.MAX_MESSAGE_CHARS - 40)
    assert text.endswith(f"... ({elided:,} more characters)")
    assert str(ConfigError("short", "a")) == "a: short"


# ---------------------------------------------------------------------------- ranges, names, ranks


def invalid(spec: dict) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        parse_spec(spec)
    assert len(str(info.value)) < 2048
    return info.value


def training_spec(**model) -> dict:
    model = {"layers": 2, "hidden": 64, "heads": 4, "seq_len": 128, "vocab": 1024, "global_batch": 8, **model}
    return small_spec(workload={"type": "training", "model": model})


def test_seed_is_a_63_bit_integer():
    assert parse_spec(small_spec(seed=2**63 - 1)).seed == 2**63 - 1
    for seed in (2**63, 2**64, -1, True, 1.0, "1"):
        error = invalid(small_spec(seed=seed))
        assert error.path == "seed"
        assert error.message == ("expected a valid integer from 0 to 9,223,372,036,854,775,807, "
                                 f"got {shorten(seed)}")


def test_seeds_lists_and_the_base_seed_of_repeats_are_checked_when_loading(tmp_path):
    def load(spec, **kw):
        return load_experiment(write(tmp_path, yaml.safe_dump(spec, sort_keys=False)), **kw)
    assert load({**small_spec(), "seeds": [0, 2**63 - 1]}).seeds == [0, 2**63 - 1]
    with pytest.raises(ConfigError) as info:
        load({**small_spec(), "seeds": [1, 2**63]})
    assert info.value.path == "seeds" and "integers from 0 to 2**63 - 1" in info.value.message
    assert load({**small_spec(seed=2**63 - 1), "repeats": 2}).repeats == 2
    with pytest.raises(ConfigError) as info:
        load({**small_spec(seed=2**64), "repeats": 2})
    assert (info.value.path, info.value.line) == ("seed", 2)
    assert info.value.message == ("the base seed of repeats must be an integer from 0 to 2**63 - 1, got "
                                  "18446744073709551616")
    with pytest.raises(ConfigError) as info:
        load({**small_spec(), "repeats": 2, "variants": [{"name": "a"}, {"name": "b", "seed": -1}]})
    assert info.value.path == "variants.1.seed"
    with pytest.raises(ConfigError) as info:
        load({**small_spec(), "repeats": 2}, overrides=[f"seed={2**63}"])
    assert info.value.message.endswith("got 9223372036854775808 (from --set)")


RANGES = [  # (dotted key, largest accepted or None, first refused, words of the message)
    ("topology.spines", 10**6, 10**6 + 1, "a valid integer from 1 to 1,000,000"),
    ("topology.leaves", None, 0, "a valid integer from 1 to 1,000,000, got 0"),
    ("topology.gpus_per_host", None, 1025, "a valid integer from 1 to 1,024"),
    ("topology.uplink.count", 1024, 1025, "a valid integer from 1 to 1,024"),
    ("workload.channels", 64, 65, "auto (NCCL's count from the hosts' NICs) or an integer from 1 to 64"),
    ("workload.iterations", 10**6, 10**6 + 1, "a valid integer from 1 to 1,000,000"),
    ("workload.ranks", 16, 2_000_001, "a number of ranks from 2 to 2,000,000"),
    ("workload.size", 2**60, 2**60 + 2**10, "a size from 1B to 2**60 bytes (1024PiB)"),
    ("workload.size", "1B", "0.5B", "a size from 1B to 2**60 bytes (1024PiB), got '0.5B'"),
    ("workload.chunk", "1024PiB", "1025PiB", "a size from 1B"),
    ("topology.nic.bandwidth", "8Pbps", "0bps", "a bandwidth above 0, at most 1e15 B/s (8Pbps), got '0bps'"),
    ("topology.uplink.bandwidth", 1e15, 1.01e15, "a bandwidth above 0, at most 1e15 B/s"),
    ("topology.nic.latency", "1000000s", "1000001s", "a time from 0 to 1e6 s"),
    ("engine.completion_tolerance", "1us", "1.1us", "a time from 0 to 1us, got '1.1us'"),
    ("engine.link_series", 0, -1, "a valid integer from 0 to 100,000"),
]


@pytest.mark.parametrize("key, largest, refused_value, words", RANGES, ids=[f"{r[0]}={r[2]}" for r in RANGES])
def test_numbers_out_of_range_name_the_path_and_the_range(key, largest, refused_value, words):
    if largest is not None:
        parse_spec(small_spec(**{key: largest}))
    error = invalid(small_spec(**{key: refused_value}))
    assert error.path == key and f"expected {words}" in error.message, str(error)


@pytest.mark.parametrize("model, path, words", [
    ({"layers": 10_001}, "workload.model.layers", "a valid integer from 1 to 10,000"),
    ({"hidden": 10**8 + 64}, "workload.model.hidden", "a valid integer from 1 to 100,000,000"),
    ({"dtype_bytes": 17}, "workload.model.dtype_bytes", "a valid integer from 1 to 16"),
    ({"global_batch": 100_001}, "workload.model.global_batch",
     "100,001 micro-batches per iteration (global_batch / (micro_batch x dp)); allowed: 1 to 100,000"),
])
def test_training_counts_are_bounded(model, path, words):
    parse_spec(training_spec(global_batch=100_000))
    error = invalid(training_spec(**model))
    assert error.path == path and words in error.message, str(error)


def test_fault_and_job_times_are_bounded():
    error = invalid(small_spec(faults=[{"at": "2e6s", "link": "leaf0-spine0", "action": "down"}]))
    assert error.path == "faults.0.at" and "a time from 0 to 1e6 s" in error.message


GOOD_NAMES = ["a", "_x", "0", "a.b-c_d", "x" * 100, "run.v2"]
BAD_NAMES = [".", "..", "~", "/x", "a/b", "../up", "a\nb", "a\tb", "a\x00b", "-x", ".hidden", "", "x" * 101,
             "é", "a b", 5]


def multi_cluster(name) -> dict:
    cluster = {"name": name, "leaves": 1, "spines": 1, "hosts_per_leaf": 2, "gpus_per_host": 2,
               "nics_per_host": 1, "nic": {"bandwidth": "100Gbps"}, "uplink": {"bandwidth": "100Gbps"},
               "intra_host": {"bandwidth": "100GB/s"}}
    return small_spec(topology={"type": "multi_cluster", "clusters": [cluster],
                                "ethernet": {"bandwidth": "10Gbps"}})


def jobs(name) -> dict:
    spec = small_spec()
    return {**spec, "workload": None, "jobs": [{"name": name, "workload": {**spec["workload"], "ranks": 2}}]}


NAMED = {"name": (lambda n: small_spec(name=n), "name"), "jobs.0.name": (jobs, "jobs.0.name"),
         "cluster": (multi_cluster, "topology.clusters.0.name")}


@pytest.mark.parametrize("where", sorted(NAMED))
def test_names_are_names_never_paths(where):
    make, path = NAMED[where]
    for name in GOOD_NAMES:
        parse_spec({k: v for k, v in make(name).items() if v is not None})
    for name in BAD_NAMES:
        spec = {k: v for k, v in make(name).items() if v is not None or k != "workload"}
        error = invalid(spec)
        assert error.path == path, (name, str(error))
        assert error.message == f"expected {config.NAME_RULE}, got {shorten(name)}", str(error)
    assert "a letter, digit or underscore, then letters, digits, '_', '.' or '-', at most 100" \
        in config.NAME_RULE


def test_variant_names_follow_the_same_rule(tmp_path):
    for name in GOOD_NAMES:
        spec = {**small_spec(), "variants": [{"name": name}]}
        assert load_experiment(write(tmp_path, yaml.safe_dump(spec))).variants[0]["name"] == name
    for name in BAD_NAMES:
        spec = {**small_spec(), "variants": [{"name": name}]}
        with pytest.raises(ConfigError) as info:
            load_experiment(write(tmp_path, yaml.safe_dump(spec)))
        assert info.value.path == "variants.0.name" and config.NAME_RULE in info.value.message, name
    assert parse_spec(small_spec(variant="")).variant == "" and parse_spec(small_spec(variant="v.1")).variant == "v.1"
    for name in [n for n in BAD_NAMES if n != ""]:
        assert invalid(small_spec(variant=name)).path == "variant"


# ---------------------------------------------------------------------------- collectives of one rank


def one_gpu() -> dict:
    return {"type": "leaf_spine", "leaves": 1, "spines": 1, "hosts_per_leaf": 1, "gpus_per_host": 1,
            "nics_per_host": 1, "nic": {"bandwidth": "100Gbps"}, "uplink": {"bandwidth": "100Gbps"},
            "intra_host": {"bandwidth": "100GB/s"}}


def sequence(*steps, ranks=None) -> dict:
    workload = {"type": "sequence", "steps": [{"op": "allreduce", "algorithm": "ring", "size": "1MiB", **s}
                                              if "steps" not in s else s for s in steps]}
    return small_spec(workload={**workload, **({"ranks": ranks} if ranks is not None else {})})


@pytest.mark.parametrize("spec, path", [
    (small_spec(**{"workload.ranks": 1}), "workload.ranks"),
    (sequence({"ranks": 1}), "workload.steps.0.ranks"),
    (sequence({"ranks": [3]}), "workload.steps.0.ranks"),
    (sequence({}, ranks=1), "workload.ranks"),
    ({**jobs("j"), "jobs": [{"name": "j", "workload": {**small_spec()["workload"], "ranks": 1}}]},
     "jobs.0.workload.ranks"),
], ids=["ranks 1", "step selects 1", "step lists 1", "sequence places 1", "job of 1"])
def test_a_collective_of_one_rank_is_refused_when_validating(spec, path):
    error = invalid({k: v for k, v in spec.items() if v is not None})
    assert (error.path, error.message) == (path, "a collective needs at least 2 ranks, got 1")


@pytest.mark.parametrize("spec, path", [
    (sequence({"ranks": "0:1"}), "workload.steps.0.ranks"),
    (sequence({"ranks": "0:2"}, {"ranks": "5::100"}), "workload.steps.1.ranks"),
    (sequence({"type": "sequence", "ranks": "3:4",
               "steps": [{"op": "allgather", "algorithm": "ring", "size": "1MiB"}]}),
     "workload.steps.0.ranks"),
    (small_spec(topology=one_gpu()), "workload"),
    (sequence({}, {}, ranks=None) | {"topology": one_gpu()}, "workload"),
], ids=["slice of 1", "second step", "nested sequence", "one-GPU fabric", "one-GPU fabric, sequence"])
def test_a_communicator_of_one_rank_is_refused_before_the_run(tmp_path, spec, path):
    from netsim.experiment.run import prepare
    with pytest.raises(ConfigError) as info:
        prepare(parse_spec(spec))
    assert (info.value.path, info.value.message) == (path, "a collective needs at least 2 ranks, got 1")
    result = runner.invoke(app, ["validate", str(write(tmp_path, yaml.safe_dump(spec)))])
    assert result.exit_code == 2, result.output
    assert "a collective needs at least 2 ranks, got 1" in result.output, result.output


def test_two_ranks_are_enough():
    from netsim.experiment.run import prepare
    prepare(parse_spec(small_spec(**{"workload.ranks": 2})))
    prepare(parse_spec(sequence({"ranks": "0:2"}, {"ranks": [3, 1]})))


# ---------------------------------------------------------------------------- short messages


HUGE = {"string": "z" * 1_000_000, "list": list(range(50_000)), "integer": 10**5000}


@pytest.mark.parametrize("kind", sorted(HUGE))
@pytest.mark.parametrize("key", ["name", "seed", "routing", "workload.size", "workload.op", "topology.spines",
                                 "topology.nic", "workload.ranks", "engine", "workload.algorithm",
                                 "topology.colour"])
def test_messages_embedding_huge_values_stay_short(key, kind):
    error = invalid(small_spec(**{key: HUGE[kind]}))
    assert len(str(error)) <= errors.MAX_MESSAGE_CHARS, str(error)
    assert error.path.startswith(key.split(".")[0]), str(error)


# ---------------------------------------------------------------------------- routes CSV files


@pytest.fixture
def four_gpus():
    from tests.conftest import make_leaf_spine
    return make_leaf_spine()


def routes_error(topology, path: Path) -> str:
    from netsim.routing.table import read_routes
    with pytest.raises(ConfigError) as info:
        read_routes(path, topology)
    assert info.value.path == "routing.file" and len(str(info.value)) < 2048
    return info.value.message


CSV = "src,dst,channel,path_index\n"


@pytest.mark.parametrize("content, words", [
    (b"src,dst,channel,path_index\n0,2,0,0\n\xff\xfe\n",
     "cannot read routes file {f}:3: not UTF-8 text: byte 0xff at line 3 (byte 36 of the file)"),
    (b"src,dst,channel,path_index\n0,2,0\x00,0\n",
     "cannot read routes file {f}:2: a NUL character at line 2"),
    (b"\x89PNG\r\n\x1a\n", "cannot read routes file {f}:1: not UTF-8 text"),
    (b"", "{f}: the file is empty; expected a header like src,dst,channel,path"),
    (b" \n\t\n", "{f}: the file is empty"),
    ((CSV + "0,2,0,0\n0,2,0,0,7\n").encode(),
     "{f}: not a valid CSV: Error tokenizing data. C error: Expected 4 fields in line 3, saw 5"),
    ((CSV + "# c\n0,2,0,0,7\n0,2,1,0,7\n").encode(), "{f}:3: more fields than the header has columns"),
    ((CSV + "x,2,0,0\n").encode(),
     "{f}:2: src must be a non-negative integer (at most 2,147,483,647), got 'x'"),
    ((CSV + "0,2," + "9" * 5000 + ",0\n").encode(), "{f}:2: channel must be a non-negative integer (at most "
                                                    "2,147,483,647), got '99999"),
    ((CSV + f"0,2,{2**31},0\n").encode(), "{f}:2: channel must be a non-negative integer"),
    ((CSV + "0,2,0,0\r0,2,1,9\r").encode(), "{f}:3: path_index 9 out of range"),
    ((CSV + "0,2,0,0\n\x0c\n0,2,1,9\n").encode(), "{f}: row 3: path_index 9 out of range"),
    (b"\xef\xbb\xbf" + (CSV + "0,2,0,9\n").encode(), "{f}:2: path_index 9 out of range"),
    (("src,dst,channel,path_index,fraction\n0,2,0,0," + "1" * 5000 + "\n").encode(),
     "{f}:2: fraction must be a number in (0, 1], got '11111"),
    (("src,dst,channel,path\n0,2,0," + "leaf0 " * 2000 + "\n").encode(), "{f}:2: no path leaf0>leaf0>"),
    ((",".join(f"c{i}" for i in range(500)) + "\n").encode(), "{f}:1: unknown columns 'c0', 'c1'"),
])
def test_a_bad_routes_file_is_one_error_naming_the_file_and_line(four_gpus, tmp_path, content, words):
    path = tmp_path / "routes.csv"
    path.write_bytes(content)
    message = routes_error(four_gpus, path)
    assert message.startswith(words.format(f=path)), message


def test_routes_files_that_are_not_files(four_gpus, tmp_path, monkeypatch):
    from netsim.routing import table
    assert routes_error(four_gpus, tmp_path / "nope.csv") == f"routes file {tmp_path / 'nope.csv'} not found"
    assert routes_error(four_gpus, tmp_path) == f"cannot read routes file {tmp_path}: a directory, not a file"
    os.mkfifo(tmp_path / "fifo.csv")
    assert routes_error(four_gpus, tmp_path / "fifo.csv").endswith(
        "not a regular file (a device, pipe or socket)")
    monkeypatch.setattr(table, "MAX_ROUTES_BYTES", 100)
    path = write(tmp_path, CSV + "0,2,0,0\n" * 20, "big.csv")
    assert routes_error(four_gpus, path) == (f"cannot read routes file {path}: file too large: 187 bytes "
                                             "(limit 100 bytes)")


def test_a_routes_file_name_with_a_nul_is_an_error_not_a_traceback(tmp_path):
    from netsim.experiment.run import prepare
    spec = parse_spec(small_spec(routing={"type": "table", "file": "a\0b.csv"}))
    with pytest.raises(ConfigError) as info:
        prepare(spec)
    assert info.value.path == "routing.file" and "embedded null byte" in info.value.message


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.text(st.sampled_from("0123 ,\n\r#-.e9xleafspin\"'\t"), max_size=60))
def test_any_routes_text_gives_routes_or_one_config_error(four_gpus, tmp_path, body):
    from netsim.routing.table import read_routes
    path = tmp_path / "r.csv"
    path.write_text("src,dst,channel,path,fraction\n" + body)
    try:
        routes = read_routes(path, four_gpus)
    except ConfigError as exc:
        assert exc.path == "routing.file" and len(str(exc)) < 2048
    else:
        assert routes and all(abs(sum(f for _, f in r) - 1) < 1e-9 for r in routes.values())


def test_a_sweep_expanding_past_the_run_limit_is_refused_when_loading(tmp_path):
    axes = {"workload.size": ["1MiB", "2MiB", "4MiB", "8MiB", "16MiB"], "seed": list(range(100)),
            "topology.spines": [1, 2, 3, 4]}
    spec = {**small_spec(), "sweep": axes, "variants": [{"name": f"v{i}"} for i in range(50)]}
    assert len(load_experiment(write(tmp_path, yaml.safe_dump(spec))).variants) == 50  # 100,000 runs
    spec["variants"].append({"name": "one-more"})
    with pytest.raises(ConfigError) as info:
        load_experiment(write(tmp_path, yaml.safe_dump(spec)))
    assert info.value.path == "sweep"
    assert info.value.message == ("the sweep expands to 102,000 runs (variants x grid points x seeds); "
                                  "at most 100,000")
    start = time.perf_counter()
    with pytest.raises(ConfigError) as info:
        load_experiment(write(tmp_path, yaml.safe_dump({**small_spec(), "repeats": 100_000,
                                                        "sweep": {"topology.spines": [1, 2]}})))
    assert "200,000 runs" in info.value.message and time.perf_counter() - start < 1
