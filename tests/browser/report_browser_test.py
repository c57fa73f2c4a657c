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

Usage: report_browser_test.py --copytask BUILD/copytask
"""
import argparse
import io
import json
import os
import shutil
import socket
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
    # Selenium and chromedriver talk over http://localhost: a machine without the usual
    # /etc/hosts entry (a bare debootstrap chroot) cannot run them.
    try:
        socket.getaddrinfo("localhost", None)
    except socket.gaierror:
        fail("the name localhost does not resolve on this machine (no /etc/hosts entry?); "
             "Selenium needs it to reach chromedriver: add '127.0.0.1 localhost' to /etc/hosts")
    return browser, driver


def run_study(copytask, workdir):
    config = {
        "task": {"examples": 600},
        # One thread: with two, on 2 cores busy with a parallel build, this study once took
        # 56 s instead of 3 s (OpenMP threads waiting on each other).
        "train": {"steps": 60, "eval_every": 20, "batch_size": 128, "lr": 0.003, "seeds": [0, 1], "device": "cpu",
                  "threads": 1},
        # Lengths beyond the trained ones draw the length-generalization and the "why" charts;
        # a reverse arm gets its own data and probe target.
        "eval": {"max_len": 10, "per_length": 20},
        "compare": {"schemes": [
            {"name": "learned", "model.positional": "learned", "model.learned_positions": 21},
            {"name": "rope", "model.positional": "rope"},
            {"name": "alibi+causal", "model.positional": "alibi", "model.causal": True},
            {"name": "rope-reverse", "model.positional": "rope", "task.kind": "reverse"},
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


# ---- What the page must show -----------------------------------------------------------------------

HEATMAPS = {"attention", "heatmap-cosine", "heatmap-dot", "score-bias"}


def expected_charts(study):
    """{chart kind: how many} from the study's own files."""
    with open(os.path.join(study, "attention.json")) as f:
        attention = json.load(f)
    with open(os.path.join(study, "positional.json")) as f:
        positional = json.load(f)
    expected = {"accuracy": 1, "curves": 1, "loss": 1, "by-length": 1,
                "attention": len(attention["probes"]) * len(attention["schemes"])}
    with open(os.path.join(study, "results.json")) as f:
        results = json.load(f)
    with_lengths = [s for s in results["schemes"].values() if "length_generalization" in s]
    if with_lengths:
        # The length chart, and the "why" section: source attention, accuracy by output
        # position, entropy, and one stacked error chart per scheme.
        expected.update({"length-generalization": 1, "source-attention": 1, "output-position": 1, "entropy": 1,
                         "errors": len(with_lengths)})
    for scheme in positional["schemes"].values():
        run = scheme["runs"][0]
        for key, kinds in (("vectors", ["heatmap-cosine", "heatmap-dot", "pca"]), ("path", ["pca-path"]),
                           ("relative_kernel", ["rope-kernel"]), ("bias", ["score-bias", "bias-distance"])):
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
    args = parser.parse_args()
    browser, driver = browser_paths()
    started = time.time()
    workdir = tempfile.mkdtemp(prefix="copytask_browser_")
    try:
        study = run_study(args.copytask, workdir)
        for name in ("positional.json", "report.html"):
            if not os.path.exists(os.path.join(study, name)):
                fail("compare wrote no %s" % name)
        # `copytask report` collects the study again and writes the page where asked.
        report = os.path.join(workdir, "report.html")
        result = subprocess.run([args.copytask, "report", study, "--out", report], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, timeout=60)
        if result.returncode != 0 or "report: " + report not in result.stdout:
            fail("copytask report failed (%d): %s" % (result.returncode, result.stdout))
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
                least = (0.3 if causal else 0.5) if chart["kind"] in ("attention", "score-bias") else 0.03
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
