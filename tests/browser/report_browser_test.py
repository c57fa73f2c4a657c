#!/usr/bin/env python3
"""The HTML report as a reader sees it: rendered by headless Chromium.

Runs a tiny `copytask compare` (three schemes, one of them causal ALiBi, two seeds, 60
steps), writes its report, opens it in headless Chromium through Selenium, takes a
full-page screenshot and checks that every expected chart is displayed with a real size
and that the pixels inside it are drawn: enough non-white pixels, heatmap colours in the
heatmaps, and the hatched causal mask in the causal scheme's attention maps.

Screenshots go to $COPYTASK_SCREENSHOT_DIR when it is set.
Needs Debian's chromium, chromium-driver, python3-selenium and python3-pil
(scripts/test.sh installs them).

Usage: report_browser_test.py --copytask BUILD/copytask --report-writer BUILD/tests/copytask_report_write
"""
import argparse
import io
import json
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

WIDTH = 1200  # window width in CSS pixels; the page's content is at most 1100 wide


def fail(message):
    print("report_browser_test: FAIL: " + message, file=sys.stderr)
    sys.exit(1)


def browser_paths():
    """Chromium and its driver, or a failure that says what to install."""
    browser = next((shutil.which(n) for n in ("chromium", "chromium-browser") if shutil.which(n)), None)
    driver = shutil.which("chromedriver") or ("/usr/bin/chromedriver" if os.path.exists("/usr/bin/chromedriver") else None)
    if not browser or not driver:
        fail("headless Chromium is needed but %s is missing; install it with "
             "`scripts/setup.sh chromium chromium-driver python3-selenium python3-pil`"
             % ("chromium" if not browser else "chromedriver"))
    try:
        import selenium  # noqa: F401
        import PIL  # noqa: F401
    except ImportError as error:
        fail("%s; install python3-selenium and python3-pil (scripts/setup.sh does)" % error)
    return browser, driver


def run_study(copytask, workdir):
    config = {
        "task": {"examples": 600},
        # One thread: with two, on 2 cores busy with a parallel build, this study once took
        # 56 s instead of 3 s (OpenMP threads waiting on each other).
        "train": {"steps": 60, "eval_every": 20, "batch_size": 128, "lr": 0.003, "seeds": [0, 1], "device": "cpu",
                  "threads": 1},
        "compare": {"schemes": [
            {"name": "learned", "model.positional": "learned"},
            {"name": "rope", "model.positional": "rope"},
            {"name": "alibi+causal", "model.positional": "alibi", "model.causal": True},
        ]},
        "report": {"probes": ["7 1 8 2", "3 5"]},
    }
    config_path = os.path.join(workdir, "tiny.json")
    with open(config_path, "w") as f:
        json.dump(config, f)
    study = os.path.join(workdir, "study")
    started = time.time()
    result = subprocess.run([copytask, "compare", "--config", config_path, "--out", study],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=150)
    if result.returncode != 0:
        fail("copytask compare exited with %d:\n%s" % (result.returncode, result.stdout[-3000:]))
    print("study: %.1f s" % (time.time() - started))
    return study


# ---- A stand-in positional.json ------------------------------------------------------------------
# Used only when the copytask under test does not write positional.json yet, so the
# positional charts are still rendered and checked; the formulas follow DESIGN.md section 2.

def _pca2(vectors):
    """Top-2 PCA of the rows: (scores Tx2, ratios [a, b], mean, axes 2xD), pure Python."""
    t, d = len(vectors), len(vectors[0])
    mean = [sum(v[k] for v in vectors) / t for k in range(d)]
    xc = [[v[k] - mean[k] for k in range(d)] for v in vectors]
    gram = [[sum(a * b for a, b in zip(xi, xj)) for xj in xc] for xi in xc]
    total = sum(gram[i][i] for i in range(t)) or 1.0
    axes, ratios, found = [], [], []
    for _ in range(2):
        u = [1.0 + 0.01 * i for i in range(t)]
        for _ in range(200):  # power iteration with deflation of what was found
            w = [sum(gram[i][j] * u[j] for j in range(t)) for i in range(t)]
            for lam, f in found:
                dot = sum(a * b for a, b in zip(f, u))
                w = [wi - lam * dot * fi for wi, fi in zip(w, f)]
            norm = math.sqrt(sum(x * x for x in w)) or 1.0
            u = [x / norm for x in w]
        lam = sum(u[i] * sum(gram[i][j] * u[j] for j in range(t)) for i in range(t))
        found.append((lam, u))
        ratios.append(lam / total)
        axis = [sum(xc[i][k] * u[i] for i in range(t)) / math.sqrt(max(lam, 1e-12)) for k in range(d)]
        axes.append(axis)
    project = lambda v: [sum((v[k] - mean[k]) * a[k] for k in range(d)) for a in axes]
    return [project(v) for v in vectors], ratios, project


def _similarities(vectors):
    dot = [[sum(a * b for a, b in zip(u, v)) for v in vectors] for u in vectors]
    norms = [math.sqrt(dot[i][i]) or 1.0 for i in range(len(vectors))]
    cosine = [[dot[i][j] / (norms[i] * norms[j]) for j in range(len(vectors))] for i in range(len(vectors))]
    return dot, cosine


def synthetic_positional(config, results, steps):
    t, d, h = config["task"]["context"], config["model"]["embed"], config["model"]["heads"]
    out = {"context": t, "schemes": {}}
    for name, scheme in results["schemes"].items():
        kind = scheme["positional"]
        runs = []
        for run in scheme["runs"]:
            seed = run["seed"]
            entry = {"seed": seed}
            if kind in ("sinusoidal", "learned"):
                rng = random.Random(seed)
                table = [[(math.sin if k % 2 == 0 else math.cos)(p / 10000 ** ((k - k % 2) / d)) for k in range(d)]
                         for p in range(t)]
                if kind == "learned":
                    table = [[x + rng.gauss(0, 0.3) for x in row] for row in table]
                dot, cosine = _similarities(table)
                points, ratios, project = _pca2(table)
                entry["vectors"] = {"dot": dot, "cosine": cosine,
                                    "pca": {"points": points, "explained_variance_ratio": ratios}}
                if kind == "learned":
                    start = [[rng.gauss(0, 1) for _ in range(d)] for _ in range(t)]
                    entry["path"] = [{"step": s, "points": [project([a + (b - a) * f for a, b in zip(u, v)])
                                                            for u, v in zip(start, table)]}
                                     for s, f in ((s, s / max(steps)) for s in [0] + steps)]
            elif kind == "rope":
                dh = d // h
                dist = list(range(-(t - 1), t))
                score = [sum(math.cos(x * 10000 ** (-2 * i / dh)) for i in range(dh // 2)) / (dh // 2) for x in dist]
                entry["relative_kernel"] = {"distance": dist, "score": score, "head_dim": dh}
            elif kind == "alibi":
                slopes = [2 ** (-8 * (k + 1) / h) for k in range(h)]
                entry["slopes"] = slopes
                entry["bias"] = [[[-s * abs(i - j) for j in range(t)] for i in range(t)] for s in slopes]
            runs.append(entry)
        out["schemes"][name] = {"positional": kind, "causal": scheme["causal"], "runs": runs}
    return out


def ensure_positional(study):
    path = os.path.join(study, "positional.json")
    if os.path.exists(path):
        return False
    with open(os.path.join(study, "config.json")) as f:
        config = json.load(f)
    with open(os.path.join(study, "results.json")) as f:
        results = json.load(f)
    with open(os.path.join(study, "metrics.jsonl")) as f:
        steps = sorted({json.loads(line)["step"] for line in f if line.strip()})
    with open(path, "w") as f:
        json.dump(synthetic_positional(config, results, steps), f)
    return True


# ---- What the page must show -----------------------------------------------------------------------

HEATMAPS = {"attention", "heatmap-cosine", "heatmap-dot", "alibi-bias"}


def expected_charts(study):
    """{chart kind: how many} from the study's own files."""
    with open(os.path.join(study, "attention.json")) as f:
        attention = json.load(f)
    with open(os.path.join(study, "positional.json")) as f:
        positional = json.load(f)
    expected = {"accuracy": 1, "curves": 1, "loss": 1, "by-length": 1,
                "attention": len(attention["probes"]) * len(attention["schemes"])}
    for scheme in positional["schemes"].values():
        run = scheme["runs"][0]
        for key, kinds in (("vectors", ["heatmap-cosine", "heatmap-dot", "pca"]), ("path", ["pca-path"]),
                           ("relative_kernel", ["rope-kernel"]), ("bias", ["alibi-bias"])):
            if key in run:
                for kind in kinds:
                    expected[kind] = expected.get(kind, 0) + 1
    return expected


def screenshot_page(html_path, browser, driver_path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from PIL import Image

    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--force-device-scale-factor=1", "--hide-scrollbars", "--window-size=%d,900" % WIDTH):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    try:
        driver.get("file://" + os.path.abspath(html_path))
        # The window as tall as the document, so one screenshot holds the whole page.
        for _ in range(3):
            height = driver.execute_script("return document.documentElement.scrollHeight")
            inner = driver.execute_script("return window.innerHeight")
            if inner >= height:
                break
            size = driver.get_window_size()
            driver.set_window_size(WIDTH, size["height"] + height - inner)
        image = Image.open(io.BytesIO(driver.get_screenshot_as_png())).convert("RGB")
        charts = []
        for element in driver.find_elements(By.CSS_SELECTOR, "svg.chart"):
            classes = element.get_attribute("class").split()
            charts.append({"kind": classes[1] if len(classes) > 1 else "", "id": element.get_attribute("id"),
                           "displayed": element.is_displayed(), "rect": element.rect,
                           "cells": [g.rect for g in element.find_elements(By.CSS_SELECTOR, "g.cells")]})
        overflow = driver.execute_script("return document.documentElement.scrollWidth > window.innerWidth")
        return image, charts, overflow
    finally:
        driver.quit()


def pixel_stats(image, rects):
    """Counts over the screenshot's pixels inside `rects` (CSS pixels; the scale factor is 1)."""
    pixels = []
    for rect in rects:
        box = (int(rect["x"]), int(rect["y"]), int(rect["x"] + rect["width"]), int(rect["y"] + rect["height"]))
        pixels += list(image.crop(box).getdata())
    return {
        "pixels": len(pixels),
        "ink": sum(1 for r, g, b in pixels if min(r, g, b) < 235),             # clearly not the white page
        "painted": sum(1 for r, g, b in pixels if min(r, g, b) < 251),         # any fill, even near-white
        "colourful": sum(1 for r, g, b in pixels if max(r, g, b) - min(r, g, b) > 60),
        # The hatched mask: neutral greys (no colour scale here has any), lighter than text.
        "hatch": sum(1 for r, g, b in pixels if max(r, g, b) - min(r, g, b) < 8 and 140 <= r <= 242),
        "colours": len({(r // 32, g // 32, b // 32) for r, g, b in pixels if max(r, g, b) - min(r, g, b) > 60}),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copytask", required=True)
    parser.add_argument("--report-writer", required=True, help="a program taking STUDY_DIR OUT_FILE")
    args = parser.parse_args()
    browser, driver = browser_paths()
    started = time.time()
    workdir = tempfile.mkdtemp(prefix="copytask_browser_")
    try:
        study = run_study(args.copytask, workdir)
        if ensure_positional(study):
            print("positional.json not written by this copytask: checking the report with a stand-in one")
        report = os.path.join(workdir, "report.html")
        result = subprocess.run([args.report_writer, study, report], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, timeout=60)
        if result.returncode != 0:
            fail("writing the report failed (%d): %s" % (result.returncode, result.stdout))
        image, charts, overflow = screenshot_page(report, browser, driver)
        shots = os.environ.get("COPYTASK_SCREENSHOT_DIR")
        if shots:
            os.makedirs(shots, exist_ok=True)
            image.save(os.path.join(shots, "report.png"))
            shutil.copy(report, os.path.join(shots, "report.html"))
            print("screenshot: %s (%dx%d)" % (os.path.join(shots, "report.png"), image.width, image.height))

        problems = []
        if overflow:
            problems.append("the page is wider than the %d px window (horizontal scrolling)" % WIDTH)
        expected = expected_charts(study)
        found = {}
        for chart in charts:
            found[chart["kind"]] = found.get(chart["kind"], 0) + 1
        for kind, count in sorted(expected.items()):
            if found.get(kind, 0) != count:
                problems.append("expected %d chart(s) of kind '%s', found %d" % (count, kind, found.get(kind, 0)))
        causal_attention = 0
        for chart in charts:
            name, rect = chart["id"] or chart["kind"], chart["rect"]
            if not chart["displayed"]:
                problems.append("%s is not displayed" % name)
                continue
            if rect["width"] < 150 or rect["height"] < 100:
                problems.append("%s is only %.0fx%.0f px" % (name, rect["width"], rect["height"]))
                continue
            if rect["y"] + rect["height"] > image.height + 1 or rect["x"] + rect["width"] > image.width + 1:
                problems.append("%s lies outside the screenshot" % name)
                continue
            stats = pixel_stats(image, [rect])
            if stats["ink"] < max(800, 0.03 * stats["pixels"]):
                problems.append("%s looks blank: %d of %d pixels drawn" % (name, stats["ink"], stats["pixels"]))
            line = "  %-44s %4.0fx%-4.0f ink %5.1f%%" % (name, rect["width"], rect["height"],
                                                         100.0 * stats["ink"] / stats["pixels"])
            if chart["kind"] in HEATMAPS:
                # Inside the maps themselves (not the colour bar): every cell painted, and in
                # the colours of a scale, not grey. Diverging maps may be pale where values are
                # near 0, so only a few of their pixels need to be strongly coloured.
                cells = pixel_stats(image, chart["cells"])
                causal = "alibi-causal" in name
                least = (0.3 if causal else 0.5) if chart["kind"] in ("attention", "alibi-bias") else 0.03
                if not chart["cells"] or cells["painted"] < 0.7 * cells["pixels"]:
                    problems.append("%s: its maps are not painted (%d of %d pixels)"
                                    % (name, cells["painted"], cells["pixels"]))
                elif cells["colourful"] < least * cells["pixels"] or cells["colours"] < 3:
                    problems.append("%s lacks heatmap colours: %d colourful pixels of %d, %d colour bins"
                                    % (name, cells["colourful"], cells["pixels"], cells["colours"]))
                line += "  maps %d, colourful %5.1f%%, %d colour bins, hatch %4.1f%%" % (
                    len(chart["cells"]), 100.0 * cells["colourful"] / max(1, cells["pixels"]), cells["colours"],
                    100.0 * cells["hatch"] / max(1, cells["pixels"]))
                if chart["kind"] == "attention" and not causal and cells["hatch"] > 0.05 * cells["pixels"]:
                    problems.append("%s: hatching in a scheme without a causal mask" % name)
                if causal:
                    # 45 of the 100 cells of a 10 x 10 map lie above the diagonal.
                    causal_attention += chart["kind"] == "attention"
                    if cells["hatch"] < 0.3 * cells["pixels"]:
                        problems.append("%s: the causal mask's hatching is not visible (%d of %d pixels)"
                                        % (name, cells["hatch"], cells["pixels"]))
            print(line)
        if causal_attention == 0:
            problems.append("no attention chart of the causal scheme (id with 'alibi-causal') was found")
        if problems:
            fail("%d problem(s) in the rendered report:\n  " % len(problems) + "\n  ".join(problems))
        print("report_browser_test: OK, %d charts checked in %.1f s" % (len(charts), time.time() - started))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
