"""fastpp.report in a real browser: Debian's chromium driven by Playwright (never downloaded).

One browser for the module; each report is opened, every figure scrolled into view until
Plotly has drawn it, and the page must log no error and request nothing but its own file.
Skipped only where no browser can be installed; in CI (``CI`` set) a missing one fails.
"""

import base64
import os
import re
import shutil
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import script

import fastpp
from fastpp.__main__ import main as cli

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
DATA = Path(__file__).parent / "data"
SCHEDULES = ["1f1b", "zbv", "interleaved-1f1b", "dualpipev"]
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def small_sweep():
    return fastpp.sweep(SCHEDULES, p=[2, 4], n_per_p=[1, 2], m=[1, 2], comm=[0.0, 0.1],
                        progress=False)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """A fresh headless chromium, or a skip where none can be installed (a failure in CI)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        sync_playwright = None
    if sync_playwright is None or not os.path.exists(CHROMIUM):
        why = f"no Playwright or no {CHROMIUM} (apt-get install chromium)"
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the browser tests: {why}")
        pytest.skip(why)
    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")), executable_path=CHROMIUM,
            args=ARGS, headless=True, viewport={"width": 1300, "height": 900})
        yield context
        context.close()


class Opened:
    """A report opened in a page, with the console errors and the requests it made."""

    def __init__(self, browser, path):
        self.page = browser.new_page()
        self.errors, self.requests = [], []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error"
                     else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.goto(Path(path).resolve().as_uri())
        self.drawn = self.draw_all()

    def draw_all(self) -> int:
        """Scroll every figure into view until Plotly has drawn it; how many hold an SVG."""
        count = self.page.eval_on_selector_all(".fastpp-plot", "els => els.length")
        for i in range(count):
            self.page.eval_on_selector_all(".fastpp-plot", f"els => els[{i}].scrollIntoView()")
            self.page.wait_for_function(
                f"document.querySelectorAll('.fastpp-plot')[{i}].dataset.rendered",
                timeout=20000)
        return self.page.eval_on_selector_all(
            ".fastpp-plot", "els => els.filter(e => e.querySelector('svg.main-svg')).length")

    def check_offline(self):
        assert self.errors == []
        assert self.requests, "the page itself is a request"
        assert all(url.startswith(("file:", "data:", "blob:")) for url in self.requests), \
            self.requests


def test_sweep_report_in_chromium(browser, small_sweep, tmp_path):
    path = fastpp.report(small_sweep, output=tmp_path / "r.html", schedules=["1f1b", "zbv"])
    text = path.read_text()
    assert text.count("plotly.js v") == 1  # the bundle's banner: inlined once, not per figure
    assert "<script src" not in text
    page = Opened(browser, path)
    # 3 heat maps, a Pareto front, a timeline, the two named schedules side by side at
    # p=4, n=8 (the middle p and its middle n)
    assert page.drawn == 7
    heat = page.page.eval_on_selector_all(
        ".fastpp-plot", "els => els.slice(0, 3).map(e => e.querySelectorAll('g.hm').length)")
    assert heat == [4, 4, 4]  # one heat map per schedule
    titles = page.page.eval_on_selector_all(".fastpp-plot .gtitle", "els => els.map("
                                            "e => e.textContent)")
    assert any("zbv (m=2), p=4, n=8" in t for t in titles)
    # every re-simulated timeline has the makespan of its sweep row
    assert titles and not any("the table says" in t for t in titles)
    # a named schedule's timeline: 1F1B p=2, n=4 at latency 0.1 (the middle of 0, 0.1); by
    # hand, device 1's first op 1F0 starts when 0F0 (f=1) has ended and been handed on
    select = page.page.locator("select").nth(1)
    select.select_option(label="1f1b: p=2, n=4 (m=1)")
    page.draw_all()
    box = page.page.evaluate("""() => {
        const gd = [...document.querySelectorAll('.fastpp-plot')].find(
            e => e.layout && e.layout.title.text.startsWith('1f1b (m=1), p=2, n=4'));
        gd.scrollIntoView();
        const fl = gd._fullLayout, rect = gd.getBoundingClientRect();
        return {x: rect.left + fl.xaxis._offset + fl.xaxis.l2p(1.6),
                y: rect.top + fl.yaxis._offset + fl.yaxis.d2p('device 1')};
    }""")
    page.page.mouse.move(box["x"] - 5, box["y"])
    page.page.mouse.move(box["x"], box["y"])
    hover = page.page.wait_for_selector(".hoverlayer .hovertext", timeout=5000)
    label = hover.text_content()
    assert "1F0" in label and "start 1.1" in label and "end 2.1" in label
    assert "microbatch 0, stage 1" in label
    page.check_offline()


def test_plan_report_sorts_and_filters(browser, tmp_path, capsys):
    # the plan command writes its report beside its table
    assert cli(["plan", "--model", "llama3-8b", "--gpus", "8", "--seq", "2048",
                "--global-batch", "16", "--out", str(tmp_path), "--top", "1"]) == 0
    assert f"report: {tmp_path / 'plan.html'}" in capsys.readouterr().out
    df = pd.read_parquet(tmp_path / "plan.parquet")
    path = tmp_path / "plan.html"
    page = Opened(browser, path)
    assert page.drawn == 1
    info = page.page.locator(".fastpp-table p")
    assert info.text_content().startswith(f"{len(df):,} of {len(df):,} rows")
    headings = page.page.locator(".fastpp-table thead tr").first.locator("th")
    names = headings.all_text_contents()
    boxes = page.page.locator(".fastpp-table thead tr").nth(1).locator("input")
    boxes.nth(names.index("fits")).fill("yes")
    assert info.text_content().startswith(f"{int(df['fits'].sum()):,} of")
    boxes.nth(names.index("GB/GPU")).fill("<40")
    both = int((df["fits"] & (df["peak_memory"] / 1e9 < 40)).sum())
    assert info.text_content().startswith(f"{both:,} of")
    headings.nth(names.index("tokens/s")).click()  # numbers sort largest first
    first = page.page.locator(".fastpp-table tbody tr").first.locator("td")
    best = df[df["fits"] & (df["peak_memory"] / 1e9 < 40)]["tokens_per_s"].max()
    assert first.nth(names.index("tokens/s")).text_content() == f"{round(best):,}"
    # each row's error bar, as plan gives it (fastpp.model.errorbar)
    row = df[df["fits"] & (df["peak_memory"] / 1e9 < 40)].sort_values(
        "tokens_per_s", ascending=False).iloc[0]
    shown = first.nth(names.index("± error")).text_content()
    assert shown.endswith("%") and float(shown[:-1]) == pytest.approx(
        100 * row["expected_error"], abs=0.06), shown
    bias = first.nth(names.index("checks' bias")).text_content()
    assert bias.endswith("%") and float(bias[:-1]) == pytest.approx(
        100 * row["expected_bias"], abs=0.06), bias
    assert "extrapolated" in names
    page.check_offline()


def test_noisy_plan_report_shows_each_rows_distribution(browser, tmp_path, capsys):
    """A plan under noise (``plan --noise``): its report's table had left out the noisy
    columns, so the rows ranked by p95 showed no p95."""
    assert cli(["plan", "--model", "llama3-8b", "--gpus", "8", "--seq", "2048",
                "--global-batch", "16", "--pp", "4", "--slow-device", "3:1.3", "--samples", "8",
                "--objective", "p95", "--out", str(tmp_path), "--top", "1"]) == 0
    capsys.readouterr()
    df = pd.read_parquet(tmp_path / "plan.parquet")
    page = Opened(browser, tmp_path / "plan.html")
    names = page.page.locator(".fastpp-table thead tr").first.locator("th").all_text_contents()
    assert {"mean s", "p95 s"} <= set(names)
    first = page.page.locator(".fastpp-table tbody tr").first.locator("td")
    row = df.iloc[0]  # (the plan's order: fitting rows by p95)
    assert float(first.nth(names.index("p95 s")).text_content()) == pytest.approx(
        row["step_time_p95"], rel=1e-3)
    assert float(first.nth(names.index("mean s")).text_content()) == pytest.approx(
        row["step_time_mean"], rel=1e-3)
    page.check_offline()


def test_main_job_writes_its_report(browser, tmp_path, capsys):
    sweep = script("sweep")
    assert sweep.main(["--schedules", *SCHEDULES, "-p", "2", "4", "--n-per-p", "1", "2",
                       "-m", "1", "2", "--comm", "0", "0.1", "--out", str(tmp_path),
                       "--no-progress"]) == 0
    assert f"report: {tmp_path / 'report.html'}" in capsys.readouterr().out
    page = Opened(browser, tmp_path / "report.html")
    assert page.drawn == 3 + 1 + 1 + len(SCHEDULES)  # every schedule runs at p=4, n=8
    page.check_offline()


def test_frontier_script_and_measured_run(browser, tmp_path, monkeypatch):
    frontier = script("frontier")
    assert frontier.main(["-p", "4", "-n", "8", "--budgets", "2", "--time-limit", "0.05",
                          "--threads", "1", "--out", str(tmp_path)]) == 0
    page = Opened(browser, tmp_path / "frontier.html")
    assert page.drawn == 1
    # the rows without a memory limit: each placement's last search, every fixed schedule
    table = pd.read_parquet(tmp_path / "frontier.parquet")
    unlimited = int(np.isinf(table["memory_limit"]).sum())
    assert unlimited == 2 + int((table["kind"] == "fixed").sum())
    assert page.page.locator(".fastpp-table td", has_text="unlimited").count() == unlimited
    page.check_offline()
    # a measured run: both simulations, chosen in the drop-down
    out = tmp_path / "measured.html"
    assert cli(["report", str(DATA / "zbv"), "-o", str(out)]) == 0
    page = Opened(browser, out)
    assert page.drawn == 1
    page.page.locator("select").select_option(index=1)
    assert page.draw_all() == 1
    title = page.page.locator(".fastpp-plot .gtitle").text_content()
    run = fastpp.read_torch_trace(DATA / "zbv")
    assert f"measured {run.makespan * 1e3:.3f} ms" in title
    page.check_offline()


def test_variability_script_and_monte_carlo_report(browser, tmp_path, capsys):
    """scripts/variability.py's headline: its table is simulate's, its flip delays bracket
    where ZB-H2 stops winning, and its report draws the four CDFs (each ends at its largest
    sample) and each case's criticality on its noise-free timeline."""
    variability = script("variability")
    assert variability.main(["--samples", "64", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    schedules = [fastpp.build_schedule(name, 8, 32) for name in ("1f1b", "zb-h2")]
    results = {}
    for what, delay in (("no delay", 0.0), ("link delay 4", 4.0)):
        for s in schedules:
            noise = fastpp.Noise(0.05, link_delay={(3, 4): delay}, blocking=True)
            mc = fastpp.simulate(s, variability.COSTS, noise=noise, samples=64, seed=0)
            results[f"{s.name}, {what}"] = mc
            # without jitter: the link delay alone, as one noise-free sample of it
            steady = fastpp.simulate(s, variability.COSTS, noise=fastpp.Noise(
                0.0, link_delay={(3, 4): delay}, blocking=True), samples=1).makespan[0]
            assert (f"{f'{s.name}, {what}':<28}{steady:>10.1f}{mc.mean:>10.1f}"
                    f"{mc.quantile(0.95):>10.1f}") in out
    said = out.split("stops winning at a delay of ")[1].split("\n")[0]
    flips = [float(x) for x in re.findall(r"([\d.]+) \(", said)]
    assert len(flips) == 3 and flips[0] < flips[1] < 4.0  # (jitter delays the flip here)

    def makespan(s, delay):
        noise = fastpp.Noise(0.0, link_delay={(3, 4): delay}, blocking=True)
        return fastpp.simulate(s, variability.COSTS, noise=noise, samples=1).makespan[0]

    # without jitter: ZB-H2 wins just below the printed delay and loses just above it
    below, above = flips[0] - 1e-3, flips[0] + 1e-3
    assert makespan(schedules[1], below) < makespan(schedules[0], below)
    assert makespan(schedules[1], above) > makespan(schedules[0], above)
    assert (tmp_path / "variability.png").stat().st_size > 0
    page = Opened(browser, tmp_path / "variability.html")
    assert page.drawn == 2  # the CDFs, the first case's criticality
    lines = page.page.evaluate("() => document.querySelectorAll('.fastpp-plot')[0].data.map("
                               "t => [t.name, Math.max(...t.x), t.y[t.y.length - 1]])")
    assert [line[0].split(":")[0] for line in lines] == list(results)
    for (_, top, last), mc in zip(lines, results.values(), strict=True):
        assert top == pytest.approx(mc.makespan.max()) and last == 1.0
    cells = page.page.locator(".fastpp-table td").all_text_contents()
    assert "zb-h2, link delay 4" in cells
    row = cells[cells.index("zb-h2, link delay 4"):][:11]
    assert row[6] == "256"  # no jitter: the delay priced (103 without it)
    page.page.locator("select").select_option(label="zb-h2, link delay 4")
    assert page.draw_all() == 2
    shade = page.page.evaluate("() => document.querySelectorAll('.fastpp-plot')[1].data[0]"
                               ".marker.color")
    mc = results["zb-h2, link delay 4"]
    used = np.arange(mc.schedule.kind.shape[1]) < mc.schedule.length[:, None]
    np.testing.assert_allclose(shade, mc.criticality[used])
    # on the timeline without jitter, the held sends included: it ends at 256, not 103
    span = page.page.evaluate("() => document.querySelectorAll('.fastpp-plot')[1].layout"
                              ".xaxis.range[1]")
    assert span == pytest.approx(256.0)
    page.check_offline()


def test_monte_carlo_inputs_bad(tmp_path):
    mc = fastpp.simulate(fastpp.build_schedule("1f1b", 2, 4), fastpp.Costs(1.0, 2.0),
                         noise=fastpp.Noise(0.1), samples=8)
    out = tmp_path / "r.html"
    with pytest.raises(fastpp.ScheduleError, match=r"inputs\[0\] must map labels \(str\) to "
                       r"MonteCarlo results \(got str -> int\)"):
        fastpp.report({"a": 1}, output=out)
    with pytest.raises(fastpp.ScheduleError, match=r"inputs\[1\] must hold at least one "
                       r"MonteCarlo result \(got an empty dict\)"):
        fastpp.report(mc, {}, output=out)
    with pytest.raises(fastpp.ScheduleError, match=r"label each Monte Carlo result once \(got "
                       r"'1f1b \(p=2, n=4, m=1\)' 2 times"):
        fastpp.report(mc, mc, output=out)
    with pytest.raises(fastpp.ScheduleError, match="or Monte Carlo result"):
        fastpp.report(output=out)
    assert not out.exists()
    # the same schedule at another size is told apart by its label
    other = fastpp.simulate(fastpp.build_schedule("1f1b", 2, 8), fastpp.Costs(1.0, 2.0),
                            noise=fastpp.Noise(0.1), samples=8)
    assert fastpp.report(mc, other, output=out).exists()


def test_measured_times_have_no_step_without_jitter():
    """A bootstrap of a measured run's times: the table's "no jitter" cell is empty, says
    why, and the criticality is shaded on the median sample."""
    from fastpp.reports import figures

    run = fastpp.read_torch_trace(DATA / "gpipe")
    mc = fastpp.simulate(run.schedule, fastpp.Costs(1.0, 2.0),
                         noise=fastpp.Noise(empirical=run), samples=64)
    items = figures.variability_sections([("gpipe", mc)], "x")[0]["items"]
    table = items[1]
    cell = [c["name"] for c in table["columns"]].index("no jitter")
    assert table["rows"][0][cell] is None
    assert table["columns"][cell]["missing"] == "measured times"
    title = items[2]["options"][0]["item"]["figure"]["layout"]["title"]["text"]
    assert "on the timeline sample " in title and ", the median" in title


def test_a_long_monte_carlo_draws_a_thinned_cdf(tmp_path):
    """Every sample on the page made 15 MB for 300,000: at most CDF_POINTS steps, the last
    one at the largest makespan and a share of 1."""
    from fastpp.reports import figures

    mc = fastpp.simulate(fastpp.build_schedule("1f1b", 2, 4), fastpp.Costs(1.0, 2.0),
                         noise=fastpp.Noise(0.1), samples=5000)
    line = figures.variability_sections([("a", mc)], "x")[0]["items"][0]["figure"]["data"][0]
    assert len(line["x"]) == figures.CDF_POINTS
    assert line["x"][-1] == mc.makespan.max() and line["y"][-1] == 1.0
    assert line["x"][0] == mc.makespan.min()


@pytest.mark.parametrize("argv, message", [
    (["--samples", "0"], "--samples must be a positive integer"),
    (["--delay", "0"], "--delay must be a number > 0 whose double is finite (got 0.0)"),
    (["--delay", "nan"], "--delay must be a number > 0 whose double is finite (got nan)"),
    (["--delay", "1e308"], "--delay must be a number > 0 whose double is finite"),
    (["--picture", "/nonexistent/x.png"], "--picture must be a file path that can be "
                                          "written (got '/nonexistent/x.png': no folder"),
    (["--cov", "-0.1"], "--cov must be finite and >= 0 (got -0.1)"),
])
def test_variability_script_bad_flags(tmp_path, capsys, argv, message):
    assert script("variability").main([*argv, "--out", str(tmp_path)]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "variability.png").exists()


def test_variability_script_bad_out(tmp_path, capsys):
    """A file for --out, or a folder where its report goes: refused before the work."""
    (tmp_path / "file").write_text("")
    (tmp_path / "folder" / "variability.html").mkdir(parents=True)
    variability = script("variability")
    assert variability.main(["--out", str(tmp_path / "file")]) == 2
    assert "--out must be a folder" in capsys.readouterr().err
    assert variability.main(["--out", str(tmp_path / "folder")]) == 2
    assert "--out must be a file path that can be written" in capsys.readouterr().err
    assert not (tmp_path / "folder" / "variability.png").exists()


def _decode(item):
    """The timeline item's ops as the page expands them (start, end per op in row order)."""
    count = sum(item["length"])
    raw = np.frombuffer(zlib.decompress(base64.b64decode(item["blob"])), "<i4")
    cols = dict(zip(item["columns"], raw.reshape(len(item["columns"]), count), strict=True))
    start, end, i = np.empty(count), np.empty(count), 0
    for n in item["length"]:
        clock = np.cumsum(np.ravel(np.column_stack([cols["gap"][i:i + n],
                                                    cols["dur"][i:i + n]])))
        start[i:i + n], end[i:i + n] = clock[0::2] * item["q"], clock[1::2] * item["q"]
        i += n
    return cols, start, end


def test_timelines_keep_every_op_time():
    from fastpp.reports import timeline

    res = fastpp.simulate(fastpp.build_schedule("dualpipev", 4, 8, 2),
                          fastpp.Costs(1.3, 2.9, w=1.1, comm=0.07))
    item = timeline.simulated(res, "t")
    cols, start, end = _decode(item)
    used = np.arange(res.schedule.kind.shape[1]) < res.schedule.length[:, None]
    order = np.lexsort((res.start[used], np.nonzero(used)[0]))
    tol = item["q"] / 2 * 1.001 * 2  # each time rounded to q once, a sum of two rounded steps
    np.testing.assert_allclose(start, res.start[used][order], atol=tol, rtol=0)
    np.testing.assert_allclose(end, res.end[used][order], atol=tol, rtol=0)
    np.testing.assert_array_equal(cols["kind"], res.schedule.kind[used][order])
    np.testing.assert_allclose(cols["done"] * item["mq"], res.mem_end[used][order],
                               atol=item["mq"])


@pytest.mark.parametrize("bad, message", [
    ("missing.parquet", "must be a readable path"),
    ("notes.txt", "got a .txt file"),
    ("broken.parquet", "must be a readable parquet table"),
    ("empty.csv", "must be a readable csv table"),
    ("header.csv", "got an empty table"),
    ("other.csv", "must be a table of a known kind"),
    ("folder", "got a folder with neither"),
])
def test_bad_inputs_name_the_path(tmp_path, bad, message):
    (tmp_path / "notes.txt").write_text("hello")
    (tmp_path / "broken.parquet").write_bytes(b"PAR1 not really")
    (tmp_path / "empty.csv").write_text("")
    (tmp_path / "header.csv").write_text("schedule,p,n\n")
    pd.DataFrame({"a": [1], "b": [2]}).to_csv(tmp_path / "other.csv", index=False)
    (tmp_path / "folder").mkdir()
    with pytest.raises(fastpp.ScheduleError, match=message) as err:
        fastpp.report(tmp_path / bad, output=tmp_path / "r.html")
    assert str(tmp_path / bad) in str(err.value)
    assert not (tmp_path / "r.html").exists()


def test_bad_arguments(small_sweep, tmp_path, capsys):
    with pytest.raises(fastpp.ScheduleError, match="got an empty table"):
        fastpp.report(pd.DataFrame(), output=tmp_path / "r.html")
    with pytest.raises(fastpp.ScheduleError, match="schedules must be one of"):
        fastpp.report(small_sweep, output=tmp_path / "r.html", schedules=["1f2b"])
    with pytest.raises(fastpp.ScheduleError, match="at least one"):
        fastpp.report(output=tmp_path / "r.html")
    with pytest.raises(fastpp.ScheduleTypeError, match="inputs must be paths"):
        fastpp.report(42, output=tmp_path / "r.html")
    with pytest.raises(fastpp.ScheduleError, match="existing folder"):
        fastpp.report(small_sweep, output=tmp_path / "nowhere" / "r.html")
    with pytest.raises(fastpp.ScheduleError, match="existing folder"):
        fastpp.report(small_sweep, output=tmp_path)  # a folder, not a file
    with pytest.raises(fastpp.ScheduleError, match="must hold numbers in its sweep's column 'p'"):
        fastpp.report(small_sweep.assign(p="two"), output=tmp_path / "r.html")
    with pytest.raises(fastpp.ScheduleError, match=r"whole numbers in its sweep's column 'm' "
                                                   r"\(got nan in row 3\)"):
        fastpp.report(small_sweep.assign(m=small_sweep["m"].where(
            small_sweep.index != 3)), output=tmp_path / "r.html")
    assert cli(["report", str(tmp_path / "missing"), "-o", str(tmp_path / "r.html")]) == 2
    assert "must be a readable path" in capsys.readouterr().err


@pytest.mark.parametrize("column, value, message", [
    ("makespan", -1.0, r"values in \[0, inf\] in its sweep's column 'makespan' \(got -1.0 "
                       r"in row 5\)"),
    ("bubble_ratio", 7.0, r"values in \[0, 1\] in its sweep's column 'bubble_ratio' \(got "
                          r"7.0 in row 5\)"),
    ("p", 0, r"values in \[1, inf\] in its sweep's column 'p' \(got 0.0 in row 5\)"),
    ("throughput", -3.0, "column 'throughput'"),
])
def test_nonsense_values_are_refused(small_sweep, tmp_path, column, value, message):
    """A drawn quantity outside its range is no row to draw (a negative makespan and a
    bubble ratio of 7 were drawn)."""
    bad = small_sweep.copy()
    bad.loc[5, column] = value
    with pytest.raises(fastpp.ScheduleError, match=message):
        fastpp.report(bad, output=tmp_path / "r.html")
    assert not (tmp_path / "r.html").exists()


def test_a_timeline_row_with_bad_costs_is_named(small_sweep, tmp_path):
    """The costs of a row the report re-simulates are checked there: the message names the
    row's point, not only the value."""
    bad = small_sweep[small_sweep["schedule"] == "1f1b"].copy()
    bad["b"] = float("inf")
    with pytest.raises(fastpp.ScheduleError, match=r"the row of point \d+, 1f1b, p=\d+, "
                                                   r"n=\d+, m=1: costs.b must be"):
        fastpp.report(bad, output=tmp_path / "r.html")


def test_sweep_without_1f1b(tmp_path):
    """The timelines' budget is 1F1B's peak when the sweep has 1F1B, else no limit (it was
    'budget must be finite (got inf)')."""
    df = fastpp.sweep(["zb-h1", "gpipe"], p=[2, 4], n_per_p=[1, 2], progress=False)
    page = fastpp.report(df, output=tmp_path / "r.html").read_text()
    assert "within no memory limit" in page


def test_sweep_folder_and_csv_read_alike(small_sweep, tmp_path):
    folder = tmp_path / "sweep"
    fastpp.sweep(SCHEDULES, p=[2], n_per_p=[1, 2], m=[1, 2], out=folder, progress=False)
    small_sweep.to_csv(tmp_path / "sweep.csv", index=False)
    for source in (folder, tmp_path / "sweep.csv"):
        path = fastpp.report(source, output=tmp_path / "r.html")
        assert f"sweep {source}" in path.read_text()


@pytest.mark.skipif(shutil.which("apt-get") is None, reason="not a Debian-like machine")
def test_ci_installs_chromium_when_missing():
    text = (ROOT / ".ci" / "run").read_text()
    assert "/usr/bin/chromium" in text and "apt-get install -y chromium" in text


def test_a_folder_of_a_table_and_its_pictures(small_sweep, tmp_path):
    """scripts/sweep.py --out writes sweep.parquet beside its PNGs: the report read the whole
    folder as one Parquet dataset and failed on the first picture."""
    folder = tmp_path / "res"
    folder.mkdir()
    small_sweep.to_parquet(folder / "sweep.parquet")
    (folder / "bubble_heatmap.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    assert fastpp.report(folder, output=tmp_path / "r.html").stat().st_size > 0


def _payload(path) -> dict:
    """The data a report's page draws from (its fastpp-data script)."""
    import json

    text = Path(path).read_text(encoding="utf-8")
    found = re.search(r'<script type="application/json" id="fastpp-data">(.*?)</script>', text,
                      re.S)
    return json.loads(found.group(1))


def test_the_main_jobs_report_takes_its_summary_latency_and_budget(tmp_path, capsys):
    """The report had always shown the middle latency and 1F1B's peak whatever
    --summary-comm and --budget said, so every row of its table differed from the summary
    printed beside it (a review)."""
    sweep = script("sweep")
    assert sweep.main(["-p", "4", "--n-per-p", "1", "2", "-m", "1", "2", "--summary-comm", "0.2",
                       "--budget", "3", "--out", str(tmp_path), "--no-progress"]) == 0
    assert "within the memory budget (3 units), latency 0.2:" in capsys.readouterr().out
    sections = _payload(tmp_path / "report.html")["sections"]
    assert all("comm=0.2" in s["title"] for s in sections if "comm=" in s["title"])
    best = next(s for s in sections if s["title"].startswith("Timelines"))["items"][0]
    schedule = [c["name"] for c in best["columns"]].index("schedule")
    table = pd.read_parquet(tmp_path / "sweep.parquet")
    want = fastpp.best_within_budget(table[table["comm"] == 0.2], 3.0)
    assert [r[schedule] for r in best["rows"]] == list(want["schedule"])  # as printed
    with pytest.raises(fastpp.ScheduleError, match=r"setting must name a cost column of the "
                                                   r"sweep and one of its values \(got "
                                                   r"comm=0.3;"):
        fastpp.report(table, output=tmp_path / "x.html", setting={"comm": 0.3})
    # one number: a list had been compared element-wise (pandas' ValueError), False taken as 0
    for value in ([0.2, 0.0], False):
        with pytest.raises(fastpp.ScheduleError, match=r"setting must name a cost column of "
                                                       r"the sweep and one of its values"):
            fastpp.report(table, output=tmp_path / "x.html", setting={"comm": value})


def test_a_plans_report_tells_apart_the_rows_its_summary_does(tmp_path):
    """A plan over ZeRO stages and CP degrees: its report's table and hover had no cp or zero,
    so 342 configurations each showed twice, alike (a review)."""
    from fastpp.model import plan
    from fastpp.reports.figures import plan_sections

    df = plan("llama3-8b", gpus=16, seq=4096, global_batch=64, zero=[1, 3], cp=[1, 2], tp=[2],
              pp=[2], microbatch=[1], schedules=["1f1b"], workers=1)
    scatter, table = plan_sections(df, "plan")[0]["items"]
    names = [c["name"] for c in table["columns"]]
    assert {"cp", "zero"} <= set(names)
    said = [k for k in names if k in ("t", "cp", "p", "d", "zero", "schedule", "m", "mb", "n",
                                      "recompute")]
    shown = [tuple(r[names.index(k)] for k in said) for r in table["rows"]]
    assert len(set(shown)) == len(shown)
    hover = [c[0] for trace in scatter["figure"]["data"] for c in trace["customdata"]]
    assert any("zero=3" in h for h in hover) and any("cp=2" in h for h in hover)
