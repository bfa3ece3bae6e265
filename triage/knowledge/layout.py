"""Tidy left-to-right layout of the decision tree and the highlight set for matched nodes."""

from __future__ import annotations

import re
from dataclasses import dataclass

from triage.knowledge.loader import ROOT_ID, KnowledgeBase

# Uneven columns: the widest labels (causes) get the widest gap so no edge crosses a label.
COLUMN_X = {"root": 0.0, "symptom": 0.8, "cause": 1.8, "technique": 3.2}
CAUSE_GAP = 0.35  # extra rows after a cause with one technique: cause labels sit above their marker


@dataclass(frozen=True)
class PlacedNode:
    """One drawn node. A technique under several causes is drawn once per cause, so ``key``
    (unique per drawing) differs from ``id`` (the knowledge id a click selects)."""

    key: str
    id: str
    kind: str
    label: str
    x: float
    y: float
    parent_key: str | None


def _technique_label(kb: KnowledgeBase, tid: str, lang: str) -> str:
    tech = kb.techniques[tid]
    return tech.title.zh.split("（")[0] if lang == "zh" else tech.short


def layout(kb: KnowledgeBase, lang: str = "en") -> list[PlacedNode]:
    """Leaves get consecutive rows (top to bottom); each parent sits at the mean row of its children."""
    nodes: list[PlacedNode] = []
    row = 0.0
    symptom_ys: list[float] = []
    for sym in kb.symptoms:
        cause_ys: list[float] = []
        for cause in sym.causes:
            leaf_ys: list[float] = []
            for ct in cause.techniques:
                leaf_ys.append(-row)
                nodes.append(PlacedNode(f"{cause.id}/{ct.id}", ct.id, "technique",
                                        _technique_label(kb, ct.id, lang), COLUMN_X["technique"], -row,
                                        cause.id))
                row += 1
            cause_ys.append(sum(leaf_ys) / len(leaf_ys))
            if len(leaf_ys) == 1:  # a two-line label above the next cause's marker would touch this one's
                row += CAUSE_GAP
            nodes.append(PlacedNode(cause.id, cause.id, "cause", cause.short.get(lang), COLUMN_X["cause"], cause_ys[-1],
                                    sym.id))
        row += 0.6  # a gap between symptom groups keeps the branches apart
        symptom_ys.append(sum(cause_ys) / len(cause_ys))
        nodes.append(PlacedNode(sym.id, sym.id, "symptom", sym.short.get(lang), COLUMN_X["symptom"], symptom_ys[-1],
                                ROOT_ID))
    root_label = kb.guidance.root.get(lang).split("（")[0].split(" (")[0]
    root_y = sum(symptom_ys) / len(symptom_ys)
    nodes.append(PlacedNode(ROOT_ID, ROOT_ID, "root", root_label, COLUMN_X["root"], root_y, None))
    return nodes


def _cells(ch: str) -> int:
    """Display width of a character: CJK and full-width forms take two cells."""
    return 2 if ord(ch) >= 0x2E80 else 1


def _tokens(text: str) -> list[str]:
    """Words split at spaces (an ASCII word also after each slash); a word with CJK characters splits into
    single characters (CJK wraps anywhere)."""
    out: list[str] = []
    for word in text.split():
        if all(_cells(c) == 1 for c in word):
            out += re.findall(r"[^/-]+[/-]?|[/-]", word)  # "FlashAttn/FlashInfer", "Prefix-aware": after / or -
            continue
        run = ""
        for c in word:
            if _cells(c) == 2:
                out += [run] if run else []
                out.append(c)
                run = ""
            else:
                run += c
        out += [run] if run else []
    return out


def _join(line: str, tok: str) -> str:
    """``tok`` after ``line``: with a space between two ASCII words, glued after a word's own / or -."""
    if not line or not tok:
        return line + tok
    glued = line[-1] in "/-" and not line.endswith((" /", " -")) and line not in ("/", "-")
    return f"{line} {tok}" if not glued and _cells(line[-1]) == 1 and _cells(tok[0]) == 1 else line + tok


def _split_long(tok: str, room: int) -> tuple[str, str] | None:
    """The head of an over-long word that fits in ``room`` cells, and the rest: at a change from lower to upper
    case ("Paged|Attention") without a hyphen, else cut with one; None when fewer than 3 characters fit."""
    camel = [i for i in range(3, len(tok)) if tok[i - 1].islower() and tok[i].isupper() and _width(tok[:i]) <= room]
    if camel:
        return tok[:camel[-1]], tok[camel[-1]:]
    n = 0
    while n < len(tok) and _width(tok[:n + 1]) <= room - 1:
        n += 1
    return (tok[:n] + "-", tok[n:]) if n >= 3 else None


def _width(text: str) -> int:
    return sum(_cells(c) for c in text)


def wrap_label(text: str, width: int, max_lines: int = 2) -> str:
    """``text`` broken into lines of at most ``width`` cells (at spaces; CJK anywhere), joined with <br>.

    Beyond ``max_lines`` the last line ends in "…" (the full label stays in the hover)."""
    lines: list[str] = []
    line = ""
    for tok in _tokens(text):
        while _width(tok) > width:  # one word wider than a line: its head ends this line, the rest goes on
            room = width - _width(line) - (1 if line else 0)  # a space before the head
            split = _split_long(tok, room)
            if split is None:  # too little room left on this line for a readable head
                lines.append(line)
                line = ""
                continue
            head, tok = split
            lines.append(_join(line, head))
            line = ""
        joined = _join(line, tok)
        if line and _width(joined) > width:
            lines.append(line)
            line = tok
        else:
            line = joined
    if line:
        lines.append(line)
    if len(lines) > max_lines:
        last = lines[max_lines - 1]
        while last and _width(last) + 1 > width:
            last = last[:-1]
        lines = lines[:max_lines - 1] + [last.rstrip(" -") + "…"]
    return "<br>".join(lines)


def highlight_keys(nodes: list[PlacedNode], matched_ids: set[str]) -> set[str]:
    """Keys of every node on a path from the root to a matched node, plus a matched cause's techniques.

    A matched symptom lights its path only; a matched cause also lights the techniques it
    recommends, since those are what the user should look at next.
    """
    by_key = {n.key: n for n in nodes}
    lit: set[str] = set()
    for node in nodes:
        hit = node.id in matched_ids or (node.kind == "technique" and node.parent_key in matched_ids)
        if not hit:
            continue
        key: str | None = node.key
        while key is not None:
            lit.add(key)
            key = by_key[key].parent_key
    return lit


def selected_keys(nodes: list[PlacedNode], selected_id: str | None) -> set[str]:
    """Every drawing of the selected id (a technique may be drawn several times)."""
    return {n.key for n in nodes if selected_id is not None and n.id == selected_id}
