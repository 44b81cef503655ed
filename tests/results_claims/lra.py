"""``lra.md``: the Long Range Arena runs at their real lengths, ListOps at the CPU scale, and Pathfinder at 16×16."""

import math

from .common import LISTOPS, Claim, cell, data, table_verdicts

PAGE = "lra.md"


LRA = "train_cpu_lra"


def _lra(task: str) -> dict[str, dict]:
    return {r["attention"]: r for r in data(LRA) if r["task"] == task}


def _lra_others_predict_one_class(task: str) -> bool:
    return len({r["eval"]["accuracy"] for a, r in _lra(task).items() if a != "linformer"}) == 1


def _lra_ratio(task: str, attention: str, field: str, over: str = "positive") -> float:
    return _lra(task)[attention][field] / _lra(task)[over][field]


PATHFINDER = "train_cpu_pathfinder_cpu_exact"

CLAIMS = [
    Claim(
        PAGE,
        "Every ListOps run but Linformer's predicts one class ({:.1f}% here; the most frequent class of these 128 "
        "expressions is 23%, and Linformer's {:.1f}% is below it), and every Pathfinder run but Linformer's predicts "
        "one class ({:.1f}%, the share of that label in the 512 images; Linformer's {:.0f} of 512 is one image fewer).",
        lambda: (
            100 * _lra("listops_lra")["exact"]["eval"]["accuracy"],
            100 * _lra("listops_lra")["linformer"]["eval"]["accuracy"],
            100 * _lra("pathfinder32")["exact"]["eval"]["accuracy"],
            512 * _lra("pathfinder32")["linformer"]["eval"]["accuracy"],
        ),
        lambda: (
            all(_lra_others_predict_one_class(task) for task in ("listops_lra", "pathfinder32"))
            and _lra("listops_lra")["linformer"]["eval"]["accuracy"] < 0.23
            and round(512 * _lra("pathfinder32")["exact"]["eval"]["accuracy"])
            - round(512 * _lra("pathfinder32")["linformer"]["eval"]["accuracy"])
            == 1
        ),
    ),
    Claim(
        PAGE,
        "at L = 2000 exact attention's step takes {:.1f}x the time of positive features and {:.0f}x their memory "
        "({:.2f} GiB against {:.0f} MiB), at L = 1024 {:.1f}x and {:.0f}x; elu is cheapest, Taylor's 1 + d + "
        "d(d+1)/2 = 153 features cost {:.1f}–{:.1f}x the time of positive's 64.",
        lambda: (
            _lra_ratio("listops_lra", "exact", "step_time_s"),
            _lra_ratio("listops_lra", "exact", "step_memory_bytes"),
            _lra("listops_lra")["exact"]["step_memory_bytes"] / 2**30,
            _lra("listops_lra")["positive"]["step_memory_bytes"] / 2**20,
            _lra_ratio("pathfinder32", "exact", "step_time_s"),
            _lra_ratio("pathfinder32", "exact", "step_memory_bytes"),
            *sorted(_lra_ratio(task, "taylor", "step_time_s") for task in ("listops_lra", "pathfinder32")),
        ),
        lambda: all(
            min(_lra(task).values(), key=lambda r: r["step_time_s"])["attention"] == "elu"
            for task in ("listops_lra", "pathfinder32")
        ),
    ),
    Claim(
        PAGE,
        "reaches {} test accuracy over three seeds, against 17% for the most frequent answer",
        lambda: (cell(LISTOPS, "test accuracy", attention="exact"),),
    ),
    Claim(
        PAGE,
        "none of the {} other kinds is separated from exact attention by three seeds, in either direction, so this "
        "comparison orders none of them.",
        lambda: (len(data(LISTOPS)) - 1,),
        lambda: set(table_verdicts(LISTOPS).values()) == {"-", "not separated (3 seeds)"},
    ),
    Claim(
        PAGE,
        "{:.1f}% test accuracy ({:.1f}% on validation; validation loss {:.3f} against ln 2 = {:.3f}, {:.0f} minutes at "
        "{:.2f} s a step), against 50% for either answer.",
        lambda: (
            100 * data(PATHFINDER)["test"]["accuracy"],
            100 * data(PATHFINDER)["validation"]["accuracy"],
            data(PATHFINDER)["validation"]["loss"],
            math.log(2),
            data(PATHFINDER)["steps"] * data(PATHFINDER)["step_time_s"] / 60,
            data(PATHFINDER)["step_time_s"],
        ),
        lambda: data(PATHFINDER)["validation"]["loss"] > 0.98 * math.log(2),
    ),
]

SETUP = (
    "(1% of an epoch; LRA: 4 layers of width 512, 5000 steps of 32)",
    "(4% of an epoch; LRA: 200 epochs of 512)",
    "Evaluated on 128 validation expressions and 512 validation images.",
    "(ListOps 36%, Pathfinder-32 71% for the vanilla Transformer in the LRA paper)",
    "depth at most 3, at most 4 arguments per operator, 8–32 tokens (mean 17)",
    "(3.2 epochs of the 20k training expressions",
    "20k training images",
    "(2.4 epochs,",
    "near ln 2",
    "the same generator restricted",
    "the real-length runs above",
    "the cost table above",
    "Pathfinder-32",
)
