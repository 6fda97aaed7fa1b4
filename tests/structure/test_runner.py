"""The analysis graph's runner (runner.py) and the declared graph (graph.py): declaration checks, order,
concurrency, values dropped after their last reader, errors, and one report whatever the thread count."""

from __future__ import annotations

import json
import threading

import pytest
from conftest import built_scenario

from nsys_llm_explainer.graph import STEPS
from nsys_llm_explainer.pipeline import analyze_path
from nsys_llm_explainer.report import Report
from nsys_llm_explainer.runner import GraphError, Step, check_graph, run_graph


def test_a_value_read_before_it_is_made_or_made_twice_is_refused():
    with pytest.raises(GraphError, match="reads \\['b'\\]"):
        check_graph([Step("s", lambda b: b, ("b",), ("c",))], {"a"})
    with pytest.raises(GraphError, match="makes \\['a'\\]"):
        check_graph([Step("s", lambda: 1, (), ("a",))], {"a"})
    with pytest.raises(GraphError, match="window"):
        check_graph([Step("s", lambda: 1, (), ("b",), "partial")], set())


def test_one_worker_runs_the_declaration_order_and_keeps_only_what_is_asked():
    order = []

    def b(a):
        order.append("b")
        return 10 + a

    def c(a):
        order.append("c")
        return 100 + a

    def d(b, c):
        order.append("d")
        return b + c

    steps = [Step("b", b, ("a",), ("b",)), Step("c", c, ("a",), ("c",)), Step("d", d, ("b", "c"), ("d",))]
    values, timings = run_graph(steps, {"a": 1}, keep=("d",), workers=1)
    assert order == ["b", "c", "d"]
    assert values == {"d": 112}                     # b = 11, c = 101: dropped, not kept
    assert set(timings) == {"b", "c", "d"}


def test_a_step_no_kept_value_needs_does_not_run():
    """Only the steps that make a kept value, or a value such a step reads, run."""
    ran = []

    def a():
        ran.append("a")
        return 1

    def c(a):
        ran.append("c")
        return 3

    def d():
        ran.append("d")
        return 4

    steps = [Step("a", a, (), ("a",)), Step("b", lambda a: a + 1, ("a",), ("b",)), Step("c", c, ("a",), ("c",)),
             Step("d", d, (), ("d",))]
    values, timings = run_graph(steps, {}, keep=("b",))
    assert values == {"b": 2} and ran == ["a"] and set(timings) == {"a", "b"}
    values, _ = run_graph(steps, {}, keep=("b", "c"))
    assert values == {"b": 2, "c": 3} and "d" not in ran


def test_inputs_are_bound_by_parameter_name_and_checked_against_the_signature():
    """A value reaches the parameter of its name whatever the order the step lists its inputs in; a step whose
    inputs are not its function's parameters (a renamed parameter, a missing or extra input, two inputs swapped for
    a function that names them otherwise) is refused before anything runs."""
    def diff(kernels, steady_kernels):
        return kernels - steady_kernels

    values, _ = run_graph([Step("d", diff, ("steady_kernels", "kernels"), ("d",))],
                          {"kernels": 10, "steady_kernels": 3}, keep=("d",))
    assert values == {"d": 7}
    given = {"kernels", "steady_kernels"}
    for inputs in (("kernels",), ("kernels", "steady_kernels", "extra"), ("kernels", "steady")):
        with pytest.raises(GraphError, match="do not match the parameters"):
            check_graph([Step("d", diff, inputs, ("d",))], given | {"extra", "steady"})

    def with_default(kernels, top=20):
        return kernels

    check_graph([Step("t", with_default, ("kernels",), ("t",))], given)      # a defaulted parameter may be left out
    with pytest.raises(GraphError, match="do not match"):
        check_graph([Step("s", lambda *values: 0, ("kernels",), ("s",))], given)   # nothing to bind by name


def test_every_step_of_the_report_graph_binds_by_name():
    from nsys_llm_explainer.graph import STEPS
    from nsys_llm_explainer.runner import parameter_mismatch

    every = [e for s in STEPS for e in (s,) + s.each]
    assert len(every) > len(STEPS)
    assert [(s.label, parameter_mismatch(s)) for s in every if parameter_mismatch(s)] == []


def test_two_workers_run_independent_steps_at_the_same_time():
    """Each step waits for the other to have started: only two threads at once can finish them."""
    started = {n: threading.Event() for n in "xy"}

    def meet(me, other):
        def fn():
            started[me].set()
            assert started[other].wait(10), f"{other} never ran beside {me}"
            return me
        return fn

    steps = [Step("x", meet("x", "y"), (), ("x",)), Step("y", meet("y", "x"), (), ("y",))]
    values, _ = run_graph(steps, {}, keep=("x", "y"), workers=2)
    assert values == {"x": "x", "y": "y"}


@pytest.mark.parametrize("workers", [1, 2])
def test_a_failing_step_raises_its_own_error_and_later_steps_do_not_run(workers):
    ran = []

    def boom():
        raise ValueError("step failed")

    steps = [Step("boom", boom, (), ("a",)), Step("after", lambda a: ran.append(a), ("a",), ("b",))]
    with pytest.raises(ValueError, match="step failed"):
        run_graph(steps, {}, keep=("b",), workers=workers)
    assert ran == []


def test_a_step_returning_the_wrong_number_of_values_is_an_error():
    with pytest.raises(GraphError, match="returned 3 values for 2 outputs"):
        run_graph([Step("s", lambda: (1, 2, 3), (), ("a", "b"))], {}, keep=("a",), workers=1)


def test_the_declared_graph_is_consistent_and_makes_every_report_field():
    given = {"model", "options", "display_path"}
    check_graph(STEPS, given)
    made = given | {o for s in STEPS for o in s.makes}
    fields = set(Report.__dataclass_fields__) - {"tool_version", "timings_s"}
    assert fields <= made, fields - made
    labels = [s.label for s in STEPS]
    assert len(labels) == len(set(labels))


def test_one_report_whatever_the_thread_count(tmp_path):
    p = tmp_path / "t.sqlite"
    built_scenario("step_sync_host_work", str(p))
    one, two = (analyze_path(str(p), workers=w).to_dict() for w in (1, 2))
    one.pop("timings_s"), two.pop("timings_s")
    assert one == two and one["findings"]


def test_every_report_field_reaches_report_json(tmp_path):
    """A Report field serialize.py does not place itself is written under its own name (a new analysis needs
    no serializer line); the placed ones are the known set."""
    import dataclasses

    from nsys_llm_explainer.serialize import MOVED, NOT_CARRIED, ORDER, report_dict

    p = tmp_path / "t.sqlite"
    built_scenario("launch_bound", str(p))
    rep = analyze_path(str(p), workers=1)
    names = {f.name for f in dataclasses.fields(Report)}
    placed = (set(ORDER) | set(MOVED) | NOT_CARRIED) & names
    d0 = report_dict(rep)
    for n in names - placed:                      # the unplaced ones: under their own name, as their to_dict()
        assert n in d0 and d0[n] == json.loads(json.dumps(getattr(rep, n).to_dict())), n

    @dataclasses.dataclass(frozen=True)
    class Extra:
        n: int

        def to_dict(self):
            return {"n": self.n}

    Wider = dataclasses.make_dataclass("Wider", [("extra_section", Extra, dataclasses.field(default=Extra(0)))],
                                       bases=(Report,), frozen=True)
    wide = Wider(**{f.name: getattr(rep, f.name) for f in dataclasses.fields(Report)}, extra_section=Extra(7))
    d = report_dict(wide)
    assert d["extra_section"] == {"n": 7}
    assert {k: v for k, v in d.items() if k != "extra_section"} == report_dict(rep)


def test_the_api_takes_workers_and_words_a_bad_value_with_the_keyword(tmp_path):
    import nsys_llm_explainer as nle
    from nsys_llm_explainer.errors import OptionError

    p = tmp_path / "t.sqlite"
    built_scenario("launch_bound", str(p))
    a, b = nle.analyze(str(p), workers=1).to_dict(), nle.analyze(str(p), workers=3).to_dict()
    a.pop("timings_s"), b.pop("timings_s")
    assert a == b
    for bad in (0, "2", 1.5):
        with pytest.raises(OptionError, match="^workers "):
            nle.analyze(str(p), workers=bad)


def test_a_toy_analysis_is_one_function_and_one_graph_entry(tmp_path):
    """Adding an analysis: write a function whose parameters name the graph values it reads, append one Step.
    Here: the share of the steady window's idle time that the largest idle cause holds, on the demo trace."""
    from nsys_llm_explainer.graph import STEPS
    from nsys_llm_explainer.options import Options
    from nsys_llm_explainer.pipeline import load_model

    def largest_cause_share(idle_causes, window):      # the toy analysis: reads two graph values by name
        top = idle_causes.totals[0]
        return top.kind, round(100.0 * top.ns / sum(d.idle_ns for d in idle_causes.devices), 3), window.method

    p = tmp_path / "demo.sqlite"
    built_scenario("demo", str(p))
    steps = STEPS + (Step("largest cause", largest_cause_share, ("idle_causes", "window"), ("largest_cause",)),)
    values, timings = run_graph(steps, {"model": load_model(str(p)), "options": Options(), "display_path": None},
                                keep=("largest_cause", "idle_causes", "window"), workers=1)
    causes = values["idle_causes"]
    idle = sum(d.idle_ns for d in causes.devices)
    assert values["largest_cause"] == (causes.totals[0].kind, round(100.0 * causes.totals[0].ns / idle, 3),
                                       values["window"].method)
    # only the steps the kept values need ran: the device pass (idle causes) and its inputs, not the kernel traits
    assert {"largest cause", "device pass", "device: gpu time", "window"} <= set(timings)
    assert not {"kernel traits", "findings", "timeline file"} & set(timings)


def test_a_toy_per_device_analysis_is_one_function_and_one_entry(tmp_path):
    """A per-device analysis: a function of the device's ``timeline`` and ``device_causes`` (and graph values by
    name), one entry in the device pass's ``each`` steps; its value is the tuple of its results over the devices.
    Checked against SQL counts of the export: kernels and copies per device (the whole capture is the window)."""
    import dataclasses
    import sqlite3

    from nsys_llm_explainer.graph import DEVICE_STEPS
    from nsys_llm_explainer.options import Options
    from nsys_llm_explainer.pipeline import load_model

    def device_counts(timeline, device_causes, options):     # the toy: reads its device's values and one graph value
        assert device_causes.device_id == timeline.device_id
        return timeline.device_id, timeline.kernel_count, int(timeline.copy_start.shape[0]), options.top

    p = tmp_path / "copies.sqlite"
    built_scenario("copies_only_gpu", str(p))
    toy = Step("device: toy counts", device_counts, ("timeline", "device_causes", "options"), ("toy",))
    steps = tuple(dataclasses.replace(s, each=s.each + (toy,)) if s.each == DEVICE_STEPS else s for s in STEPS)
    values, timings = run_graph(steps, {"model": load_model(str(p)), "options": Options(window=(0, 2**62), top=7),
                                        "display_path": None}, keep=("toy",), workers=2)
    with sqlite3.connect(f"file:{p}?mode=ro", uri=True) as c:
        kernels = dict(c.execute("SELECT deviceId, COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL GROUP BY deviceId"))
        copies = dict(c.execute("SELECT deviceId, COUNT(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY GROUP BY deviceId"))
    devices = sorted(set(kernels) | set(copies))
    assert len(devices) == 2
    assert values["toy"] == tuple((d, kernels.get(d, 0), copies.get(d, 0), 7) for d in devices)
    assert "device: toy counts" in timings


def test_each_steps_are_checked_like_steps():
    """A step run for each item is bound by name, reads only graph values and its item's, and makes one value."""
    def outer(each):
        for i in (1, 2, 3):
            each(item=i)
        return "done"

    def square(item, base):
        return base + item * item

    def ok(label="outer", inner=("inner", square, ("item", "base"), ("sq",))):
        return Step(label, outer, (), ("done",), each=(Step(*inner),), item_values=("item",))

    values, _ = run_graph([Step("base", lambda: 10, (), ("base",)), ok()], {}, keep=("sq", "done"))
    assert values == {"sq": (11, 14, 19), "done": "done"}
    with pytest.raises(GraphError, match="reads \\['base'\\]"):
        check_graph([ok()], set())
    with pytest.raises(GraphError, match="no parameter \\['other'\\]"):
        check_graph([ok(inner=("inner", square, ("item", "base", "other"), ("sq",)))], {"base"})
    with pytest.raises(GraphError, match="must make one value"):
        check_graph([ok(inner=("inner", square, ("item", "base"), ("sq", "sq2")))], {"base"})
    with pytest.raises(GraphError, match="makes \\['sq'\\]"):
        check_graph([ok()], {"base", "sq"})


def test_a_single_report_skips_what_only_compare_and_cluster_read(tmp_path):
    """The command line's single report runs without the values only a comparison or a cluster reads (not in
    report.json): its report.json is the same, those steps do not run, and the fields are None."""
    from nsys_llm_explainer.pipeline import COMPARE_ONLY
    from nsys_llm_explainer.serialize import NOT_CARRIED

    p = tmp_path / "warmup.sqlite"
    built_scenario("warmup_tail", str(p))           # a trimmed window: steady categories are computed anew
    full, single = analyze_path(str(p)), analyze_path(str(p), extras=False)
    a, b = full.to_dict(), single.to_dict()
    a.pop("timings_s"), b.pop("timings_s")
    assert a == b and a["window"]["method"] == "auto"
    assert all((getattr(full, n) is None) == (n in COMPARE_ONLY) for n in NOT_CARRIED)   # COMPARE_ONLY: compare=True
    assert all(getattr(single, n) is None for n in NOT_CARRIED)
    skipped = {"steady categories", "steady kernel starts", "clock", "nccl series"}
    assert skipped <= set(full.timings_s) and not skipped & set(single.timings_s)
