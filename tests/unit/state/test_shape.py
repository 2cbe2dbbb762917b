"""A facts dict's shape: read once per path order, and the same views as reading every path."""

from __future__ import annotations

from plumb.aggregator.recipes.node import NodeView
from plumb.aggregator.state.shape import shape
from plumb.aggregator.state.stack import stack_facts
from plumb.aggregator.state.views import gpu_views
from plumb.facts import Reading


def ok(value) -> Reading:
    return Reading("ok", value)


def node(uuid0: str) -> dict[str, Reading]:
    """Two GPUs, a GPU 3 whose GPU 2 is missing (not counted: no `gpus[2].index`), two CUDA
    runtimes and a sysctl, in the order an agent's flatten gives them."""
    return {
        "driver.driver_version": ok("570.133.20"),
        "gpus[0].index": ok(0),
        "gpus[0].name": ok("NVIDIA H100 80GB HBM3"),
        "gpus[0].uuid": ok(uuid0),
        "gpus[0].xids[0].code": ok(79),
        "gpus[1].index": ok(1),
        "gpus[1].name": ok("NVIDIA H100 80GB HBM3"),
        "gpus[3].index": ok(3),
        "cuda.runtimes[0].version": ok("12.8"),
        "cuda.runtimes[0].path": ok("/usr/local/cuda-12.8/lib64/libcudart.so.12"),
        "cuda.runtimes[1].version": ok("12.4"),
        "host.sysctls[0].name": ok("vm.max_map_count"),
    }


def test_nodes_with_the_same_paths_share_one_shape() -> None:
    a, b = node("GPU-aaaa"), node("GPU-bbbb")
    assert shape(a) is shape(b)
    reordered = dict(reversed(list(a.items())))
    assert shape(reordered) is not shape(a)


def test_gpu_views_group_the_counted_gpus_leaves() -> None:
    a = node("GPU-aaaa")
    views = gpu_views(a)
    assert [v.index for v in views] == [0, 1]  # GPU 3 follows a gap: not counted
    assert views[0].readings == {
        "index": ok(0),
        "name": ok("NVIDIA H100 80GB HBM3"),
        "uuid": ok("GPU-aaaa"),
        "xids[0].code": ok(79),
    }
    assert views[1].readings == {"index": ok(1), "name": ok("NVIDIA H100 80GB HBM3")}
    # The shape is shared; each node's views hold its own readings.
    assert gpu_views(node("GPU-bbbb"))[0].value("uuid") == "GPU-bbbb"


def test_stack_facts_select_by_path_with_indexes_as_brackets() -> None:
    a = node("GPU-aaaa")
    wanted = ["driver.driver_version", "gpus[].name", "cuda.runtimes[].version"]
    assert list(stack_facts(a, wanted)) == [
        "driver.driver_version",
        "gpus[0].name",
        "gpus[1].name",
        "cuda.runtimes[0].version",
        "cuda.runtimes[1].version",
    ]
    # A dict of the same paths gets the selection's own readings, not the first node's.
    b = node("GPU-bbbb") | {"driver.driver_version": ok("580.65.06")}
    assert stack_facts(b, wanted)["driver.driver_version"] == ok("580.65.06")


def test_the_recipe_view_reads_repeated_entries_through_the_shape() -> None:
    view = NodeView.from_facts(node("GPU-aaaa"))
    assert view.get("cuda.runtime_version") == ("12.4", "12.8")
    assert view.get("gpu.product") == ("NVIDIA H100 80GB HBM3",)
    assert view.get("gpu.count") == ("2",)
    assert view.one("driver.version") == "570.133.20"
