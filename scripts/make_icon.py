"""Draw assets/page_icon.png, the app's page icon (a lit branch of a tree), served by the app itself.

The icon was a Material Symbols name, which Streamlit turns into a favicon fetched from fonts.gstatic.com on
every page: a third-party request from each visitor's browser. Run: .venv/bin/python scripts/make_icon.py
"""

from __future__ import annotations

from pathlib import Path

from PIL import Image, ImageDraw

OUT = Path(__file__).resolve().parent.parent / "assets" / "page_icon.png"
SIZE = 128
ACCENT, WHITE, DIM = (211, 47, 47, 255), (255, 255, 255, 255), (255, 255, 255, 140)


def draw() -> Image.Image:
    img = Image.new("RGBA", (SIZE, SIZE), (0, 0, 0, 0))
    d = ImageDraw.Draw(img)
    d.rounded_rectangle((4, 4, SIZE - 5, SIZE - 5), radius=26, fill=ACCENT)
    root, left, right, leaf = (64, 30), (38, 66), (90, 66), (90, 100)
    d.line((root, left), fill=DIM, width=7)
    d.line((root, right), fill=WHITE, width=8)
    d.line((right, leaf), fill=WHITE, width=8)
    for (x, y), color, r in ((root, WHITE, 11), (left, DIM, 9), (right, WHITE, 11), (leaf, WHITE, 11)):
        d.ellipse((x - r, y - r, x + r, y + r), fill=color)
    return img


if __name__ == "__main__":
    OUT.parent.mkdir(exist_ok=True)
    draw().save(OUT, optimize=True)
    print(OUT)
