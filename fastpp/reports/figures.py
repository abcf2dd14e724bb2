"""The report's sections, built as plain Plotly figure dicts (no plotly import: the page's
plotly.js draws them) and the timelines' compact columns.

A section is ``{"title", "text", "items"}``; an item is a ``plot`` (a figure), a ``timeline``,
a ``choice`` among items (a drop-down; only the chosen one is drawn), a ``group`` of items
drawn one under another, a ``table`` (sortable and filterable in the page) or ``text``.
"""

from __future__ import annotations

import math

import numpy as np

from ..checks import ScheduleError
from ..costs import FIELDS, Costs
from ..generators.registry import MEMORY_REFERENCE, SCHEDULES, build_schedule
from ..ops import Op
from ..simulate import simulate
from ..sweeps import best_within_budget, pareto_front
from . import timeline

# sweep columns that describe the costs: a report shows one setting of them at a time
COST_COLUMNS = (*FIELDS, "costs")
HEAT = (("bubble_ratio", "bubble ratio", "min", ".1%"),
        ("peak_activations_max", "peak activation memory (units of M_B)", "min", ".3g"),
        ("throughput", "throughput (microbatches per unit time)", "max", ".4g"))
PALETTE = ["#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3",
           "#8C8C8C", "#CCB974", "#64B5CD", "#1F77B4", "#FF7F0E", "#2CA02C", "#D62728",
           "#9467BD", "#8C564B"]


def _clean(values) -> list:
    """A column as JSON-ready values: NaN and infinities as None."""
    out = []
    for v in values.tolist() if hasattr(values, "tolist") else values:
        out.append(None if isinstance(v, float) and not math.isfinite(v) else v)
    return out


def plot(data, layout) -> dict:
    return {"type": "plot", "figure": {"data": data, "layout": layout}}


def table(df, columns, missing: dict | None = None) -> dict:
    """``columns``: ``(column, heading, format)``; formats ``d``, ``,d``, ``%``, ``.Ng``,
    ``str``, ``bool``; a column may be scaled by giving ``(column, scale)``. ``missing``: per
    heading, what an empty (NaN or infinite) cell says."""
    cols, rows = [], []
    for col, heading, fmt in columns:
        name, scale = col if isinstance(col, tuple) else (col, None)
        if name not in df:
            continue
        values = df[name] if scale is None else df[name] / scale
        cols.append({"name": heading, "format": fmt, "missing": (missing or {}).get(heading, "")})
        rows.append(_clean(values))
    return {"type": "table", "columns": cols, "rows": [list(r) for r in zip(*rows, strict=True)]}


# ---------------------------------------------------------------------------- sweeps


def _one_setting(df, setting=None):
    """The rows of one cost setting: ``setting``'s value of a cost column it names, else the
    middle value of every cost column that varies (the main job's summary takes the middle
    latency too, or its --summary-comm), and its description."""
    view, chosen = df, []
    for col, value in (setting or {}).items():
        # one number (a list was compared element-wise, pandas' ValueError; False was 0)
        number = isinstance(value, int | float | np.number) and not isinstance(
            value, bool | np.bool_)
        if not number or col not in COST_COLUMNS or col not in view or not (
                view[col] == value).any():
            held = sorted(set(view[col])) if col in view else []
            raise ScheduleError(f"setting must name a cost column of the sweep and one of its "
                                f"values (got {col}={value!r}; the sweep's {col}: "
                                f"{held[:10] if held else 'none'})")
        view = view[view[col] == value]
        chosen.append(f"{col}={value:g}" if isinstance(value, float) else f"{col}={value}")
    if "reason" in view:  # a sweep run with invalid="keep"
        view = view[view["reason"].fillna("") == ""]
    for col in COST_COLUMNS:
        if col in view and view[col].nunique(dropna=True) > 1:
            values = sorted(view[col].dropna().unique())
            middle = values[len(values) // 2]
            view = view[view[col] == middle]
            chosen.append(f"{col}={middle:g}" if isinstance(middle, float) else
                          f"{col}={middle}")
    return view, ", ".join(chosen)


def _grid(count: int, cols: int, gap: float = 0.06):
    """Domains of a ``rows x cols`` grid of panels, the first row on top."""
    rows = -(-count // cols)
    width, height = (1 - gap * (cols - 1)) / cols, (1 - gap * 1.6 * (rows - 1)) / rows
    for q in range(count):
        r, c = divmod(q, cols)
        x0, y1 = c * (width + gap), 1 - r * (height + gap * 1.6)
        yield [round(x0, 4), round(x0 + width, 4)], [round(y1 - height, 4), round(y1, 4)]


def heatmaps(view, metric, title, better, fmt) -> dict:
    """One heat map per schedule of ``metric`` by ``p`` and ``n/p``, the best over ``m``."""
    data = view.assign(n_per_p=view["n"] / view["p"])
    names = list(dict.fromkeys(data["schedule"]))
    ps = sorted(data["p"].unique())
    ks = sorted(data["n_per_p"].unique())
    pick = "idxmin" if better == "min" else "idxmax"
    best = data.loc[getattr(data.groupby(["schedule", "p", "n"])[metric], pick)()]
    cols = min(4, len(names))
    traces, layout = [], {"height": 230 * -(-len(names) // cols) + 80,
                          "margin": {"t": 60, "l": 50, "r": 30, "b": 40}, "annotations": [],
                          "title": {"text": f"{title}, best over m"},
                          "coloraxis": {"colorscale": "Viridis",
                                        "reversescale": better == "min",
                                        "colorbar": {"title": {"text": metric}}}}
    for q, (name, (xd, yd)) in enumerate(zip(names, _grid(len(names), cols), strict=True)):
        mine = best[best["schedule"] == name]
        # the three columns read, not itertuples (pandas builds a Series per column per call)
        cell = {(p, k): (value, int(m), int(n)) for p, k, value, m, n in zip(
            mine["p"], mine["n_per_p"], _clean(mine[metric]), mine["m"], mine["n"],
            strict=True)}
        z = [[cell[p, k][0] if (p, k) in cell else None for k in ks] for p in ps]
        custom = [[list(cell[p, k][1:]) if (p, k) in cell else [None, None] for k in ks]
                  for p in ps]
        axis = "" if q == 0 else str(q + 1)
        traces.append({"type": "heatmap", "x": [f"{k:g}" for k in ks],
                       "y": [str(p) for p in ps], "z": z, "customdata": custom,
                       "coloraxis": "coloraxis", "xaxis": f"x{axis}", "yaxis": f"y{axis}",
                       "hovertemplate": f"<b>{name}</b><br>p=%{{y}}, n=%{{customdata[1]}} "
                       f"(n/p=%{{x}}), best m=%{{customdata[0]}}<br>{metric} "
                       f"%{{z:{fmt}}}<extra></extra>"})
        layout[f"xaxis{axis}"] = {"domain": xd, "anchor": f"y{axis}", "type": "category",
                                  "title": {"text": "n / p"}, "tickfont": {"size": 9}}
        layout[f"yaxis{axis}"] = {"domain": yd, "anchor": f"x{axis}", "type": "category",
                                  "title": {"text": "p"}, "tickfont": {"size": 9}}
        layout["annotations"].append({"text": name, "x": sum(xd) / 2, "y": yd[1],
                                      "xref": "paper", "yref": "paper", "showarrow": False,
                                      "yanchor": "bottom", "font": {"size": 12}})
    return plot(traces, layout)


def pareto(group, p, n) -> dict:
    """Every point of one ``(p, n)`` by peak memory and bubble, per schedule, and the front."""
    traces = []
    for i, (name, rows) in enumerate(group.groupby("schedule", sort=False)):
        traces.append({"type": "scatter", "mode": "markers", "name": name,
                       "x": _clean(rows["peak_activations_max"]),
                       "y": _clean(rows["bubble_ratio"]),
                       "customdata": [[int(m), mk] for m, mk in zip(rows["m"], rows["makespan"],
                                                                    strict=True)],
                       "marker": {"color": PALETTE[i % len(PALETTE)], "size": 9},
                       "hovertemplate": f"<b>{name}</b> m=%{{customdata[0]}}<br>peak "
                       "%{x:.4g}, bubble %{y:.2%}<br>makespan %{customdata[1]:.5g}"
                       "<extra></extra>"})
    front = pareto_front(group)
    traces.append({"type": "scatter", "mode": "lines", "name": "Pareto front",
                   "x": _clean(front["peak_activations_max"]), "y": _clean(front["bubble_ratio"]),
                   "line": {"shape": "hv", "color": "black", "width": 1.5},
                   "text": [f"{s} m={m}" for s, m in zip(front["schedule"], front["m"],
                                                          strict=True)],
                   "hovertemplate": "front: %{text}<br>peak %{x:.4g}, bubble %{y:.2%}"
                   "<extra></extra>"})
    return plot(traces, {"title": {"text": f"bubble against peak activation memory, p={p}, "
                                           f"n={n}"}, "height": 460,
                         "xaxis": {"title": {"text": "peak activation memory (units of M_B)"}},
                         "yaxis": {"title": {"text": "bubble ratio"}, "tickformat": ".0%"},
                         "hovermode": "closest"})


def _value(row, name, default):
    value = getattr(row, name, default)
    return default if value is None or (isinstance(value, float) and math.isnan(value)) \
        else value


# the most ops a drawn timeline has: past it no one reads the picture, and p = 10**6 rows
# re-simulated for it ran for minutes and would have made a page of gigabytes
TIMELINE_OPS = 100_000
CDF_POINTS = 1_000  # the most steps of a drawn CDF line (variability_sections)


def resimulate(row):
    """The timeline of a sweep row: its schedule built and simulated with the row's costs
    (the table holds only reductions), or None when the row's costs were arrays or its
    timeline has more than ``TIMELINE_OPS`` ops."""
    if "costs" in row._fields or not {"f", "b"} <= set(row._fields):
        return None  # a costs= list, or a table without its costs: no arrays to rebuild
    spec = SCHEDULES.get(row.schedule)
    if spec is None or 3 * int(row.p) * int(row.n) * int(row.m) > TIMELINE_OPS:
        return None
    group = _value(row, "G", None) if "G" in spec.options else None  # (NaN: the default)
    options = {"G": int(group)} if group is not None else {}
    # a sweep row has every cost column; NaN (i, fb, bandwidth not given) keeps the default
    given = {name: _value(row, name, None) for name in FIELDS}
    try:
        sched = build_schedule(row.schedule, int(row.p), int(row.n), int(row.m), **options)
        # (f and b as the row holds them: a NaN there is refused by name, not left out)
        costs = Costs(row.f, row.b, **{k: v for k, v in given.items()
                                       if v is not None and k not in ("f", "b")})
    except ScheduleError as err:  # the table's row, not only the value, is what to fix
        point = f"point {row.point}, " if "point" in row._fields else ""
        raise type(err)(f"a sweep row must hold a point fastpp can simulate (the row of "
                        f"{point}{row.schedule}, p={row.p}, n={row.n}, m={row.m}: {err})"
                        ) from None
    # its own arrays: simulate then runs the per-op kernels the sweep compiled, equal to the
    # bit to a built schedule's point plan, which a cold main job would compile for this
    # alone (3-4 s)
    sched._unshare()
    return simulate(sched, costs)


def _title(row, result, what: str = "") -> str:
    text = (f"{what}{row.schedule} (m={int(row.m)}), p={int(row.p)}, n={int(row.n)}: makespan "
            f"{result.makespan:.6g}, bubble {result.bubble_ratio:.1%}, peak "
            f"{result.peak_activations.max():.4g}")
    if not math.isclose(result.makespan, row.makespan, rel_tol=1e-9, abs_tol=1e-12):
        text += f" (the table says {row.makespan:.6g})"
    return text


def _timeline_item(row, what="", memory=True):
    result = resimulate(row)
    if result is None:
        return None
    return timeline.simulated(result, _title(row, result, what), memory)


def sweep_sections(df, label: str, schedules, budget=None, setting=None) -> list[dict]:
    df = df.copy()
    df.attrs = {}  # pandas deep-copies attrs (a sweep's skip reasons) on every selection
    view, setting = _one_setting(df, setting)
    where = f" ({setting})" if setting else ""
    if view.empty:  # every point kept with its reason (invalid="keep"): nothing was simulated
        reasons = sorted(set(df["reason"].dropna())) if "reason" in df else []
        return [{"title": f"Sweep: {label}",
                 "text": f"None of its {len(df):,} points was simulated"
                         + (f": {'; '.join(reasons[:3])}" if reasons else "") + ".",
                 "items": [table(df, [(c, c, "str") for c in ("schedule", "p", "n", "m",
                                                               "reason") if c in df])]}]
    sections = [{"title": f"Heat maps: {label}{where}",
                 "text": "Each schedule's best over m at every p and n/p; hover a cell for the "
                         "point.",
                 "items": [heatmaps(view, *spec) for spec in HEAT]}]
    training = view[~view["schedule"].map(lambda s: SCHEDULES[s].forward_only
                                          if s in SCHEDULES else False)]
    pairs = sorted({(int(p), int(n)) for p, n in zip(training["p"], training["n"],
                                                     strict=True)})
    groups = {key: g for key, g in training.groupby(["p", "n"])}
    sections.append({"title": f"Pareto fronts{where}",
                     "text": "Bubble against peak activation memory at each (p, n): every "
                             "schedule and m, and the points no other beats in both.",
                     "items": [{"type": "choice", "label": "p, n", "options": [
                         {"label": f"p={p}, n={n}", "item": pareto(groups[p, n], p, n)}
                         for p, n in pairs]}]})
    sections.append(_timelines_section(training, schedules, where, budget))
    if pairs:
        side = _side_by_side_section(groups, pairs, schedules, where)
        if side is not None:
            sections.append(side)
    return sections


def _timelines_section(training, schedules, where: str, budget=None) -> dict:
    """The fastest schedule of each ``(p, n)`` within 1F1B's peak (or no limit without 1F1B)
    as a table, and its timeline and the named ``schedules``' best at each ``(p, n)`` to
    choose from."""
    if budget is None:
        budget = (MEMORY_REFERENCE if MEMORY_REFERENCE in set(training["schedule"])
                  else float("inf"))
    best = best_within_budget(training, budget)
    said = ("1F1B's peak" if budget == MEMORY_REFERENCE else f"{budget}'s peak"
            if isinstance(budget, str) else "no memory limit" if budget == float("inf")
            else f"{budget:g} units")
    options = [{"label": f"p={int(r.p)}, n={int(r.n)}: {r.schedule} (m={int(r.m)})",
                "item": _timeline_item(r, "fastest within budget: ")}
               for r in best.itertuples()]
    for name in schedules or ():
        mine = training[training["schedule"] == name].sort_values("makespan", kind="stable")
        for r in mine.groupby(["p", "n"]).head(1).sort_values(["p", "n"]).itertuples():
            options.append({"label": f"{name}: p={int(r.p)}, n={int(r.n)} (m={int(r.m)})",
                            "item": _timeline_item(r)})
    options = [o for o in options if o["item"] is not None]
    return {"title": f"Timelines{where}",
            "text": f"The fastest schedule of each (p, n) within {said}"
                    f"{' and the named schedules' if schedules else ''}, "
                    "re-simulated: one row per device, hover an op for its times, "
                    "microbatch and stage, each device's activation memory beneath. "
                    "Drag (or scroll) to zoom, pan with the mode bar's pan tool, "
                    "double-click to reset.",
            "items": [table(best, [("p", "p", "d"), ("n", "n", "d"),
                                   ("schedule", "schedule", "str"), ("m", "m", "d"),
                                   ("makespan", "makespan", ".6g"),
                                   ("bubble_ratio", "bubble", "%"),
                                   ("peak_activations_max", "peak", ".4g"),
                                   ("budget", "budget", ".4g")])]
            + ([{"type": "choice", "label": "timeline", "options": options}]
               if options else [{"type": "text", "text": "No timeline: the rows' "
                                 "costs were arrays the table does not hold."}])}


def _side_by_side_section(groups, pairs, schedules, where: str) -> dict | None:
    """At the middle ``(p, n)``, each schedule's fastest row (of the named ``schedules`` if
    given) re-simulated on one time axis, fastest first; ``None`` if none can be."""
    ps = sorted({p for p, _ in pairs})
    p = ps[len(ps) // 2]
    ns = sorted(n for q, n in pairs if q == p)
    n = ns[len(ns) // 2]
    here = groups[p, n].sort_values("makespan", kind="stable").groupby("schedule",
                                                                        sort=False).head(1)
    if schedules:
        here = here[here["schedule"].isin(schedules)]
    items = [_timeline_item(r, memory=False) for r in here.itertuples()]
    items = [i for i in items if i is not None]
    if not items:
        return None
    span = float(here["makespan"].max())
    for i in items:
        i["range"] = [0, span]
    return {"title": f"Schedules side by side at p={p}, n={n}{where}",
            "text": "Fastest first, each at its best m, on one time axis.",
            "items": [{"type": "group", "items": items}]}


# ---------------------------------------------------------------------------- plans


PLAN_TABLE = [("t", "t", "d"), ("cp", "cp", "d"), ("p", "p", "d"), ("d", "d", "d"),
              ("ep", "ep", "d"), ("etp", "etp", "d"), ("zero", "zero", "d"),
              ("precision", "precision", "str"), ("overlap", "overlap", "bool"),
              ("schedule", "schedule", "str"),
              ("m", "m", "d"), ("microbatch", "mb", "d"), ("n", "n", "d"),
              ("recompute", "recompute", "str"), ("layout", "layout", "str"),
              ("step_time", "step s", ".4g"), ("tokens_per_s", "tokens/s", ",d"),
              ("mfu", "MFU", "%"), ("bubble_ratio", "bubble", "%"),
              (("activation_bytes", 1e9), "act GB", ".3g"),
              (("peak_memory", 1e9), "GB/GPU", ".3g"),
              # the step time's error bar, its checks' mean signed error (what they did, not
              # a correction) and, where no validated run shares its regime, why
              ("expected_error", "± error", "%"), ("expected_bias", "checks' bias", "%"),
              ("extrapolated", "extrapolated", "str"),
              ("fits", "fits", "bool"), ("reason", "reason", "str")]


def plan_sections(df, label: str) -> list[dict]:
    ran = df[df["step_time"].notna()]
    config = ["t", "cp", "p", "d", "ep", "etp", "zero", "precision", "overlap", "schedule",
              "m", "microbatch", "n", "recompute"]
    # as plan's summary shows them: a column the plan holds one value of says nothing a row's
    # neighbours do not, but cp and ep wherever a row has them (t p d alone would not
    # multiply to the GPUs, an MoE plan's experts spread over ep); they had been left out, and
    # rows differing in them alone looked alike
    config = [c for c in config if c in df and (
        c in ("t", "p", "d", "schedule") or df[c].nunique(dropna=False) > 1
        or (c in ("cp", "ep") and bool((df[c] > 1).any())))]

    def custom(rows):
        bars, biases = (rows[c].to_numpy() if c in rows else np.full(len(rows), np.nan)
                        for c in ("expected_error", "expected_bias"))
        return [[" ".join(f"{c}={v}" for c, v in zip(config, values, strict=True)), step,
                 (f"± {bar:.1%}" + (f" (its checks' mean error {bias:+.1%})"
                                    if np.isfinite(bias) else "")
                  if np.isfinite(bar) else "no error bar")]
                for values, step, bar, bias in zip(
                    rows[config].itertuples(index=False, name=None), rows["step_time"], bars,
                    biases, strict=True)]

    misses = ran[~ran["fits"].astype(bool)]
    hover = ("%{customdata[0]}<br>%{y:,.0f} tokens/s, %{x:.4g} GB per GPU<br>step "
             "%{customdata[1]:.4g} s %{customdata[2]}<extra>%{fullData.name}</extra>")
    traces = [{"type": "scatter", "mode": "markers", "name": "does not fit",
               "x": _clean(misses["peak_memory"] / 1e9), "y": _clean(misses["tokens_per_s"]),
               "customdata": custom(misses), "hovertemplate": hover,
               "marker": {"color": "#BBBBBB", "size": 5}}]
    fits = ran[ran["fits"].astype(bool)]
    for i, (name, rows) in enumerate(fits.groupby("schedule", sort=True)):
        traces.append({"type": "scatter", "mode": "markers", "name": name,
                       "x": _clean(rows["peak_memory"] / 1e9), "y": _clean(rows["tokens_per_s"]),
                       "customdata": custom(rows), "hovertemplate": hover,
                       "marker": {"color": PALETTE[i % len(PALETTE)], "size": 7}})
    layout = {"title": {"text": f"{label}: throughput against memory per GPU"}, "height": 480,
              "xaxis": {"type": "log", "title": {"text": "GB per GPU (weights, gradients, "
                                                         "optimizer, activations)"}},
              "yaxis": {"title": {"text": "tokens per second"}}, "hovermode": "closest"}
    text = (f"{len(df):,} configurations, {len(ran):,} simulated, {int(fits.shape[0]):,} fit. "
            "Click a heading to sort; type in the boxes under the headings to filter "
            "(text, or a comparison such as >50000 or <=80).")
    fixed = {"cp", "ep", "etp", "zero", "precision", "overlap"} - set(config)
    columns = [c for c in PLAN_TABLE if c[0] not in fixed]
    if "step_time_p95" in df:  # a plan under noise: its step's mean and p95 beside it
        at = next(i for i, c in enumerate(columns) if c[0] == "step_time") + 1
        columns = [*columns[:at], ("step_time_mean", "mean s", ".4g"),
                   ("step_time_p95", "p95 s", ".4g"), *columns[at:]]
        text += (" Under noise: each row's Monte Carlo step time, its mean and 95th "
                 "percentile (empty where the noise does not fit its pipeline).")
    return [{"title": f"Plan: {label}", "text": text,
             "items": [plot(traces, layout), table(df, columns)]}]


# ---------------------------------------------------------------------------- frontiers


def frontier_sections(df, label: str) -> list[dict]:
    objective = df["objective"].iloc[0] if "objective" in df else "makespan"
    metric = "span_bubble_ratio" if objective == "span" and "span_bubble_ratio" in df \
        else "bubble_ratio"
    traces = []
    for i, (placement, rows) in enumerate(df.groupby("placement", sort=False)):
        colour = PALETTE[i % len(PALETTE)]
        found = rows[rows["kind"] == "search"].sort_values("peak_activations_max")
        limits = ["unlimited" if not math.isfinite(x) else f"{x:g}"
                  for x in found["memory_limit"]]
        custom = [[s, lim] for s, lim in zip(found["schedule"], limits, strict=True)]
        traces.append({"type": "scatter", "mode": "lines", "name": f"best found, {placement}",
                       "x": _clean(found["peak_activations_max"]),
                       "y": _clean(np.minimum.accumulate(found[metric].to_numpy())),
                       "line": {"shape": "hv", "color": colour}, "hoverinfo": "skip"})
        traces.append({"type": "scatter", "mode": "markers", "name": f"searches, {placement}",
                       "x": _clean(found["peak_activations_max"]), "y": _clean(found[metric]),
                       "customdata": custom, "marker": {"color": colour, "size": 6},
                       "hovertemplate": "%{customdata[0]}, limit %{customdata[1]}<br>peak "
                       "%{x:.4g}, bubble %{y:.2%}<extra>%{fullData.name}</extra>"})
        fixed = rows[rows["kind"] != "search"]
        traces.append({"type": "scatter", "mode": "markers+text", "name": f"fixed, {placement}",
                       "x": _clean(fixed["peak_activations_max"]), "y": _clean(fixed[metric]),
                       "text": list(fixed["schedule"]), "textposition": "top right",
                       "marker": {"color": colour, "symbol": "diamond", "size": 10,
                                  "line": {"color": "black", "width": 1}},
                       "hovertemplate": "%{text}<br>peak %{x:.4g}, bubble %{y:.2%}"
                       "<extra>%{fullData.name}</extra>"})
    layout = {"title": {"text": f"{label}: best {metric.replace('_', ' ')} at each memory "
                                f"budget"}, "height": 480, "hovermode": "closest",
              "xaxis": {"title": {"text": "peak activation memory per device (units of M_B)"}},
              "yaxis": {"title": {"text": metric.replace("_", " ")}, "tickformat": ".0%"}}
    columns = [("placement", "placement", "str"), ("kind", "kind", "str"),
               ("schedule", "schedule", "str"), ("memory_limit", "limit", ".4g"),
               ("peak_activations_max", "peak", ".4g"), ("makespan", "makespan", ".6g"),
               ("bubble_ratio", "bubble", "%"), ("span_bubble_ratio", "span bubble", "%"),
               ("gap", "gap", "%"), ("optimal", "optimal", "bool")]
    return [{"title": f"Frontier: {label}", "text": "Searches at each memory budget (the "
             "line: the best at or under each peak) and the registered schedules (diamonds).",
             "items": [plot(traces, layout), table(df, columns, {"limit": "unlimited"})]}]


# ---------------------------------------------------------------------------- measured runs


def measured_sections(run, label: str) -> list[dict]:
    replay = run.replay()
    predicted = simulate(run.schedule, run.costs())
    ms = 1e3
    options = []
    for what, result in (("replay (each op's measured time)", replay),
                         ("prediction from the run's median costs", predicted)):
        error = result.makespan / run.makespan - 1
        title = (f"measured {run.makespan * ms:.3f} ms against the "
                 f"{what.split(' (')[0]} {result.makespan * ms:.3f} ms ({error:+.2%})")
        options.append({"label": what, "item": timeline.measured(run, result, title)})
    text = (f"p={run.p}, n={run.n}, m={run.m}, {run.schedule.num_ops} ops; times in seconds. "
            "Each device's upper row is the measured run (grey: the wait for an input), the "
            "lower the simulation.")
    return [{"title": f"Measured run: {label}", "text": text,
             "items": [{"type": "choice", "label": "simulation", "options": options}]}]


# ---------------------------------------------------------------------------- Monte Carlo


def variability_sections(results, label: str) -> list[dict]:
    """Monte Carlo results (``(label, MonteCarlo)`` pairs) side by side: each one's makespan
    as an empirical CDF on one axis, their summary as a table, and each schedule's timeline
    without jitter (``MonteCarlo.shaded``) with every op shaded by its criticality (as
    ``fastpp.plot.criticality``). Without jitter is one sample of the noise's persistent
    part (``MonteCarlo.steady``): its slow devices, stages and link delays kept."""
    import pandas as pd

    lines, rows, options = [], [], []
    for k, (name, mc) in enumerate(results):
        x = np.sort(mc.makespan)
        # at most CDF_POINTS steps a line, the last sample kept: 300,000 made a 15 MB page
        pick = np.unique(np.linspace(0, x.size - 1, min(x.size, CDF_POINTS)).astype(np.int64))
        p95 = mc.quantile(0.95)
        lines.append({"type": "scatter", "mode": "lines", "name": f"{name}: p95 {p95:.4g}",
                      "x": _clean(x[pick]), "y": _clean((pick + 1) / x.size),
                      "line": {"shape": "hv", "width": 1.6, "color": PALETTE[k % len(PALETTE)]},
                      "hovertemplate": f"{name}: %{{y:.1%}} of the steps within %{{x:.6g}}"
                                       "<extra></extra>"})
        s, steady = mc.schedule, mc.steady()
        rows.append({"label": name, "schedule": s.name, "p": s.p, "n": s.n, "m": s.m,
                     "samples": mc.samples,
                     "steady": np.nan if steady is None else steady.makespan[0],
                     "mean": mc.mean, "std": mc.std, "p50": mc.quantile(0.5), "p95": p95})
        options.append({"label": name, "item": _criticality(mc, name)})
    summary = pd.DataFrame(rows)
    cdf = plot(lines, {"title": {"text": "the step's distribution (empirical CDF)"},
                       "height": 420, "hovermode": "closest",
                       "xaxis": {"title": {"text": "makespan"}},
                       "yaxis": {"title": {"text": "share of the samples"},
                                 "tickformat": ".0%", "range": [0, 1.02]},
                       "shapes": [{"type": "line", "xref": "paper", "x0": 0, "x1": 1,
                                   "y0": 0.95, "y1": 0.95,
                                   "line": {"color": "grey", "width": 1, "dash": "dot"}}]})
    columns = [("label", "label", "str"), ("schedule", "schedule", "str"), ("p", "p", "d"),
               ("n", "n", "d"), ("m", "m", "d"), ("samples", "samples", "d"),
               ("steady", "no jitter", ".6g"), ("mean", "mean", ".6g"), ("std", "std", ".4g"),
               ("p50", "p50", ".6g"), ("p95", "p95", ".6g")]
    # (a bootstrap of measured times replaces the costs: no step without jitter exists)
    missing = {"no jitter": "measured times"}
    text = ("Each result's samples (simulate with noise=): their makespans' CDF (the dotted "
            "line at 95%); per result the makespan without jitter (the noise's slow devices, "
            "stages and links alone), the mean, std and quantiles; then per op the share of "
            "the samples whose critical path runs through it, shaded on the timeline without "
            "jitter (dark red: on every path).")
    return [{"title": f"Variability: {label}", "text": text,
             "items": [cdf, table(summary, columns, missing),
                       {"type": "choice", "label": "criticality", "options": options}]}]


def _criticality(mc, name: str) -> dict:
    """``mc``'s schedule's timeline without jitter (``MonteCarlo.shaded``) as one bar trace,
    each op coloured by its criticality; text instead past ``TIMELINE_OPS`` ops."""
    s = mc.schedule
    if s.num_ops > TIMELINE_OPS:
        return {"type": "text", "text": f"{name}: {s.num_ops} ops, more than a drawn "
                                        f"timeline holds ({TIMELINE_OPS})."}
    used = np.arange(s.kind.shape[1]) < s.length[:, None]
    device = np.nonzero(used)[0]
    share = mc.criticality[used]
    names = {int(op): op.name for op in Op}
    ops = [f"{st}{names[int(k)]}{mb}" for k, st, mb in
           zip(s.kind[used].tolist(), s.stage[used].tolist(), s.mb[used].tolist(), strict=True)]
    what, makespan, start, end = mc.shaded()
    start, end = start[used], end[used]
    rows = [f"device {r}" for r in range(s.p)]
    bars = {"type": "bar", "orientation": "h", "base": _clean(start), "x": _clean(end - start),
            "y": [rows[r] for r in device.tolist()], "width": 0.8, "showlegend": False,
            "customdata": [list(c) for c in zip(ops, _clean(share), strict=True)],
            "hovertemplate": "<b>%{customdata[0]}</b><br>start %{base:.6g}<br>critical in "
                             "%{customdata[1]:.1%} of the samples<extra></extra>",
            "marker": {"color": _clean(share), "cmin": 0, "cmax": 1, "colorscale": "Reds",
                       "colorbar": {"title": {"text": "critical"}, "tickformat": ".0%"},
                       "line": {"width": 0.5, "color": "white"}}}
    title = (f"{name}: criticality over {mc.samples} samples, on the timeline {what} "
             f"(makespan {makespan:.6g})")
    return plot([bars], {"title": {"text": title, "font": {"size": 13}},
                         "height": max(120, 22 * s.p) + 110, "barmode": "overlay",
                         "margin": {"t": 50, "l": 90, "r": 20, "b": 45},
                         "hovermode": "closest",
                         "xaxis": {"title": {"text": f"time ({what})"},
                                   "range": [0, makespan]},
                         "yaxis": {"type": "category", "categoryorder": "array",
                                   "categoryarray": rows, "autorange": "reversed"}})
