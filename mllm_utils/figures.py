"""Figures every learner can read: a colour-blind-safe palette, lines told apart by more than colour, and a
description (alt text) stored with every figure.

    from mllm_utils import figures
    figures.use_style()                       # once, after the imports: palette, markers, readable text
    fig, ax = plt.subplots()
    ...
    figures.show(fig, alt=f"Training loss against epoch: falls from {first:.2f} to {last:.2f}.")

:func:`show` replaces ``plt.show()``: it shows the figure as a PNG whose output carries the description
(``metadata["image/png"]["alt"]``, which nbconvert and the course's website use as the image's ``alt``), and
closes it. Write the description from the values the figure was drawn from, so it is true at every run size.
:func:`place_labels` writes labels beside the points of a scatter plot where they overlap nothing.
"""

from __future__ import annotations

import io

# Okabe and Ito's palette ("Color Universal Design", 2008): told apart with every common colour-vision
# deficiency. Yellow (#F0E442) is left out: too light on white.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000")
MARKERS = ("o", "s", "^", "D", "v", "P", "X")
LINESTYLES = ("-", "--", "-.", ":", (0, (5, 1)), (0, (3, 1, 1, 1, 1, 1)), (0, (1, 3)))
# A sequential colour map that stays readable in grey and for colour-blind readers.
CMAP = "viridis"
DPI = 100
MIN_ALT_CHARS = 20


def use_style() -> None:
    """Set matplotlib's defaults for the course: the palette, each colour with its own line style (so lines
    differ by more than colour; add ``marker=figures.MARKERS[i]`` where points matter), text large enough to
    read at a page's width, and viridis."""
    import matplotlib as mpl
    from cycler import cycler

    mpl.rcParams.update({
        "axes.prop_cycle": cycler(color=PALETTE) + cycler(linestyle=LINESTYLES),
        "lines.markersize": 5,
        "font.size": 12,
        "axes.titlesize": 13,
        "axes.labelsize": 12,
        "xtick.labelsize": 11,
        "ytick.labelsize": 11,
        "legend.fontsize": 11,
        "image.cmap": CMAP,
        "figure.dpi": DPI,
    })


def check_alt(alt) -> str:
    """``alt`` if it is a real description (a sentence, not a file name), else a ValueError that says why."""
    if not isinstance(alt, str):
        raise TypeError(f"alt must be a string that describes the figure, got {type(alt).__name__}")
    text = " ".join(alt.split())
    if len(text) < MIN_ALT_CHARS or text.lower().endswith((".png", ".jpg", ".svg")):
        raise ValueError(f"alt must describe what the figure shows (what against what, and what it finds) "
                         f"in at least {MIN_ALT_CHARS} characters, got {alt!r}")
    return text


def show(fig=None, alt: str = "") -> None:
    """Show ``fig`` (default: the current figure) with its description ``alt``, then close it.

    In a notebook the figure becomes a PNG output whose metadata holds ``alt``; outside IPython it falls back
    to ``plt.show()`` and prints the description.
    """
    import matplotlib.pyplot as plt

    text = check_alt(alt)
    fig = fig if fig is not None else plt.gcf()
    try:
        from IPython import get_ipython
        from IPython.display import Image, display
    except ImportError:
        get_ipython = None
    if get_ipython is None or get_ipython() is None:
        print(f"[figure] {text}")
        plt.show()
        return
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    display(Image(data=buffer.getvalue(), format="png"), metadata={"image/png": {"alt": text}})


LABEL_OFFSETS = ((4, 4), (4, -12), (-8, 4), (-8, -12), (4, 14), (-8, 14), (14, -4), (-18, -4), (4, 24), (-8, 24),
                 (4, -22), (-8, -22))


def place_labels(ax, labels, points, fontsize=11, together=6, offsets=LABEL_OFFSETS) -> None:
    """Write each label next to its point, at the first offset (in points) where it overlaps no other marker and
    no label placed before, joined to its point by a thin line; a label left of its point ends there. Points
    closer than ``together`` pixels on the screen share one label ("f, t").

    ``labels``: one string per point; ``points``: (x, y) in data coordinates, as many as labels.
    """
    from matplotlib.transforms import Bbox

    if len(labels) != len(points):
        raise ValueError(f"place_labels: {len(labels)} labels for {len(points)} points; give one label per point")
    ax.figure.canvas.draw()  # fixes the axis limits, so that the places on the screen are final
    renderer = ax.figure.canvas.get_renderer()
    screen = ax.transData.transform(points)
    groups = []  # the indices of points that share a label
    for k, (x, y) in enumerate(screen):
        near = next((g for g in groups if abs(screen[g[0]][0] - x) < together and abs(screen[g[0]][1] - y) < together),
                    None)
        if near is None:
            groups.append([k])
        else:
            near.append(k)
    markers = [Bbox.from_extents(x - 4, y - 4, x + 4, y + 4) for x, y in screen]
    placed = []  # the labels written so far
    for group in groups:
        text = ", ".join(labels[k] for k in group)
        point = tuple(sum(points[k][axis] for k in group) / len(group) for axis in (0, 1))
        others = [box for k, box in enumerate(markers) if k not in group] + placed
        for dx, dy in tuple(offsets) + tuple(offsets[:1]):  # the last try, the first again, is kept if none is free
            label = ax.annotate(text, point, xytext=(dx, dy), textcoords="offset points", fontsize=fontsize,
                                ha="left" if dx > 0 else "right")
            box = label.get_window_extent(renderer).padded(1)
            label.remove()
            if not any(box.overlaps(other) for other in others):
                break
        ax.annotate(text, point, xytext=(dx, dy), textcoords="offset points", fontsize=fontsize,
                    ha="left" if dx > 0 else "right",
                    arrowprops={"arrowstyle": "-", "color": "gray", "linewidth": 0.6, "shrinkA": 0, "shrinkB": 3})
        placed.append(box)
